# The counters of a dropped database are freed: DROP DATABASE frees the
# entries of its tables, its lease counters and its memory of grant ends
# when it commits, so they neither take the room that other databases'
# tables need nor come back after a restart.  Counters saved while the
# database still existed, and loaded after a start that follows its drop
# by a server without the preload, are freed by the first backend that
# touches the counters.
#
# The room is small on purpose (two tables, one database's lease
# counters): an entry that was not freed sends the next database's writes
# to the overflow row (relid NULL) and logs that the statistics are full.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats_dropped_db');
$node->init;
my $preload = q{
shared_preload_libraries = 'fencing'
fencing.stats_max_tables = 2
fencing.stats_max_databases = 1
fencing.stats_max_leases = 1
};
$node->append_conf('postgresql.conf', $preload);
$node->start;

# A database with two protected tables written, a lease acquired and
# released (an entry of each of the three kinds), filling the room.
sub fill
{
	my ($db) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
		CREATE EXTENSION fencing;
		CREATE TABLE a (id int PRIMARY KEY, fence fencing.fence);
		CREATE TABLE b (id int PRIMARY KEY, fence fencing.fence);
		SELECT fencing.protect('a');
		SELECT fencing.protect('b');
		INSERT INTO a VALUES (1, '1:1');
		INSERT INTO b VALUES (1, '1:1');
		SELECT fencing.lease_release('l', fencing.lease_acquire('l', 'h', '1 hour'));
	});
	is($node->safe_psql($db,
			'SELECT string_agg(relid::text, \',\' ORDER BY relid::text) FROM fencing.stats'),
		'a,b', "$db: both tables counted separately");
}

# A new database's table and lease get entries of their own, and nothing
# logs that the statistics are full.
sub check_room
{
	my ($db, $offset, $what) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
		CREATE EXTENSION fencing;
		CREATE TABLE c (id int PRIMARY KEY, fence fencing.fence);
		SELECT fencing.protect('c');
		INSERT INTO c VALUES (1, '1:1');
		SELECT fencing.lease_release('m', fencing.lease_acquire('m', 'h', '1 hour'));
	});
	is( $node->safe_psql($db,
			q{SELECT coalesce(relid::text, 'overflow') || ' ' || accepted FROM fencing.stats}),
		'c 1', "$what: the new table has an entry of its own");
	is( $node->safe_psql($db,
			q{SELECT acquired || ' ' || released || ' ' || hold_count FROM fencing.lease_stats}),
		'1 1 1', "$what: the new database has lease counters of its own");
	my $log = slurp_file($node->logfile, $offset);
	unlike($log, qr/fencing\.stats is full/, "$what: fencing.stats did not overflow");
	unlike($log, qr/fencing\.lease_stats is full/, "$what: fencing.lease_stats did not overflow");
	unlike($log, qr/cannot remember more lease names/, "$what: the memory of grant ends did not overflow");
	$node->safe_psql('postgres', "DROP DATABASE $db");
}

# DROP DATABASE frees the entries when it commits
fill('d1');
my $offset = -s $node->logfile;
$node->safe_psql('postgres', 'DROP DATABASE d1');
check_room('n1', $offset, 'after DROP DATABASE');

# a DROP DATABASE that fails keeps them: the database is still there
fill('d2');
my $bg = $node->background_psql('d2');
my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE d2');
like($err, qr/is being accessed by other users/, 'DROP DATABASE of a database in use fails');
$bg->quit;
is($node->safe_psql('d2', q{SELECT count(*) FROM fencing.stats WHERE relid IS NOT NULL}),
	'2', 'a failed DROP DATABASE keeps the counters of the database');
$offset = -s $node->logfile;
$node->safe_psql('postgres', 'DROP DATABASE d2');
check_room('n2', $offset, 'after a failed and a successful DROP DATABASE');

# counters saved and loaded with the database, then the database dropped:
# they do not come back after the next restart
fill('d3');
$node->restart;
is($node->safe_psql('d3', 'SELECT count(*) FROM fencing.stats'),
	'2', 'the counters of d3 survive a clean restart');
$node->safe_psql('postgres', 'DROP DATABASE d3');
$node->restart;
$offset = -s $node->logfile;
check_room('n3', $offset, 'after DROP DATABASE and a restart');

# dropped, then a restart: nothing of it is saved
fill('d4');
$node->safe_psql('postgres', 'DROP DATABASE d4');
$node->restart;
$offset = -s $node->logfile;
check_room('n4', $offset, 'after a restart that follows DROP DATABASE');

# saved with the database; the database dropped while the server ran
# without the preload (no hook saw it); loaded at the next start with the
# preload: freed by the first backend that touches the counters
fill('d5');
$node->stop;
$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$node->start;
$node->safe_psql('postgres', 'DROP DATABASE d5');
$node->stop;
$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "'fencing'");
$node->start;
$offset = -s $node->logfile;
check_room('n5', $offset, 'after a start that loaded the counters of a database dropped meanwhile');

$node->stop;
done_testing();
