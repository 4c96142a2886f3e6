# The Go client library (clients/go) against a server with fencing and real
# lock services.
#
#   FENCING_CLIENT_GO        a copy of clients/go, built offline with
#                            Debian's Go packages (clients/go/go.sh: GOPATH
#                            mode, no module proxy)
#   FENCING_CLIENT_GO_CACHE  optional: the Go build cache to use (kept
#                            between runs); else one in tmp_check
#   FENCING_CLIENT_STORM     1: run the storms (TestStormLease,
#                            TestStormRedis: 20 workers x 500 fenced writes
#                            each, with pauses past a 300 ms lease or Redis
#                            lock); else they show as skipped
#
# Without FENCING_CLIENT_GO the test is skipped; test/suites/client_go.sh
# installs the packages and sets the variables.  The test builds the
# library, its commands, examples and test binary, and checks `go vet`;
# starts a server (fencing preloaded), etcd, a three-server ZooKeeper
# ensemble, Redis and PgBouncer (transaction mode) as its own child
# processes on free ports, and runs:
#   - `go test -v`, every test strict (a service not given fails the test
#     instead of skipping it); each top-level test is one check.  The tests
#     start fencing-worker processes and freeze them with SIGSTOP past
#     their lock's TTL.  The storms print their summary lines as notes.
#   - the README's first example, which must be examples/quickstart/main.go
#     as it is, run twice as written in a database of its own.
#   - the benchmark (cmd/bench), its numbers as notes.
# Then no process of the run may be left.
use strict;
use warnings;
use FencingClients qw(need_env server run tap_checks stop_all leftovers);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $env = need_env('client_go', FENCING_CLIENT_GO => 'a copy of clients/go');
my $godir = $env->{FENCING_CLIENT_GO};
my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $bin = "$tmp/go-bin";

# the toolchain, from Debian
my %ver;
foreach my $p (qw(golang-github-jackc-pgx-v4-dev golang-etcd-server-dev))
{
	($ver{$p} = `dpkg-query -W -f='\${Version}' $p 2>/dev/null`) =~ s/\s+//g;
}
my $gov = (split ' ', `go version 2>/dev/null`)[2];
ok($gov && $ver{'golang-github-jackc-pgx-v4-dev'} && $ver{'golang-etcd-server-dev'},
	"$gov with pgx $ver{'golang-github-jackc-pgx-v4-dev'}, etcd $ver{'golang-etcd-server-dev'}, redigo, go-zookeeper, from Debian")
  or BAIL_OUT('no Go toolchain with its packages');

# the build: offline, GOPATH mode
my %goenv = (
	FENCING_GO_GOPATH => "$tmp/gopath",
	FENCING_GO_CACHE  => $ENV{FENCING_CLIENT_GO_CACHE} || "$tmp/gocache");
my $t0 = time;
my ($st, $out, $log) = (0, '', '');
foreach my $step (
	[ 'build', '-o', "$bin/", './cmd/...', './examples/...' ],
	[ 'vet', './...' ],
	[ 'test', '-c', '-o', "$bin/fencing.test", '.' ])
{
	($st, $out) = run(cmd => [ "$godir/go.sh", @$step ], env => \%goenv, timeout => 900);
	$log .= "go @$step:\n$out";
	last if $st != 0;
}
ok($st == 0, sprintf('clients/go builds offline (clients/go/go.sh: GOPATH mode, Debian\'s packages) and go vet is clean (%.0f s)', time - $t0))
  or do { diag($log); BAIL_OUT('clients/go does not build'); };

# the server, its databases, the services
my $node = server('client_go');
$node->safe_psql('postgres', 'CREATE DATABASE client_go');
$node->safe_psql('postgres', 'CREATE DATABASE client_go_quickstart');
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
	FENCING_PGBOUNCER  => "host=127.0.0.1 port=$svc->{pgbouncer_port} dbname=client_go user=postgres",
	FENCING_WORKER_BIN => "$bin/fencing-worker",
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
my ($t1) = $q1 =~ /^written with token (\S+)$/;
my ($t2) = $q2 =~ /^written with token (\S+)$/;
ok($t1 && $t2 && $bal eq "80 $t2" && $t1 ne $t2,
	'the quickstart runs as written, twice (tables created if missing, a new lease token each time)');

# the benchmark: the library against the same by hand
($st, $out) = run(cmd => [ "$bin/bench", '-n', '1500' ], dir => $tmp, env => \%testenv, timeout => 300);
note $out;
ok($st == 0, 'bench: a fenced transaction through the library and by hand, interleaved');

stop_all();
$node->stop;
my @left = leftovers("$tmp/");
ok(!@left, 'no process of the run is left') or diag(join("\n", @left));

done_testing();
