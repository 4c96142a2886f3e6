# The Go client library (clients/go/fencing, a Go module) against a server
# with fencing and real lock services.
#
#   FENCING_CLIENT_GO        a copy of clients/go/fencing (the module)
#   FENCING_CLIENT_GO_MODCACHE  a Go module cache holding every module of
#                            its go.sum: the build is offline
#                            (GOPROXY=off, GOFLAGS=-mod=readonly)
#   FENCING_CLIENT_GO_CACHE  optional: the Go build cache to use (kept
#                            between runs); else one in tmp_check
#   FENCING_CLIENT_EDITION   managed: against the edition for managed
#                            PostgreSQL (test/perl/FencingClients.pm),
#                            without the README's programs and the benchmarks
#   FENCING_CLIENT_STORM     1: run the storms (TestStormLease,
#                            TestStormRedis: 20 workers x 250 fenced writes
#                            each on a strict table, with pauses past a
#                            300 ms lease or Redis lock); else they show as
#                            skipped
#
# Without the first two the test is skipped; test/suites/client_go.sh
# fills the module cache from the Go module proxy and sets the variables.
# The test builds the library, its commands, examples, worker and test
# binary, and checks `go vet`; starts a server (fencing preloaded), etcd, a
# three-server ZooKeeper ensemble, Redis and PgBouncer (transaction mode)
# as its own child processes on free ports, and runs:
#   - `go test -v`, every test strict (a service not given fails the test
#     instead of skipping it); each top-level test is one check.  The tests
#     start worker processes and freeze them with SIGSTOP past their lock's
#     TTL.  The storms print their summary lines as notes.  The interop
#     tests take each lock against a holder of the docs' protocol:
#     `etcdctl lock`, test/locksvc/clients/worker.py (kazoo, Debian's
#     python3: FENCING_ZK_REFERENCE) and the docs' Redis scripts.
#   - the README's first example, which must be examples/quickstart/main.go
#     as it is, run twice as written in a database of its own.
#   - the benchmark (cmd/bench: the library against pgx by hand) and the
#     cost per transaction of each token source (cmd/tokenbench), their
#     numbers as notes.
# Then no process of the run may be left.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use FencingClients qw(need_env server run tap_checks stop_all leftovers);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $env = need_env('client_go',
	FENCING_CLIENT_GO          => 'a copy of clients/go/fencing',
	FENCING_CLIENT_GO_MODCACHE => 'a Go module cache with its go.sum\'s modules');
my $godir = $env->{FENCING_CLIENT_GO};
my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $bin = "$tmp/go-bin";

