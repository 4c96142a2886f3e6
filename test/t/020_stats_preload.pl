# fencing.stats needs shared_preload_libraries; everything else does not.
#
# A server without the preload: the statistics raise 55000 with a HINT to
# preload, the rest of the extension works.  The same server restarted with
# the preload: the statistics work, and fencing.stats_max_tables applies.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats_preload');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# Without the preload
foreach my $sql ('SELECT * FROM fencing.stats',
	'SELECT * FROM fencing.idempotency_stats',
	'SELECT * FROM fencing.lease_stats',
	'SELECT fencing.stats_reset()')
{
	my ($ret, $stdout, $stderr) =
	  $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	isnt($ret, 0, "without the preload, \"$sql\" fails");
	like(
		$stderr,
		qr/ERROR:  55000: fencing must be loaded via "shared_preload_libraries"/,
		"... with 55000 and the message of pg_stat_statements");
	like(
		$stderr,
		qr/HINT:  Add fencing to "shared_preload_libraries" in postgresql\.conf and restart the server/,
		'... and a HINT to preload');
}

is($node->safe_psql('postgres', "SELECT fencing.advance(NULL, '1:1')"),
	'1:1', 'without the preload, fencing.advance works');
is( $node->safe_psql(
		'postgres',
		"CREATE TABLE t (id int PRIMARY KEY, fence fencing.fence);
		 INSERT INTO t VALUES (1, '2:5');
		 UPDATE t SET fence = fencing.advance(fence, '2:6') WHERE id = 1;
		 SELECT fence FROM t ORDER BY fence"),
	'2:6',
	'without the preload, the type, its index and advance() in UPDATE work');
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	"UPDATE t SET fence = fencing.advance(fence, '2:6') WHERE id = 1");
like($stderr, qr/fence token 2:6 was already used/,
	'without the preload, a stale token is still refused');
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'SHOW fencing.stats_max_tables');
isnt($ret, 0,
	'without the preload, fencing.stats_max_tables is not defined');

# the leases work, and fencing.lease_status needs no preload
is( $node->safe_psql(
		'postgres',
		"SELECT fencing.lease_acquire('l', 'a', '1 hour') IS NOT NULL;
		 SELECT fencing.lease_renew('l', '0:1', '1 hour');
		 SELECT name, holder, live, remaining > interval '59 minutes'
		   FROM fencing.lease_status"),
	"t\nf\nl|a|t|t",
	'without the preload, the leases work and fencing.lease_status shows them');
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'SHOW fencing.stats_max_leases');
isnt($ret, 0,
	'without the preload, fencing.stats_max_leases is not defined');

# With the preload
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->restart;

is($node->safe_psql('postgres', 'SELECT count(*) FROM fencing.stats'),
	'0', 'with the preload, fencing.stats is empty');
is( $node->safe_psql('postgres', 'SELECT * FROM fencing.idempotency_stats'),
	'0|0|0|0|0|0', 'with the preload, fencing.idempotency_stats is zero');
is( $node->safe_psql('postgres', 'SELECT * FROM fencing.lease_stats'),
	'0|0|0|0|0|0|0|0|0|0|0', 'with the preload, fencing.lease_stats is zero');
is( $node->safe_psql('postgres',
		'SHOW fencing.stats_max_databases; SHOW fencing.stats_max_leases'),
	"100\n1000", 'fencing.stats_max_databases and stats_max_leases default to 100 and 1000');
is($node->safe_psql('postgres', 'SELECT fencing.stats_reset()'),
	'', 'with the preload, fencing.stats_reset works');
is($node->safe_psql('postgres', 'SHOW fencing.stats_max_tables'),
	'1000', 'fencing.stats_max_tables defaults to 1000');
is($node->safe_psql('postgres', "SELECT fencing.advance(NULL, '1:1')"),
	'1:1', 'with the preload, fencing.advance works');

# The capacity is fixed at server start
$node->append_conf('postgresql.conf', 'fencing.stats_max_tables = 10');
$node->reload;
is($node->safe_psql('postgres', 'SHOW fencing.stats_max_tables'),
	'1000', 'fencing.stats_max_tables changes only with a restart');
$node->restart;
is($node->safe_psql('postgres', 'SHOW fencing.stats_max_tables'),
	'10', 'fencing.stats_max_tables = 10 after the restart');
is($node->safe_psql('postgres', 'SELECT count(*) FROM fencing.stats'),
	'0', 'fencing.stats works with a small capacity');

# A database created later sees the statistics too
$node->safe_psql('postgres', 'CREATE DATABASE other');
$node->safe_psql('other', 'CREATE EXTENSION fencing');
is($node->safe_psql('other', 'SELECT count(*) FROM fencing.stats'),
	'0', 'fencing.stats works in a second database');

# A full table: the tables beyond it count in the row whose relid is NULL,
# and a dropped table's entry is free for the next one
$node->append_conf('postgresql.conf', qq{
fencing.stats_max_tables = 2
fencing.stats_max_databases = 1
fencing.stats_max_leases = 1
});
$node->restart;
$node->safe_psql('postgres', q{
	CREATE TABLE t1 (id int PRIMARY KEY, fence fencing.fence);
	CREATE TABLE t2 (id int PRIMARY KEY, fence fencing.fence);
	CREATE TABLE t3 (id int PRIMARY KEY, fence fencing.fence);
	CREATE TABLE t4 (id int PRIMARY KEY, fence fencing.fence);
	SELECT fencing.protect(t) FROM unnest('{t1,t2,t3,t4}'::regclass[]) t;
	INSERT INTO t1 VALUES (1, '1:1');
	INSERT INTO t2 VALUES (1, '1:1');
	INSERT INTO t3 VALUES (1, '1:1');
});
is( $node->safe_psql('postgres',
		'SELECT relid, accepted FROM fencing.stats ORDER BY relid NULLS LAST'),
	"t1|1\nt2|1\n|1",
	'a full fencing.stats counts the next table in the row whose relid is NULL');
like(slurp_file($node->logfile), qr/LOG:  fencing.stats is full/,
	'... and logs it once');
$node->safe_psql('postgres', q{
	DROP TABLE t1;
	INSERT INTO t4 VALUES (1, '1:1');
});
is( $node->safe_psql('postgres',
		'SELECT relid, accepted FROM fencing.stats ORDER BY relid NULLS LAST'),
	"t2|1\nt4|1\n|1",
	'the entry of a dropped table is freed and serves another table');

# full lease hashes: the second database shares the overflow row, and
# grant ends beyond the first lease name are counted without memory (logged)
$node->safe_psql('postgres', q{
	SELECT fencing.lease_acquire('x', 'a', '1 hour');
	SELECT fencing.lease_acquire('y', 'a', '1 hour');
	SELECT fencing.lease_acquire('y', 'a', '1 hour');
	SELECT fencing.lease_acquire('x', 'a', '1 hour');
});
is($node->safe_psql('postgres', 'SELECT acquired, hold_count FROM fencing.lease_stats'),
	'4|2', 'the lease counters of the first database');
$node->safe_psql('other', q{SELECT fencing.lease_acquire('z', 'a', '1 hour')});
is($node->safe_psql('other', 'SELECT acquired FROM fencing.lease_stats'),
	'1', 'a database beyond fencing.stats_max_databases counts in the shared row');
my $log = slurp_file($node->logfile);
like($log, qr/LOG:  fencing.lease_stats is full/, '... which is logged');
like($log, qr/LOG:  fencing.lease_stats cannot remember more lease names/,
	'a lease name beyond fencing.stats_max_leases is logged');

$node->stop;
done_testing();
