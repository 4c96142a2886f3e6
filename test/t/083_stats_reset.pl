# fencing.stats_reset() zeroes every counter of every database at once:
# fencing.stats (its overflow row too), fencing.lease_stats (its hold
# figures and its overflow too) and fencing.idempotency_stats; it returns
# nothing, may be called again, and counting goes on after it.
#
# On a cluster of its own because the reset is server-wide: the regression
# files, which `make installcheck` may run against a server of yours, never
# call it (they read the counters of tables of their own, or differences).
# The room is small (two tables, one database's lease counters) so that
# the second database counts into the overflow entries.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('stats_reset');
$node->init;
$node->append_conf('postgresql.conf', q{
shared_preload_libraries = 'fencing'
fencing.stats_max_tables = 2
fencing.stats_max_databases = 1
});
$node->start;

my $q_tables = q{
	SELECT coalesce(relid::text, 'overflow'), accepted, rejected_stale,
	       rejected_missing, bypassed
	  FROM fencing.stats ORDER BY 1};
my $q_counted = q{
	SELECT count(*) FROM fencing.stats
	 WHERE accepted + rejected_stale + rejected_missing + bypassed > 0};
my $q_leases = 'SELECT * FROM fencing.lease_stats';
my $q_idem   = 'SELECT * FROM fencing.idempotency_stats';
my $zero_leases = join('|', ('0') x 11);

# In each database: two protected tables, a write of each kind to each
# (accepted, stale, without a token, bypassed), a lease held and released,
# a lease that runs out, an idempotency key started and asked for again.
for my $db ('one', 'two')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, q{
		CREATE EXTENSION fencing;
		CREATE TABLE a (id int PRIMARY KEY, fence fencing.fence);
		CREATE TABLE b (id int PRIMARY KEY, fence fencing.fence);
		SELECT fencing.protect('a');
		SELECT fencing.protect('b');
		INSERT INTO a VALUES (1, '1:5');
		INSERT INTO b VALUES (1, '1:5');
		DO $$ BEGIN
		    UPDATE a SET fence = '1:1';
		EXCEPTION WHEN SQLSTATE 'SF001' THEN NULL; END $$;
		DO $$ BEGIN
		    UPDATE b SET id = 1;
		EXCEPTION WHEN SQLSTATE 'SF002' THEN NULL; END $$;
		SET fencing.bypass = on;
		UPDATE a SET id = 1;
		RESET fencing.bypass;
		CREATE TEMP TABLE held AS
		    SELECT fencing.lease_acquire('l', 'w', '1 hour') AS token;
		SELECT pg_sleep(0.05);
		SELECT fencing.lease_release('l', token) FROM held;
		SELECT fencing.lease_acquire('short', 'w', '1 millisecond');
		SELECT pg_sleep(0.05);
		SELECT fencing.lease_acquire('short', 'v', '1 hour') IS NOT NULL;
		SELECT fencing.idem_begin('k-' || current_database(), '{}');
		DO $$ BEGIN
		    PERFORM fencing.idem_begin('k-' || current_database(), '{}', wait => false);
		EXCEPTION WHEN SQLSTATE 'SF004' THEN NULL; END $$;
	});
}

# What was counted, as seen from each database
is($node->safe_psql('one', $q_tables),
	"a|1|1|0|1\nb|1|0|1|0\noverflow|2|1|1|1",
	'before the reset: database one counts its tables, the overflow row database two\'s');
is($node->safe_psql('two', $q_tables), 'overflow|2|1|1|1',
	'... database two sees the overflow row');
for my $db ('one', 'two')
{
	is( $node->safe_psql($db, q{
			SELECT acquired, expired, hold_count, hold_seconds_sum >= 0.05,
			       hold_seconds_max >= 0.05
			  FROM fencing.lease_stats}),
		'3|1|2|t|t',
		"before the reset: database $db has counted its leases");
}
is($node->safe_psql('one', $q_idem), '2|0|0|0|2|0',
	'before the reset: the idempotency keys of both databases are counted');

# The reset, from one database
is($node->safe_psql('one', 'SELECT fencing.stats_reset()'),
	'', 'fencing.stats_reset() returns nothing');
for my $db ('one', 'two')
{
	is($node->safe_psql($db, $q_counted),
		'0', "after the reset: no table of database $db has a count, nor the overflow row");
	is($node->safe_psql($db, $q_leases),
		$zero_leases, "after the reset: the lease counters and hold figures of database $db are zero");
	is($node->safe_psql($db, $q_idem),
		'0|0|0|0|0|0', "after the reset: fencing.idempotency_stats is zero in database $db");
}

# Again: idempotent
is($node->safe_psql('two', 'SELECT fencing.stats_reset()'),
	'', 'a second reset returns nothing');
is( $node->safe_psql('two', "$q_counted; $q_leases; $q_idem"),
	"0\n$zero_leases\n0|0|0|0|0|0",
	'... and everything stays zero');

# Counting goes on from zero (the entries stayed where they were)
$node->safe_psql('one', q{
	UPDATE a SET fence = '1:6';
	SELECT fencing.idem_begin('after', '{}');
});
$node->safe_psql('two', "UPDATE a SET fence = '1:6'");
is($node->safe_psql('one', "$q_tables; $q_idem"),
	"a|1|0|0|0\nb|0|0|0|0\noverflow|1|0|0|0\n1|0|0|0|0|0",
	'after the reset, writes and idempotency keys count from zero');

done_testing();
