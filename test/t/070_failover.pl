# Failover: what a promoted standby keeps of the fences.
#
# The stress load of 033 (test/perl/FencingTest.pm: row scope, key scope,
# fencing.advance(), random fresh, stale and missing tokens) runs against a
# primary with a streaming standby; mid-load the primary dies (immediate
# stop) and the standby is promoted.  Then, on the new primary:
#
# 1. Synchronous replication (synchronous_standby_names = '*',
#    synchronous_commit = remote_apply).  A COMMIT is acknowledged only once
#    the standby has applied it, so nothing a client saw committed is lost:
#    every acknowledged write is in the history, no stored fence is below
#    the highest acknowledged token of its row or scope (no fence went
#    backwards), the commit-order invariants hold, every stored fence (and a
#    token below it) is refused with SF001, fencing.protected_tables reports
#    every guard intact, and the load goes on with the same tokens.
#
# 2. Asynchronous replication.  The standby may miss the last commits.  To
#    measure that deterministically, replication is cut (primary_conninfo
#    emptied on the standby) while the load runs, the load goes on for a
#    while on the primary alone, then the primary dies and the standby is
#    promoted.  What regresses: every transaction committed after the cut
#    is gone -- its data AND the fences it advanced, together, because the
#    guard writes the fence (row fence column, fencing.scopes) in the same
#    transaction as the data.  So the promoted node is consistent: for
#    every row and scope, the stored fence is exactly the highest token
#    among the writes that survived (and no history is half there), but it
#    is lower than the highest token a client saw acknowledged.  A stale
#    holder whose token lies between the two would be accepted again
#    (shown below), and so would a replay of a lost write.  The remedy:
#    issue the tokens of every lock granted after a failover in a new epoch
#    (fencing.next_epoch() of the last token the lock service issued, or
#    simply epoch + 1): such a token beats every token of the old epoch,
#    lost or not, and once one write in the new epoch is accepted on a row
#    or scope, every old-epoch token, including the lost ones, is refused
#    there again (shown below).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FencingTest;

my $clients = $ENV{FENCING_STRESS_CLIENTS} // 3;

# A primary and a streaming standby; $sync picks synchronous replication.
sub make_pair
{
	my ($name, $sync) = @_;
	my $primary = PostgreSQL::Test::Cluster->new("${name}_primary");
	$primary->init(allows_streaming => 1);
	$primary->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'fencing'
log_statement = none
max_connections = 40
wal_receiver_status_interval = 1s
});
	$primary->start;
	$primary->backup('b');
	my $standby = PostgreSQL::Test::Cluster->new("${name}_standby");
	$standby->init_from_backup($primary, 'b', has_streaming => 1);
	# the promoted standby must not wait for a standby of its own
	$standby->append_conf('postgresql.conf', "synchronous_standby_names = ''");
	$standby->start;
	if ($sync)
	{
		$primary->append_conf('postgresql.conf', qq{
synchronous_standby_names = '*'
synchronous_commit = remote_apply
});
		$primary->reload;
		$primary->poll_query_until('postgres',
			"SELECT sync_state = 'sync' FROM pg_stat_replication")
		  or die 'the standby did not become synchronous';
	}
	return ($primary, $standby);
}

# The primary dies; the standby is promoted.
sub fail_over
{
	my ($primary, $standby) = @_;
	$primary->stop('immediate');
	$standby->promote;
	$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die 'the standby was not promoted';
}

# Every protected table's guard is intact on $node.
sub guards_intact
{
	my ($node, $label) = @_;
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FILTER (WHERE guard_intact) || '/' || count(*) FROM fencing.protected_tables"
		),
		'3/3',
		"$label: fencing.protected_tables: the guard of each of the 3 protected tables is intact"
	);
}

# ---------------------------------------------------------------------
# 1. synchronous replication

my ($primary, $standby) = make_pair('sync', 1);
my $baseline = FencingTest::stress_setup($primary, 'postgres');
my $failed_over_at;
my $run = FencingTest::run_stress(
	$primary, 'postgres',
	clients => $clients,
	seconds => 30,
	on_tick => sub {
		my ($elapsed, $run) = @_;
		return 0 if $elapsed < 4 || !FencingTest::outcomes($run, 'accepted');
		fail_over($primary, $standby);
		$failed_over_at = $elapsed;
		return 1;
	});
