# fencing.stats needs shared_preload_libraries; everything else does not.
#
# A server without the preload: the statistics raise 55000 with a HINT to
# preload, the rest of the extension works.  The same server restarted with
# the preload: the statistics work, and fencing.stats_max_tables applies.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats_preload');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# Without the preload
foreach my $sql ('SELECT * FROM fencing.stats',
	'SELECT * FROM fencing.idempotency_stats',
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
like($stderr, qr/stale fence token 2:6/,
	'without the preload, a stale token is still refused');
($ret, $stdout, $stderr) =
  $node->psql('postgres', 'SHOW fencing.stats_max_tables');
isnt($ret, 0,
	'without the preload, fencing.stats_max_tables is not defined');

# With the preload
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->restart;

is($node->safe_psql('postgres', 'SELECT count(*) FROM fencing.stats'),
	'0', 'with the preload, fencing.stats is empty');
is( $node->safe_psql('postgres', 'SELECT * FROM fencing.idempotency_stats'),
	'0|0|0|0|0', 'with the preload, fencing.idempotency_stats is zero');
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

$node->stop;
done_testing();
