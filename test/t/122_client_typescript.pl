# The TypeScript client library (clients/typescript, @fencing/client)
# against a server with fencing and real lock services.
#
#   FENCING_CLIENT_TS     a copy of clients/typescript whose node_modules is
#                         the tree `npm ci` made from its lock file (the
#                         suite caches it by the lock file's hash); a
#                         node_modules/.complete marks a finished npm ci
#   FENCING_CLIENT_STORM  1: run the storm (20 workers x 500 fenced writes
#                         with Redis locks of 300 ms and pauses past the
#                         TTL); else it is left out, with a note
#
# Without FENCING_CLIENT_TS the test is skipped;
# test/suites/client_typescript.sh installs node and npm, runs npm ci and
# sets the variables.  The test builds the package with tsc (declarations
# included) and checks its entry points; starts a server (fencing
# preloaded), etcd, Redis, PgBouncer (transaction pooling, one server
# connection) and a three-server ZooKeeper ensemble as its own child
# processes on free ports; runs the tests with node's test runner (one check
# per test file's top-level test, their timelines as notes); then the
# README's first example (examples/quickstart.ts, which the README must
# show verbatim) twice on an empty database, a small run of the benchmark,
# and the storm.  Then every server and worker of the run must be gone.
use strict;
use warnings;
use FencingClients qw(need_env server run tap_checks stop_all leftovers);
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $env = need_env('client_typescript', FENCING_CLIENT_TS => 'a copy of clients/typescript with its node_modules');
my $dir = $env->{FENCING_CLIENT_TS};
my $tmp = $PostgreSQL::Test::Utils::tmp_check;

# ---- node, npm, the package's dependencies, tsc ------------------------------
my ($node_v, $npm_v) = (`node -v 2>/dev/null`, `npm -v 2>/dev/null`);
chomp($node_v, $npm_v);
ok($node_v && $npm_v, "node $node_v, npm $npm_v, etcd, ZooKeeper, Redis, PgBouncer are installed")
  or BAIL_OUT('no node');
my $modules = readlink("$dir/node_modules") // "$dir/node_modules";
ok(-f "$dir/node_modules/.complete",
	"npm ci from clients/typescript/package-lock.json (node_modules $modules)")
  or BAIL_OUT('no node_modules');

my ($st, $out) = run(cmd => [ 'sh', '-c',
		'./node_modules/.bin/tsc -p tsconfig.json && ./node_modules/.bin/tsc -p tsconfig.test.json' ],
	dir => $dir, timeout => 600);
ok($st == 0, 'tsc builds the library (with its .d.ts) and the tests, examples and benchmark')
  or do { diag($out); BAIL_OUT('tsc failed'); };

my $pkg = decode_json(slurp_file("$dir/package.json"));
my @missing;
foreach my $k (sort keys %{ $pkg->{exports} })
{
	my $v = $pkg->{exports}{$k};
	next unless ref $v;
	push @missing, "$k: $_" foreach grep { !-f "$dir/$_" } ($v->{types}, $v->{default});
}
($st, $out) = run(cmd => [ 'node', '-e',
		'require(process.argv[1] + "/dist/index.js").runFenced || process.exit(1)', $dir ]);
ok(!@missing && $pkg->{name} eq '@fencing/client' && $pkg->{version} eq '1.3.0' && $st == 0,
	"the package's entry points and declarations are where package.json says")
  or diag("missing: @missing; name $pkg->{name}, version $pkg->{version}; $out");

# ---- the servers ---------------------------------------------------------------
my $node = server('client_typescript');
my $db = 'client_ts';
$node->safe_psql('postgres', "CREATE DATABASE $db");
$node->safe_psql('postgres', "CREATE DATABASE ${db}_quickstart");
$node->safe_psql($db, q{
CREATE EXTENSION fencing;
CREATE TABLE fencing_lock_generations (service text PRIMARY KEY, generation int NOT NULL);
INSERT INTO fencing_lock_generations VALUES ('etcd', 0), ('zookeeper', 0), ('redis', 0);
});
my $t0 = time;
my $svc = FencingClients::services($node, $db, qw(etcd redis pgbouncer zookeeper));
ok($svc, sprintf('etcd, Redis, PgBouncer (transaction pooling, one server connection) and a three-server ZooKeeper ensemble are up (%.0f s)', time - $t0))
  or BAIL_OUT('the lock services did not start');