# the toolchain: the go command, at least the go.mod's version
my ($want) = slurp_file("$godir/go.mod") =~ /^go (\d+\.\d+)/m;
my ($gov) = (`go version 2>/dev/null` // '') =~ /\bgo(\d+\.\d+)/;
ok($gov && $want && sprintf('%03d%03d', split /\./, $gov) ge sprintf('%03d%03d', split /\./, $want),
	"go $gov (the module needs $want)")
  or BAIL_OUT('no go command new enough');

# the build: offline, from the module cache, go.sum checked
my %goenv = (
	GOFLAGS     => '-mod=readonly',
	GOPROXY     => 'off',
	GOSUMDB     => 'off',
	GOTOOLCHAIN => 'local',
	GOMODCACHE  => $env->{FENCING_CLIENT_GO_MODCACHE},
	GOCACHE     => $ENV{FENCING_CLIENT_GO_CACHE} || "$tmp/gocache");
my $t0 = time;
my ($st, $out, $log) = (0, '', '');
foreach my $step (
	[ 'build', '-o', "$bin/", './cmd/...', './examples/...', './internal/...' ],
	[ 'vet', './...' ],
	[ 'test', '-c', '-o', "$bin/fencing.test", '.' ])
{
	($st, $out) = run(cmd => [ 'go', @$step ], dir => $godir, env => \%goenv, timeout => 900);
	$log .= "go @$step:\n$out";
	last if $st != 0;
}
ok($st == 0, sprintf('clients/go/fencing builds offline from its go.sum (pgx v5, go-redis v9, etcd client/v3, go-zookeeper) and go vet ./... is clean (%.0f s)', time - $t0))
  or do { diag($log); BAIL_OUT('clients/go/fencing does not build'); };

# the server, its databases, the services
my $node = server('client_go');
FencingClients::database($node, $_, 0) foreach qw(client_go client_go_quickstart client_go_worker);
my $svc = FencingClients::services($node, 'client_go', qw(etcd zookeeper redis pgbouncer));
ok($svc, $svc
	? "etcd at $svc->{etcd}, ZooKeeper at $svc->{zk}, Redis on $svc->{redis_port}, PgBouncer on $svc->{pgbouncer_port}"
	: 'start etcd, ZooKeeper, Redis and PgBouncer')
  or BAIL_OUT('the lock services did not start');

my $storm = ($ENV{FENCING_CLIENT_STORM} // '') eq '1';
note 'the storms (TestStormLease, TestStormRedis) run when FENCING_CLIENT_STORM=1 (the suite: on PostgreSQL 15 only); here they show as skipped'
  unless $storm;
my %testenv = (
	FencingClients::pgenv($node, 'client_go'),
	FENCING_ETCD       => $svc->{etcd},
	FENCING_ZK         => $svc->{zk},
	FENCING_REDIS      => "127.0.0.1:$svc->{redis_port}",
	FENCING_PGBOUNCER  => "host=127.0.0.1 port=$svc->{pgbouncer_port} dbname=client_go user=" . FencingClients::user(),
	FENCING_WORKER_BIN => "$bin/testworker",
	# the ZooKeeper interop test's reference holder: the docs' kazoo recipe
	FENCING_ZK_REFERENCE => '/usr/bin/python3 ' . abs_path(dirname(__FILE__) . '/..') . '/locksvc/clients/worker.py',
	FENCING_GO_STRICT  => 1,
	($storm ? (FENCING_GO_STORM => 1) : ()));

# go test -v: one check per top-level test
$t0 = time;
($st, $out) = run(
	name    => 'go test',
	cmd     => [ "$bin/fencing.test", '-test.v', '-test.count=1', '-test.timeout=1200s' ],
	dir     => $tmp,
	env     => \%testenv,
	timeout => 1500,
	log     => "$tmp/go-test.log");
my $tests = 0;
my @lines = split /\n/, $out;
foreach my $line (@lines)
{
	next unless $line =~ /^--- (PASS|FAIL|SKIP): (Test\w+) \(([0-9.]+)s\)/;
	my ($res, $name, $secs) = ($1, $2, $3);
	$tests++;
	if ($res eq 'PASS')
	{
		pass("$name (${secs}s)");
	}
	elsif ($res eq 'SKIP' && $name =~ /^TestStorm/ && !$storm)
	{
	  SKIP: { skip("$name: the storm runs with FENCING_CLIENT_STORM=1 only", 1); }
	}
	else
	{
		# its output (nothing may skip here: every service is given)
		my ($from) = grep { $lines[$_] eq "=== RUN   $name" } 0 .. $#lines;
		my @its;
		if (defined $from)
		{
			for my $i ($from + 1 .. $#lines)
			{
				last if $lines[$i] =~ /^=== RUN/;
				push @its, $lines[$i];
			}
		}
		fail($res eq 'SKIP' ? "$name was skipped" : "$name (${secs}s)");
		diag(join("\n", @its[ ($#its > 39 ? $#its - 39 : 0) .. $#its ]));
	}
}
note $_ foreach grep { /^STORM: / } @lines;
ok($st == 0 && $tests > 0, sprintf('go test: %d tests, exit %d (%.0f s)', $tests, $st, time - $t0))
  or diag(join("\n", @lines[ ($#lines > 29 ? $#lines - 29 : 0) .. $#lines ]));

SKIP:
{
	skip('the managed edition\'s pass: the README\'s programs run CREATE EXTENSION fencing, the C edition (managed/README.md: Install)', 4) if FencingClients::managed();
	# the README's first example is the quickstart, and runs as written
	my ($first) = slurp_file("$godir/README.md") =~ /^```go\n(.*?)^```$/ms;
	is($first, slurp_file("$godir/examples/quickstart/main.go"),
		"the README's first example is examples/quickstart/main.go");
	my %qenv = (%testenv, PGDATABASE => 'client_go_quickstart');
	my (undef, $q1) = run(cmd => ["$bin/quickstart"], dir => $tmp, env => \%qenv, timeout => 120);
	my (undef, $q2) = run(cmd => ["$bin/quickstart"], dir => $tmp, env => \%qenv, timeout => 120);
	chomp($q1, $q2);
	my $bal = $node->safe_psql('client_go_quickstart',
		"SELECT balance || ' ' || fence FROM accounts WHERE id = 'alice'");
	note "quickstart, first run: $q1";
	note "quickstart, second run: $q2";
	note "alice: $bal";
	my ($b1, $t1) = $q1 =~ /^alice: balance (\d+), last written with token (\S+)$/;
	my ($b2, $t2) = $q2 =~ /^alice: balance (\d+), last written with token (\S+)$/;
	ok(defined $t1 && defined $t2 && $b1 == 70 && $b2 == 40 && $bal eq "40 $t2" && $t1 ne $t2,
		'the quickstart runs as written, twice (tables created if missing; three transactions under one lease each time, each with a new token)');

	# the README's worker example is examples/worker, and runs as written
	my ($workerblock) = grep { /^\/\/ A worker that posts/ } slurp_file("$godir/README.md") =~ /^```go\n(.*?)^```$/msg;
	is($workerblock, slurp_file("$godir/examples/worker/main.go"),
		"the README's worker example is examples/worker/main.go");
	my %wenv = (%testenv, PGDATABASE => 'client_go_worker', REDIS_ADDR => "127.0.0.1:$svc->{redis_port}");
	my ($w1st, $w1) = run(cmd => ["$bin/worker"], dir => $tmp, env => \%wenv, timeout => 120);
	my ($w2st, $w2) = run(cmd => ["$bin/worker"], dir => $tmp, env => \%wenv, timeout => 120);
	chomp($w1, $w2);
	note "worker, first run: $w1";
	note "worker, second run: $w2";
	my ($n1, $k1) = $w1 =~ /^acct-1: (\d+) entries, the last with token (\S+)$/m;
	my ($n2, $k2) = $w2 =~ /^acct-1: (\d+) entries, the last with token (\S+)$/m;
	ok($w1st == 0 && $w2st == 0 && defined $n1 && defined $n2 && $n1 == 10 && $n2 == 20 && $k1 ne $k2,
		'the Redis worker runs as written, twice: ten transactions under one lock each time, strict, none refused');
}

SKIP:
{
	skip('the managed edition\'s pass: the benchmark measures the client, not the edition\'s contract', 2) if FencingClients::managed();
	# the benchmark: the library against the same by hand
	($st, $out) = run(cmd => [ "$bin/bench", '-n', '1500' ], dir => $tmp, env => \%testenv, timeout => 300);
	note $out;
	ok($st == 0, 'bench: a fenced transaction through the library and by hand with pgx, interleaved');

	# the cost per transaction of one grant, many transactions, per source
	($st, $out) = run(cmd => [ "$bin/tokenbench", '-n', '200' ], dir => $tmp, env => \%testenv, timeout => 300);
	note $out;
	ok($st == 0 && $out =~ /TOKENBENCH: redis/ && $out =~ /TOKENBENCH: zookeeper/ && $out =~ /TOKENBENCH: etcd/,
		'tokenbench: a token per transaction from each source, the grant\'s token reused, and no fencing, interleaved');
}

stop_all();
$node->stop;
my @left = leftovers("$tmp/");
ok(!@left, 'no process of the run is left') or diag(join("\n", @left));

done_testing();