my @attempts = @{ $run->{attempts} };
ok($failed_over_at, 'sync: the primary died mid-load and the standby was promoted');
my $acked = FencingTest::acked_max(\@attempts);
my $check =
  FencingTest::check_history($standby, 'postgres', \@attempts, $baseline);
FencingTest::report('sync failover', $run, $check);
cmp_ok($check->{accepted}, '>', 0, 'sync: writes were accepted before the failover');
is($check->{lost_commits}, 0,
	'sync: every write whose COMMIT was acknowledged is on the promoted standby');
is($check->{fence_mismatch}, 0,
	'sync: every stored fence is the highest committed token of its row or scope');
my $stored = FencingTest::stored_fences($standby, 'postgres');
my @backwards = grep { FencingTest::fence_cmp($stored->{$_}, $acked->{$_}) < 0 }
  sort keys %$acked;
is(scalar @backwards, 0,
	'sync: no fence went backwards: each is >= the highest acknowledged token of its row or scope'
) or diag("fence below the acknowledged token: $_: $stored->{$_} < $acked->{$_}")
  foreach @backwards;
is($check->{violations}, 0, 'sync: no invariant was violated');
my ($probes, $bad) = FencingTest::probe_stale($standby, 'postgres');
is_deeply($bad, [],
	"sync: on the new primary, $probes stale writes (each stored fence and the token below it) get SF001"
);
guards_intact($standby, 'sync');

# the load goes on against the new primary, with the same token generator
$run = FencingTest::run_stress(
	$standby, 'postgres',
	clients   => $clients,
	seconds   => 3,
	first_id  => $run->{next_id},
	until     => sub {
		FencingTest::outcomes($_[0], 'accepted') && FencingTest::outcomes($_[0], 'stale');
	},
	generator => $run->{generator});
push @attempts, @{ $run->{attempts} };
$check = FencingTest::check_history($standby, 'postgres', \@attempts, $baseline);
FencingTest::report('after the sync failover', $run, $check);
cmp_ok(scalar(grep { $_->{outcome} eq 'accepted' } @{ $run->{attempts} }),
	'>', 0, 'sync: the new primary accepts new writes');
cmp_ok(scalar(grep { $_->{outcome} eq 'stale' } @{ $run->{attempts} }),
	'>', 0, 'sync: the new primary refuses stale writes');
is($check->{violations}, 0, 'sync: no invariant was violated across the failover');
$standby->stop;

# ---------------------------------------------------------------------
# 2. asynchronous replication

($primary, $standby) = make_pair('async', 0);
$baseline = FencingTest::stress_setup($primary, 'postgres');
$primary->wait_for_catchup($standby);
my ($cut_at, $cut_time, $cut_lsn);
$failed_over_at = undef;
$run = FencingTest::run_stress(
	$primary, 'postgres',
	clients => $clients,
	seconds => 30,
	on_tick => sub {
		my ($elapsed, $run) = @_;
		if (!$cut_at && $elapsed >= 3)
		{
			# the standby stops receiving WAL: what follows is lost
			$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
			$standby->reload;
			$standby->poll_query_until('postgres',
				'SELECT count(*) = 0 FROM pg_stat_wal_receiver')
			  or die 'the WAL receiver did not stop';
			$cut_lsn = $standby->safe_psql('postgres', 'SELECT pg_last_wal_replay_lsn()');
			$cut_at = $elapsed;
			$cut_time = time;
		}
		# fail over once writes sent after the cut were accepted: a fresh
		# token raises its scope's fence, so their commits and fences are
		# what the standby does not have
		return 0 if !$cut_at || $elapsed < $cut_at + 2;
		return 0
		  if FencingTest::outcomes($run, 'accepted',
			sub { $_[0]{sent} > $cut_time && $_[0]{tokmode} eq 'fresh' && $_[0]{kind} ne 'adv' })
		  < 3;
		fail_over($primary, $standby);
		$failed_over_at = $elapsed;
		return 1;
	});
