# The Python client library (clients/python, package fencing_client)
# against a server with fencing and real lock services.
#
#   FENCING_CLIENT_PYTHON       a copy of clients/python WITHOUT its package
#                               directory (the tests, the examples, the
#                               README, bench.py), so that the tests import
#                               the installed wheel
#   FENCING_CLIENT_PYTHON_VENV  a virtual environment with the wheel and
#                               requirements.txt installed, and in src/ the
#                               copy the wheel was built from
#                               (test/lib/client_python.sh makes it)
#   FENCING_CLIENT_EDITION      managed: against the edition for managed
#                               PostgreSQL (test/perl/FencingClients.pm),
#                               without the benchmark (the README's programs
#                               skip in pytest, saying why)
#   FENCING_CLIENT_STORM        1: run the storm (10 worker processes x 200
#                               fenced transactions with SIGSTOP pauses past
#                               a 300 ms lease); else it shows as skipped
#
# Without the first two the test is skipped; test/suites/client_python.sh
# sets them.  The test runs mypy --strict on the package and the examples,
# starts a server (fencing preloaded), etcd, a three-server ZooKeeper
# ensemble, Redis and PgBouncer (transaction pooling, one server
# connection) as its own child processes on free ports, creates the
# database client_python, and runs the library's pytest suite (every
# service required: a missing one fails instead of skipping): each test is
# one check here, its notes (times, the storm's counts) notes here.  Every
# wait of those tests is for a state (a lock taken, a lease no longer
# live), never a fixed sleep.  Then the benchmark (the library against the
# same transaction by hand, interleaved; its numbers are notes), and no
# worker process of the tests may be left.
use strict;
use warnings;
use FencingClients qw(need_env server run tap_checks stop_all leftovers);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $env = need_env('client_python',
	FENCING_CLIENT_PYTHON => 'a copy of clients/python without its package',
	FENCING_CLIENT_PYTHON_VENV => 'a virtual environment with the wheel installed');
my $client = $env->{FENCING_CLIENT_PYTHON};
my $venv = $env->{FENCING_CLIENT_PYTHON_VENV};
my $py = "$venv/bin/python";
my $log = $PostgreSQL::Test::Utils::tmp_check;

my ($st, $versions) = run(
	cmd => [ $py, '-c', 'import sys, importlib.metadata as m
print(f"Python {sys.version.split()[0]}: " + ", ".join(f"{p} {m.version(p)}" for p in
      ("fencing-client", "psycopg", "psycopg-binary", "psycopg-pool", "redis", "kazoo", "etcd3gw", "pytest", "mypy")))' ],
	dir => $client,
	timeout => 60);
chomp $versions;
ok($st == 0, $st == 0 ? "installed: $versions" : "the virtual environment imports: $versions")
  or BAIL_OUT('no virtual environment with the wheel');

# the type checker, strict, on the package (the copy the wheel was built
# from) and on the examples and the benchmark as a user's code
my $out;
($st, $out) = run(
	name => 'mypy',
	cmd => [ $py, '-m', 'mypy', '--strict', '--no-incremental', 'fencing_client',
		"$client/examples", "$client/bench.py" ],
	dir => "$venv/src",
	timeout => 600,
	log => "$log/python-mypy.log");
ok($st == 0, 'mypy --strict: fencing_client, examples/, bench.py')
  or diag($out);
note((split /\n/, $out)[-1] // '');

my $node = server('client_python');
my $db = 'client_python';
FencingClients::database($node, $db, 1);

my $t0 = time;
my $svc = FencingClients::services($node, $db, qw(etcd zookeeper redis pgbouncer));
ok($svc, sprintf('etcd, ZooKeeper (3 servers), Redis and PgBouncer started (%.0f s)', time - $t0))
  or BAIL_OUT('the lock services did not start');

my $storm = ($ENV{FENCING_CLIENT_STORM} // '') eq '1';
note 'the storm runs when FENCING_CLIENT_STORM=1 (the suite: on PostgreSQL 15 only; it tests the client)'
  unless $storm;

# pytest's results, a check each; a run that fails without a failing test
# fails too
my $tap = "$log/python-tests.tap";
unlink $tap;
$t0 = time;
($st, $out) = run(
	name => 'pytest',
	cmd  => [ $py, '-m', 'pytest', '-p', 'no:cacheprovider', '-q', 'tests' ],
	dir  => $client,
	env  => {
		FencingClients::pgenv($node, $db),
		FENCING_TEST_REQUIRE   => 1,
		FENCING_TEST_INSTALLED => 1,
		FENCING_TEST_TAP       => $tap,
		FENCING_TEST_ETCD      => "127.0.0.1:$svc->{etcd_port}",
		FENCING_TEST_ZK        => $svc->{zk},
		FENCING_TEST_REDIS     => "127.0.0.1:$svc->{redis_port}",
		FENCING_TEST_PGBOUNCER => $svc->{pgbouncer_port},
		FENCING_TEST_STORM     => $storm ? 1 : 0,
		PYTHONDONTWRITEBYTECODE => 1,
	},
	timeout => 1800,
	log     => "$log/python-pytest.log");
my $lines = -e $tap ? slurp_file($tap) : '';
my ($tests, $bad) = tap_checks($lines);
my ($summary) = grep { /\b(passed|failed)\b/ } reverse split /\n/, $out;
note sprintf('pytest: %d tests in %.0f s (exit %d): %s', $tests, time - $t0, $st, $summary // '');
if ($st != 0 && !$bad)
{
	fail("pytest exited $st without a failing test");
	diag(join("\n", grep { defined } (split /\n/, $out)[-30 .. -1]));
}
cmp_ok($tests, '>', 0, 'pytest ran tests');

SKIP:
{
	skip('the managed edition\'s pass: the benchmark measures the client, not the edition\'s contract', 1) if FencingClients::managed();
	# the benchmark: the library's fenced transaction against the same
	# transaction by hand with psycopg, interleaved; its numbers are notes
	($st, $out) = run(
		name => 'bench.py',
		cmd  => [ $py, "$client/bench.py", '--n', '1000' ],
		dir  => $client,
		env  => { FencingClients::pgenv($node, $db) },
		timeout => 600,
		log     => "$log/python-bench.log");
	ok($st == 0, 'bench.py ran') or diag($out);
	note($_) foreach split /\n/, $out;
}

stop_all();
$node->stop;
my @left = leftovers("$client/tests/");
ok(!@left, 'no worker process of the tests is left') or diag(join("\n", @left));

done_testing();
