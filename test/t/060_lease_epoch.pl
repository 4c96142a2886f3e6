# Lease tokens across failover, point-in-time recovery, file-system
# snapshots and dump/restore: a token granted on the server that takes over
# beats every token granted before, including the ones it never saw.
#
# (a) primary + async standby; the standby misses the last grants (and a
#     bump) of the primary, is promoted, and grants a token above all of them;
# (b) point-in-time recovery to a restore point: a new timeline, a larger
#     epoch, a token above the grants made after the restore point;
# (c) a cold file-system snapshot keeps the timeline: its copy would grant
#     tokens the old server already granted, until bump_epoch(); after it,
#     the copy beats the old server, even a bump the old server made later;
# (d) pg_dump/restore into a new cluster (timeline 1 again, another system
#     identifier) continues above the dumped epoch.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Acquire (or re-grant: the holder is always the same) lease "job".
sub grant
{
	my ($node) = @_;
	my $token = $node->safe_psql('postgres',
		"SELECT fencing.lease_acquire('job', 'worker', '1 hour')");
	isnt($token, '', $node->name . ' grants a token');
	return $token;
}

# Is token $new greater than every token of @old?  Asked of $node.
sub beats_all
{
	my ($node, $new, @old) = @_;
	my $list = join(',', map { "'$_'" } @old);
	return $node->safe_psql('postgres',
		"SELECT '$new'::fencing.fence OPERATOR(fencing.>) ALL (ARRAY[$list]::fencing.fence[])")
	  eq 't';
}

sub epoch
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT fencing.current_epoch()');
}

sub timeline_of_epoch
{
	my ($node) = @_;
	return $node->safe_psql('postgres', 'SELECT fencing.current_epoch() >> 32');
}

#
# (a) Failover to a standby that missed the latest grants
#
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION fencing');
$primary->backup('for_standby');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'for_standby', has_streaming => 1);
$standby->start;

my @old = map { grant($primary) } 1 .. 3;
$primary->wait_for_catchup($standby);
is( $standby->safe_psql('postgres',
		"SELECT token FROM fencing.leases WHERE name = 'job'"),
	$old[-1],
	'the standby has replayed the first grants');
is(epoch($standby), epoch($primary), 'a standby reports the epoch of its primary');

# The standby goes away; the primary grants more and bumps, then dies.
$standby->stop('fast');
push @old, map { grant($primary) } 1 .. 2;
$primary->safe_psql('postgres', 'SELECT fencing.bump_epoch()');
push @old, grant($primary);
my $old_epoch = epoch($primary);
$primary->stop('immediate');

$standby->append_conf('postgresql.conf', "primary_conninfo = ''");
$standby->start;
is( $standby->safe_psql('postgres',
		"SELECT token FROM fencing.leases WHERE name = 'job'"),
	$old[2],
	'the standby never saw the last grants');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the standby was not promoted';

is(timeline_of_epoch($standby), 2, 'after the promotion, the epoch is on timeline 2');
cmp_ok(epoch($standby), '>', $old_epoch,
	'the promoted standby\'s epoch beats the old primary\'s, bump included');
my $failover = grant($standby);
ok(beats_all($standby, $failover, @old),
	"a token granted after the failover ($failover) beats every token of the old primary (@old)");
my $next = grant($standby);
ok(beats_all($standby, $next, $failover, @old), 'and the next one beats it too');
$standby->stop;

#
# (b) Point-in-time recovery: a new timeline, a larger epoch
#
my $node = PostgreSQL::Test::Cluster->new('pitr');
$node->init(has_archiving => 1, allows_streaming => 1);
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
my @pitr_old = (grant($node));
$node->backup('base');
push @pitr_old, grant($node);
$node->safe_psql('postgres', "SELECT pg_create_restore_point('before_more')");
push @pitr_old, map { grant($node) } 1 .. 2;
my $walfile = $node->safe_psql('postgres',
	'SELECT pg_walfile_name(pg_current_wal_lsn())');
$node->safe_psql('postgres', 'SELECT pg_switch_wal()');
$node->poll_query_until('postgres',
	"SELECT last_archived_wal >= '$walfile' FROM pg_stat_archiver")
  or die 'WAL was not archived';

