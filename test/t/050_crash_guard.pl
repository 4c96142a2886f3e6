# The guard across crashes.
#
# The stress load of 033 (test/perl/FencingTest.pm) runs on a few clients,
# and the server is crashed under it twice: first stopped in immediate
# mode, then by SIGKILL of a backend that is in the middle of a write
# transaction (the postmaster then restarts every backend and replays the
# WAL: crash recovery).  After each crash, every write whose COMMIT a
# client saw is in the history, no stored fence (row fence column, key
# scope in fencing.scopes, advance() column) differs from the highest
# committed token of its row or scope, and the commit-order invariants of
# the stress still hold.  Then the guard still refuses stale writes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FencingTest;

my $clients = $ENV{FENCING_STRESS_CLIENTS} // 3;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'fencing'
log_statement = none
max_connections = 40
restart_after_crash = on
});
$node->start;
my $baseline = FencingTest::stress_setup($node, 'postgres');
my @attempts;

# Check everything so far after a crash.
sub check_after
{
	my ($label, $run) = @_;
	my $check =
	  FencingTest::check_history($node, 'postgres', \@attempts, $baseline);
	FencingTest::report($label, $run, $check);
	cmp_ok($check->{accepted}, '>', 0, "$label: writes were accepted before the crash");
	is($check->{lost_commits}, 0,
		"$label: every write whose COMMIT was acknowledged is in the history");
	is($check->{fence_below}, 0,
		"$label: no stored fence is lower than the highest committed token of its scope");
	is($check->{fence_mismatch}, 0,
		"$label: every stored fence is the highest committed token of its scope");
	is($check->{violations}, 0, "$label: no invariant was violated");
	return $check;
}

# 1. immediate shutdown under load.  From 2.5 s on, every transaction sleeps
# before its COMMIT for longer than any stop can take (the stop cuts the
# sleep short): the clients inside one when the stop begins are still
# inside it when the server dies, however slow the machine.
my $run = FencingTest::run_stress(
	$node, 'postgres',
	clients => $clients,
	seconds     => 30,
	pause_after => 2.5,
	pause_sleep => 120,
	on_tick     => sub {
		my ($elapsed, $run) = @_;
		# writes accepted, and a client inside a write transaction
		return 0 if $elapsed < 2.7 || !FencingTest::ready_to_crash($run);
		$node->stop('immediate');
		return 1;
	});
push @attempts, @{ $run->{attempts} };
cmp_ok(scalar(grep { $_->{outcome} eq 'unknown' } @{ $run->{attempts} }),
	'>', 0, 'immediate stop: clients were cut off mid-transaction');
$node->start;
check_after('immediate stop', $run);

# 2. SIGKILL of a backend inside a write transaction: crash recovery
my $killed;
my $log_offset = -s $node->logfile;
$run = FencingTest::run_stress(
	$node, 'postgres',
	clients   => $clients,
	seconds   => 30,
	first_id  => $run->{next_id},
	generator => $run->{generator},
	pause_after => 2,
	on_tick   => sub {
		my ($elapsed, $run) = @_;
		return 0 if $elapsed < 2.1 || !FencingTest::outcomes($run, 'accepted');
		my $pid = $node->safe_psql('postgres', q{
			SELECT pid FROM pg_stat_activity
			 WHERE application_name = 'fencing_stress'
			   AND backend_xid IS NOT NULL
			 LIMIT 1});
		return 0 unless $pid =~ /^\d+$/;
		note "killing backend $pid with SIGKILL";
		kill 'KILL', $pid;
		$killed = $pid;
		return 1;
	});
push @attempts, @{ $run->{attempts} };
ok($killed, 'a backend in a write transaction was killed');
# Connect only once the crash restart is over: until then connections are
# refused, and a psql that gives up before IPC::Run has written it the query
# makes poll_query_until die of EPIPE (seen once on a loaded machine).
$node->wait_for_log(
	qr/all server processes terminated; reinitializing.*database system is ready to accept connections/s,
	$log_offset);
$node->poll_query_until('postgres', 'SELECT true')
  or die 'the server did not come back after the crash';
my $log = slurp_file($node->logfile, $log_offset);
# 15 says "server process", 16 and later name the kind: "client backend"
like($log, qr/(?:server process|client backend) \(PID $killed\) was terminated by signal 9/,
	'the postmaster saw the backend die');
like($log, qr/all server processes terminated; reinitializing/,
	'the postmaster restarted the cluster (crash recovery)');
check_after('backend SIGKILL', $run);

# 3. after the crashes the guard still refuses what it must
my $stored = FencingTest::stored_fences($node, 'postgres');
my ($state) = FencingTest::sql_error($node, 'postgres', qq{
	BEGIN; SET LOCAL fencing.token = '$stored->{'accounts/1'}';
	UPDATE stress.accounts SET balance = 0 WHERE id = 1; COMMIT;});
is($state, 'SF001', 'after the crashes, the stored row fence is not beaten again');
($state) = FencingTest::sql_error($node, 'postgres', qq{
	BEGIN; SET LOCAL fencing.token = '$stored->{'acct/acct-1'}';
	INSERT INTO stress.ledger (account, amount) VALUES ('acct-1', 0); COMMIT;});
is($state, 'SF001', 'after the crashes, the stored scope fence is not beaten again');

$run = FencingTest::run_stress(
	$node, 'postgres',
	clients   => $clients,
	seconds   => 3,
	first_id  => $run->{next_id},
	until     => sub {
		FencingTest::outcomes($_[0], 'accepted') && FencingTest::outcomes($_[0], 'stale');
	},
	generator => $run->{generator});
push @attempts, @{ $run->{attempts} };
my $check =
  FencingTest::check_history($node, 'postgres', \@attempts, $baseline);
FencingTest::report('after recovery', $run, $check);
cmp_ok(scalar(grep { $_->{outcome} eq 'accepted' } @{ $run->{attempts} }),
	'>', 0, 'after recovery, new writes are accepted');
cmp_ok(scalar(grep { $_->{outcome} eq 'stale' } @{ $run->{attempts} }),
	'>', 0, 'after recovery, stale writes are refused');
is($check->{violations}, 0, 'after recovery, no invariant was violated');

$node->stop;
done_testing();