my %testenv = (
	FencingClients::pgenv($node, $db),
	FENCING_TS_ETCD           => $svc->{etcd},
	FENCING_TS_ZK             => $svc->{zk},
	FENCING_TS_REDIS_PORT     => $svc->{redis_port},
	FENCING_TS_PGBOUNCER_PORT => $svc->{pgbouncer_port});

# node --test in a process group of its own (stopped with the workers it
# started, frozen or not); a check per top-level test
my $summary = qr/^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) /;
sub node_tests
{
	my ($what, @files) = @_;
	my @conc = (split /\./, substr($node_v, 1))[0] >= 20
	  ? ('--test-concurrency=' . ($ENV{NODE_TEST_CONCURRENCY} // 4)) : ();
	my ($st, $out) = run(
		name    => "node --test ($what)",
		cmd     => [ 'node', '--test', '--test-reporter=tap', @conc, @files ],
		dir     => $dir,
		env     => \%testenv,
		timeout => 600,
		log     => "$tmp/node-test-$what.log");
	my @lines = grep { !/^# Subtest:/ } split /\n/, $out;
	my ($n, $bad) = tap_checks(join("\n", grep { !/$summary/ } @lines));
	note "node --test: " . substr($_, 2) foreach grep { /$summary/ } @lines;
	if ($st != 0 && !$bad)
	{
		fail("node --test @files exited $st without a failing test");
		diag(join("\n", grep { defined } @lines[-20 .. -1]));
	}
	return $n;
}
my @files = map { "build/test/" . (split m{/})[-1] }
  grep { !m{/storm\.test\.js$} } glob("$dir/build/test/*.test.js");
node_tests('main', @files);

# ---- the README's first example, verbatim, on an empty database --------------
my ($first) = slurp_file("$dir/README.md") =~ /^```(?:ts|typescript)\n(.*?)^```$/ms;
is($first, slurp_file("$dir/examples/quickstart.ts"),
	"the README's first example is examples/quickstart.ts, verbatim");
my %qenv = (%testenv, PGDATABASE => "${db}_quickstart");
my (undef, $qs1) = run(cmd => [ 'node', 'build/examples/quickstart.js' ], dir => $dir, env => \%qenv, timeout => 120);
my (undef, $qs2) = run(cmd => [ 'node', 'build/examples/quickstart.js' ], dir => $dir, env => \%qenv, timeout => 120);
note "quickstart, first run:  $_" foreach split /\n/, $qs1;
note "quickstart, second run: $_" foreach split /\n/, $qs2;
my ($t1) = $qs1 =~ /^invoice inv-1 paid with token (\d+:\d+)$/m;
my ($t2) = $qs2 =~ /^invoice inv-1 paid with token (\d+:\d+)$/m;
my $row = $node->safe_psql("${db}_quickstart",
	q{SELECT status || ' ' || fence::text FROM invoices WHERE id = 'inv-1'});
ok($t1 && $t2 && $t1 ne $t2 && $row eq "paid $t2",
	sprintf('the quickstart runs as written on an empty database, twice: a new lease token each time (%s, then %s), the row paid with the second',
		$t1 // '?', $t2 // '?'));

# ---- the benchmark, a short run (numbers only: see bench/bench.ts) -----------
($st, $out) = run(cmd => [ 'node', 'build/bench/bench.js' ], dir => $dir,
	env => { %testenv, FENCING_TS_BENCH_N => 300 }, timeout => 300);
note $out;
ok($st == 0, 'the benchmark runs (runFenced against the same transaction by hand, interleaved)')
  or diag($out);

# ---- the storm -------------------------------------------------------------------
if (($ENV{FENCING_CLIENT_STORM} // '') eq '1')
{
	node_tests('storm', 'build/test/storm.test.js');
}
else
{
	note 'the storm runs when FENCING_CLIENT_STORM=1 (the suite: on PostgreSQL 15 only, to keep it short)';
}

# ---- nothing left behind -------------------------------------------------------
stop_all();
$node->stop;
my @left = leftovers("$tmp/", "$dir/");
ok(!@left, 'every server and worker of the run has stopped') or diag(join("\n", @left));

done_testing();