my $restored = PostgreSQL::Test::Cluster->new('pitr_restored');
$restored->init_from_backup($node, 'base', has_restoring => 1, standby => 0);
$restored->append_conf('postgresql.conf',
	"recovery_target_name = 'before_more'\nrecovery_target_action = 'promote'");
$restored->start;
$restored->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die 'the point-in-time recovery did not end';

is( $restored->safe_psql('postgres',
		"SELECT token FROM fencing.leases WHERE name = 'job'"),
	$pitr_old[1],
	'the recovery stopped at the restore point, before the last grants');
is(timeline_of_epoch($restored), 2, 'the recovered server is on timeline 2');
cmp_ok(epoch($restored), '>', epoch($node), 'its epoch beats the original\'s');
my $pitr_new = grant($restored);
ok(beats_all($restored, $pitr_new, @pitr_old),
	"its token ($pitr_new) beats every token of the original (@pitr_old)");
$restored->stop;

#
# (c) A file-system snapshot keeps the timeline: bump_epoch() after restoring
#
$node = PostgreSQL::Test::Cluster->new('snap');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');
my @snap_old = map { grant($node) } 1 .. 2;
my $snap_epoch = epoch($node);
$node->stop;
$node->backup_fs_cold('cold');
$node->start;
push @snap_old, map { grant($node) } 1 .. 2;
# the old server bumps too, after the snapshot: the copy cannot know how often
$node->safe_psql('postgres', 'SELECT fencing.bump_epoch()');
push @snap_old, grant($node);
my $bumped_epoch = epoch($node);
sleep 1;    # bumps are at least the Unix time in seconds: be a second later

my $copy = PostgreSQL::Test::Cluster->new('snap_copy');
$copy->init_from_backup($node, 'cold');
$copy->start;
is(epoch($copy), $snap_epoch, 'the restored snapshot is on the epoch of the snapshot');
my $dup = grant($copy);
is($dup, $snap_old[2],
	'without a bump, the copy grants a token the old server already granted');
my $copy_epoch = $copy->safe_psql('postgres', 'SELECT fencing.bump_epoch()');
cmp_ok($copy_epoch, '>', $bumped_epoch,
	'bump_epoch() on the copy beats the epoch of the old server, bumped after the snapshot');
is(epoch($copy), $copy_epoch, 'bump_epoch() returns the new current epoch');
my $snap_new = grant($copy);
ok(beats_all($copy, $snap_new, @snap_old),
	"after bump_epoch(), the copy's token ($snap_new) beats every token of the old server (@snap_old)");
is($copy->safe_psql('postgres', "SELECT fencing.counter('$snap_new')"),
	1, 'the first grant of a new epoch has counter 1');

# bump_epoch() is for operators
$copy->safe_psql('postgres', 'CREATE ROLE app LOGIN');
my ($ret, $stdout, $stderr) = $copy->psql('postgres',
	'SET ROLE app; SELECT fencing.bump_epoch()');
like($stderr, qr/permission denied for function bump_epoch/,
	'an application role cannot bump the epoch');

#
# (d) pg_dump/restore into a new cluster: timeline 1 again, but the epoch
#     continues above the dumped one
#
my $dumpfile = $copy->basedir . '/fencing.dump';
$copy->command_ok(
	[ 'pg_dump', '-Fc', '-f', $dumpfile, '-d', $copy->connstr('postgres') ],
	'pg_dump');
my $fresh = PostgreSQL::Test::Cluster->new('fresh');
$fresh->init;
$fresh->start;
$fresh->command_ok(
	[ 'pg_restore', '-d', $fresh->connstr('postgres'), $dumpfile ],
	'pg_restore into a new cluster');
is( $fresh->safe_psql('postgres',
		"SELECT token FROM fencing.leases WHERE name = 'job'"),
	$snap_new, 'the restored database has the last token');
cmp_ok(epoch($fresh), '>', epoch($copy),
	'in a cluster with another system identifier the epoch grows');
my $fresh_token = grant($fresh);
ok(beats_all($fresh, $fresh_token, $snap_new, @snap_old),
	"the restored database grants a token ($fresh_token) above the dumped ones");

$copy->stop;
$fresh->stop;
$node->stop;
done_testing();
