# A physical backup (pg_basebackup), taken online under the stress load,
# restored and started as a new server, keeps every protection and every
# fence.
#
# The stress load of 033 (test/perl/FencingTest.pm) runs; mid-load
# $node->backup takes a pg_basebackup (WAL streamed, as recommended), and a
# new node is started from it (crash recovery from the backup's WAL; no
# standby, no archive).  On the new node:
# - fencing.protected, fencing.scopes and the fencing triggers are those of
#   the source at the end of the load minus what committed after the backup
#   (compared for the catalog; the fences through the history);
# - every write a client saw committed before the backup started is there,
#   and the stored fence of every row and scope is exactly the highest token
#   among the writes the backup holds (no fence without its data, no data
#   without its fence);
# - every stored fence, and the token below it, is refused (SF001), the
#   guards are intact, the DDL guard (SF005) works, and new tokens are
#   accepted.
# pg_dump/pg_restore is covered by 031_dump_restore.pl.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FencingTest;

my $node = PostgreSQL::Test::Cluster->new('backup_src');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'fencing'
log_statement = none
max_connections = 40
});
$node->start;
my $baseline = FencingTest::stress_setup($node, 'postgres');

my ($t0, $t1);
my $run = FencingTest::run_stress(
	$node, 'postgres',
	clients => $ENV{FENCING_STRESS_CLIENTS} // 3,
	seconds => 30,
	on_tick => sub {
		my ($elapsed, $run) = @_;
		if (!$t0 && $elapsed >= 2 && FencingTest::outcomes($run, 'accepted'))
		{
			$t0 = time;
			$node->backup('b');
			$t1 = time;
		}
		return $t1 && time > $t1 + 1;
	});
ok($t0, 'a base backup was taken under load');
note sprintf('pg_basebackup took %.1f s under load', $t1 - $t0);
my $catalog_sql = q{
SELECT relid::text, fence_column, key_columns, strict, scope_name
  FROM fencing.protected ORDER BY 1;
SELECT tgrelid::regclass::text, tgname, tgenabled, tgfoid::regproc::text
  FROM pg_trigger WHERE tgname LIKE 'zz_fencing%' ORDER BY 1, 2;
};
my $src_catalog = $node->safe_psql('postgres', $catalog_sql);
$node->stop;

my $copy = PostgreSQL::Test::Cluster->new('backup_copy');
$copy->init_from_backup($node, 'b');
$copy->start;

is($copy->safe_psql('postgres', $catalog_sql),
	$src_catalog, 'restored: fencing.protected and the fencing triggers are those of the source');
is( $copy->safe_psql(
		'postgres',
		"SELECT count(*) FILTER (WHERE guard_intact) || '/' || count(*) FROM fencing.protected_tables"
	),
	'3/3',
	'restored: fencing.protected_tables: every guard intact');

# The attempts a client saw answered before the backup started must all be
# reflected; the later ones may or may not be.
my @before = grep { defined $_->{acked} && $_->{acked} < $t0 } @{ $run->{attempts} };
my $check = FencingTest::check_history($copy, 'postgres', \@before, $baseline);
FencingTest::report('backup', $run, $check);
cmp_ok($check->{accepted}, '>', 0, 'restored: writes were accepted before the backup');
is($check->{lost_commits}, 0,
	'restored: every write acknowledged before the backup started is there');
is($check->{fence_mismatch}, 0,
	'restored: every stored fence is the highest token among the writes the backup holds');
is($check->{violations}, 0, 'restored: no invariant was violated');
my $history = $copy->safe_psql('postgres', 'SELECT count(*) FROM stress.history');
note sprintf('the backup holds %d history rows; %d of %d attempts were answered before it started',
	$history, scalar @before, scalar @{ $run->{attempts} });

my ($probes, $bad) = FencingTest::probe_stale($copy, 'postgres');
is_deeply($bad, [],
	"restored: $probes stale writes (each stored fence and the token below it) get SF001");
my ($state) = FencingTest::sql_error($copy, 'postgres',
	'ALTER TABLE stress.accounts DISABLE TRIGGER ALL');
is($state, 'SF005', 'restored: the DDL guard refuses to switch the guard off');
($state) = FencingTest::sql_error($copy, 'postgres',
	'UPDATE stress.accounts SET balance = 0 WHERE id = 1');
is($state, 'SF002', 'restored: a write without a token is refused');

# new tokens go on from where the generator was
$run = FencingTest::run_stress(
	$copy, 'postgres',
	clients   => 2,
	seconds   => 2,
	first_id  => $run->{next_id},
	until     => sub { FencingTest::outcomes($_[0], 'accepted') },
	generator => $run->{generator});
cmp_ok(scalar(grep { $_->{outcome} eq 'accepted' } @{ $run->{attempts} }),
	'>', 0, 'restored: new tokens are accepted');
$check = FencingTest::check_history($copy, 'postgres', [ @before, @{ $run->{attempts} } ],
	$baseline);
is($check->{violations}, 0, 'restored: no invariant was violated by the load after the restore');

$copy->stop;
done_testing();