@attempts = @{ $run->{attempts} };
ok($failed_over_at, 'async: replication was cut, the primary died, the standby was promoted');
note "async: replication cut at ${cut_at}s (standby replayed up to $cut_lsn), failover at ${failed_over_at}s";
$acked = FencingTest::acked_max(\@attempts);
$check = FencingTest::check_history($standby, 'postgres', \@attempts, $baseline);
# the lost writes are expected here: report only the other violations
my @other = grep { !/missing from the history|which no committed write/ }
  @{ $check->{violation_list} };
FencingTest::report('async failover', $run,
	{ %$check, violations => scalar @other, violation_list => \@other });
note "async: attempt $_->{id} ended with: $_->{message}"
  foreach grep { $_->{outcome} eq 'other' && !$_->{sqlstate} } @attempts;
$stored = FencingTest::stored_fences($standby, 'postgres');
my @regressed = grep { FencingTest::fence_cmp($stored->{$_}, $acked->{$_}) < 0 }
  sort keys %$acked;
my $acked_n = grep { $_->{outcome} eq 'accepted' } @attempts;
note sprintf(
	'async: %d of %d acknowledged writes were lost; %d of %d rows/scopes have a fence below the highest acknowledged token: %s',
	$check->{lost_commits}, $acked_n, scalar @regressed, scalar keys %$acked,
	join(', ', map { "$_ $stored->{$_} < $acked->{$_}" } @regressed));
cmp_ok($check->{lost_commits}, '>', 0,
	'async: acknowledged writes after the cut are lost (what asynchronous replication gives up)');
cmp_ok(scalar @regressed, '>', 0,
	'async: and with them the fences they advanced: some fence is below the highest acknowledged token');
# what survived is consistent: fence and data are lost together
is($check->{fence_mismatch}, 0,
	'async: every stored fence is exactly the highest token among the writes that survived');
is_deeply(\@other, [],
	'async: apart from the lost writes, no invariant was violated (commit order, all-or-nothing attempts)'
);
($probes, $bad) = FencingTest::probe_stale($standby, 'postgres');
is_deeply($bad, [],
	"async: the surviving fences still refuse stale writes ($probes probes, SF001)");
guards_intact($standby, 'async');

# The regression, shown: a token between the surviving fence and the lost
# one is accepted on the promoted node ...
my $s = $regressed[0];
my ($lost_tok, $between);
if ($s)
{
	$lost_tok = $acked->{$s};
	my $f = FencingTest::parse_fence($stored->{$s});
	my $l = FencingTest::parse_fence($lost_tok);
	$between =
	  ($f && $f->[0] == $l->[0] && $l->[1] - $f->[1] >= 2)
	  ? "$l->[0]:" . ($l->[1] - 1)
	  : $lost_tok;
	is(FencingTest::write_scope($standby, 'postgres', $s, $between), '',
		"async: on $s, token $between (<= the lost $lost_tok) is accepted again: a stale holder gets in"
	);
}
# ... and the remedy: tokens issued after a failover in a new epoch
my $g = $run->{generator};
my $new_epoch = FencingTest::parse_fence(
	$standby->safe_psql('postgres',
		"SELECT fencing.next_epoch('$g->{epoch}:$g->{counter}')"));
my $epoch_tok = "$new_epoch->[0]:$new_epoch->[1]";
my ($ok_new, $refused_old) = (0, 0);
foreach my $sc (sort keys %$acked)
{
	$ok_new++
	  if FencingTest::write_scope($standby, 'postgres', $sc, $epoch_tok) eq '';
	$refused_old++
	  if FencingTest::write_scope($standby, 'postgres', $sc, $acked->{$sc}) eq 'SF001';
}
is($ok_new, scalar keys %$acked,
	"async: a token of the new epoch ($epoch_tok, fencing.next_epoch of the last issued) is accepted on every row and scope"
);
is($refused_old, scalar keys %$acked,
	'async: after it, every old-epoch token, even the lost highest, is refused (SF001)');

$standby->stop;
done_testing();
