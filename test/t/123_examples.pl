# Every example of README.md and docs/ (its folders too), run as written.
#
#   FENCING_CLIENT_EXAMPLES   a copy of the pages: a directory with
#                             README.md, docs/ and test/examples/ (run.py,
#                             skips)
#   FENCING_CLIENT_NODE_PATH  node_modules with node-postgres (pg) for the
#                             JavaScript blocks
#   FENCING_CLIENT_GO_CACHE   optional: the Go build cache (the Go blocks
#                             build against Debian's pgx); else one in
#                             tmp_check
#   FENCING_CLIENT_PGTLE      optional: 1 when pg_tle is installed in this
#                             installation (the pages of the managed
#                             edition's pg_tle route run; else they skip)
#
# Without the first two the test is skipped; test/suites/examples.sh
# installs what the blocks use (psql, Debian's python3 with psycopg, redis,
# etcd3, kazoo; Go with pgx; Java with pgjdbc; node) and sets them.
#
# test/examples/run.py extracts every fenced code block of the pages and
# runs it verbatim: the SQL of a page block by block with psql in a fresh
# database of its own, shell blocks with bash, Python with Debian's
# python3, the Go, Java and node-postgres programs built and run; then the
# whole page again in the same database, where every block must do again
# what it did the first time.  Each block is one check.  A block that fails
# on purpose says so in the page (<!-- example: expect SF001 -->), one that
# cannot run here says why (<!-- example: skip ... -->); each skip is a
# note and counted.  The blocks that use Redis, etcd or ZooKeeper get them
# from this test, started as its own child processes on free ports
# (REDIS_URL, ETCDCTL_ENDPOINTS, ETCD_HOST/ETCD_PORT, ZK_HOSTS); the server
# is this test's too (fencing preloaded).  The pages of the edition for
# managed PostgreSQL (<!-- examples: managed ... -->) run on a second server
# of this test, as a managed service gives it: fencing not preloaded, pg_tle
# preloaded where it is installed (EXAMPLE_MANAGED_PORT, EXAMPLE_MANAGED_PGTLE).
use strict;
use warnings;
use FencingClients qw(need_env server run tap_checks stop_all leftovers);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $env = need_env('examples',
	FENCING_CLIENT_EXAMPLES  => 'a copy of README.md, docs/ and test/examples/',
	FENCING_CLIENT_NODE_PATH => 'node_modules with node-postgres');
my $root = $env->{FENCING_CLIENT_EXAMPLES};
my $tmp = $PostgreSQL::Test::Utils::tmp_check;

my $node = server('examples');
my $pgtle = ($ENV{FENCING_CLIENT_PGTLE} // '') eq '1';
my $managed = server('examples_managed',
	"shared_preload_libraries = '" . ($pgtle ? 'pg_tle' : '') . "'");
my $t0 = time;
my $svc = FencingClients::services($node, 'postgres', qw(redis etcd zookeeper));
ok($svc, sprintf('Redis, etcd and a three-server ZooKeeper ensemble serve (%.0f s)', time - $t0))
  or BAIL_OUT('the lock services did not start');

my $bindir = $node->config_data('--bindir');
my ($st, $out) = run(
	name => 'test/examples/run.py',
	cmd  => [
		'/usr/bin/python3', "$root/test/examples/run.py",
		'--root'  => $root,
		'--work'  => "$tmp/pages",
		'--cache' => "$tmp/examples-cache",
		'--psql'  => "$bindir/psql"
	],
	dir => $tmp,
	env => {
		FencingClients::pgenv($node, 'postgres'),
		REDIS_URL         => "redis://127.0.0.1:$svc->{redis_port}/0",
		ETCDCTL_API       => 3,
		ETCDCTL_ENDPOINTS => $svc->{etcd},
		ETCD_HOST         => '127.0.0.1',
		ETCD_PORT         => $svc->{etcd_port},
		ZK_HOSTS          => $svc->{zk},
		EXAMPLE_MANAGED_HOST  => '127.0.0.1',
		EXAMPLE_MANAGED_PORT  => $managed->port,
		EXAMPLE_MANAGED_PGTLE => $pgtle ? 1 : 0,
		NODE_PATH         => $env->{FENCING_CLIENT_NODE_PATH},
		GOCACHE => $ENV{FENCING_CLIENT_GO_CACHE} || "$tmp/gocache",
		# the server's psql first, then Debian's python3 (with its packages)
		PATH => "$bindir:/usr/bin:/bin:$ENV{PATH}",
	},
	timeout => 1800,
	log     => "$tmp/run.py.log");
my ($blocks) = tap_checks($out);
# a failed block says so in its check: this is the harness dying
ok($st == 0 && $blocks > 0, "test/examples/run.py ran to its end ($blocks blocks, exit $st)");

stop_all();
$node->stop;
$managed->stop;
my @left = leftovers("$tmp/");
ok(!@left, 'no process of the run is left') or diag(join("\n", @left));

done_testing();
