# The Python client library (clients/python, package fencing_client) against
# a server with fencing and real lock services.
#
#   FENCING_CLIENT_PYTHON  a copy of clients/python (the library and its
#                          tests), run with Debian's python3 and its
#                          packages psycopg, psycopg_pool, etcd3, redis, kazoo
#   FENCING_CLIENT_STORM   1: run the storm (20 worker processes x 500 fenced
#                          writes with pauses past a 300 ms lease); else it
#                          shows as skipped
#
# Without FENCING_CLIENT_PYTHON the test is skipped; test/suites/client_python.sh
# installs the packages and sets both.  The test starts a server (fencing
# preloaded), etcd, a three-server ZooKeeper ensemble, Redis and PgBouncer
# (transaction pooling, one server connection) as its own child processes
# on free ports, creates the database client_python, and runs the library's
# unittest suite (`python3 -m tests.tap`, every service required: a missing
# one fails instead of skipping): each test case is one check here, its
# notes (the storm's summary) notes here.  Every wait of those tests is for
# a state (a lock taken, a lease no longer live), never a fixed sleep.  Then
# no worker process of the tests may be left.
use strict;
use warnings;
use FencingClients qw(need_env server run tap_checks stop_all leftovers);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $env = need_env('client_python', FENCING_CLIENT_PYTHON => 'a copy of clients/python');
my $client = $env->{FENCING_CLIENT_PYTHON};
my $py = '/usr/bin/python3';    # Debian's, with the packages above

my ($st, $versions) = run(
	cmd => [ $py, '-c', 'import sys, psycopg, psycopg_pool, etcd3, redis, kazoo
print(f"Python {sys.version.split()[0]}, psycopg {psycopg.__version__}, psycopg_pool {psycopg_pool.__version__}, etcd3 {etcd3.__version__}, redis-py {redis.__version__}, kazoo")' ],
	timeout => 60);
chomp $versions;
ok($st == 0, $st == 0 ? $versions : "the Python packages import: $versions")
  or BAIL_OUT('no Python with its packages');

my $node = server('client_python');
my $db = 'client_python';
$node->safe_psql('postgres', "CREATE DATABASE $db");
$node->safe_psql($db, 'CREATE EXTENSION fencing');

my $t0 = time;
my $svc = FencingClients::services($node, $db, qw(etcd zookeeper redis pgbouncer));
ok($svc, sprintf('etcd, ZooKeeper (3 servers), Redis and PgBouncer started (%.0f s)', time - $t0))
  or BAIL_OUT('the lock services did not start');

my $storm = ($ENV{FENCING_CLIENT_STORM} // '') eq '1';
note 'the storm runs when FENCING_CLIENT_STORM=1 (the suite: on PostgreSQL 15 only; it tests the client)'
  unless $storm;

# unittest's results, a check each; a runner that dies is a failure too
$t0 = time;
my $out;
($st, $out) = run(
	name => 'python -m tests.tap',
	cmd  => [ $py, '-m', 'tests.tap' ],
	dir  => $client,
	env  => {
		FencingClients::pgenv($node, $db),
		FENCING_TEST_REQUIRE   => 1,
		FENCING_TEST_ETCD      => "127.0.0.1:$svc->{etcd_port}",
		FENCING_TEST_ZK        => $svc->{zk},
		FENCING_TEST_REDIS     => "127.0.0.1:$svc->{redis_port}",
		FENCING_TEST_PGBOUNCER => $svc->{pgbouncer_port},
		($storm ? () : (FENCING_TEST_STORM => 0)),
		PYTHONDONTWRITEBYTECODE => 1,
		PYTHONPATH => $client,
	},
	timeout => 1800,
	log     => "$PostgreSQL::Test::Utils::tmp_check/python-tests.log");
my ($tests, $bad) = tap_checks($out);
note sprintf('the unittest suite: %d test cases in %.0f s (exit %d)', $tests, time - $t0, $st);
if ($st != 0 && !$bad)
{
	fail("python -m tests.tap exited $st without a failing test");
	diag(join("\n", grep { defined } (split /\n/, $out)[-20 .. -1]));
}
cmp_ok($tests, '>', 0, 'the unittest suite ran test cases');

stop_all();
$node->stop;
my @left = leftovers("$client/tests/");
ok(!@left, 'no worker process of the tests is left') or diag(join("\n", @left));

done_testing();
