# Idempotency keys under a race: many clients begin the same new keys at
# the same moment, on the direct path (a speculative insertion without
# SPI) and on the SPI path (INSERT ... ON CONFLICT, once the table has an
# extra index), waiting or not.
#
# Every 16 requests (a sequence counts them) a new generation of four
# keys starts, each asked for four times, and eight pgbench clients fight
# over it: each begins a key of the current generation (with or without
# wait), writes its business row if it got the claim, and completes.  Whatever the interleaving, no key is claimed twice (one
# business row per key), no call sees a unique violation or any error but
# SF004 (a pgbench client would abort), and every key ends done with the
# result of the one claim.  The counters show that the race happened:
# replays (a waiter saw the first caller's result) and SF004s (a caller
# that would not wait).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('idem_race');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->append_conf('postgresql.conf', "max_connections = 40");
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION fencing;
	CREATE TABLE biz (key text NOT NULL, token fencing.fence NOT NULL,
	                  pid int NOT NULL DEFAULT pg_backend_pid());
	CREATE SEQUENCE race_requests;
	CREATE FUNCTION race_request() RETURNS text LANGUAGE plpgsql AS $$
	DECLARE
	    r bigint := nextval('race_requests');
	    k text := 'k:' || r / 16 || ':' || r % 4;
	    w boolean := random() < 0.5;
	    b record;
	BEGIN
	    BEGIN
	        SELECT * INTO b FROM fencing.idem_begin(k, '{"race": true}', wait => w);
	    EXCEPTION WHEN SQLSTATE 'SF004' THEN
	        RETURN 'busy';
	    END;
	    IF b.state = 'done' THEN
	        RETURN 'done';
	    END IF;
	    INSERT INTO biz (key, token) VALUES (k, b.token);
	    PERFORM fencing.idem_complete(k, b.token,
	                                  jsonb_build_object('token', b.token::text));
	    RETURN b.state;
	END
	$$;
});

# One race: eight clients, 40 requests each (320: 80 keys, each asked for
# four times, so that at least three callers of each meet it begun), then
# the invariants.
sub race
{
	my ($path) = @_;

	$node->safe_psql('postgres',
		'TRUNCATE biz, fencing.idempotency_keys; SELECT fencing.stats_reset()');
	$node->pgbench(
		'-n -c 8 -j 4 -t 40 -M prepared',
		0,
		[ qr{number of failed transactions: 0 }, qr{processed: [1-9]} ],
		[qr{^$}],
		"$path: eight clients race for new keys without an error",
		{ "041_idem_race_$path" => "SELECT race_request();\n" });

	is( $node->safe_psql('postgres',
			'SELECT count(*) FROM (SELECT key FROM biz GROUP BY key HAVING count(*) > 1) AS d'),
		'0', "$path: no key was claimed twice");
	is( $node->safe_psql('postgres', q{
			SELECT count(*) FROM fencing.idempotency_keys AS k
			 WHERE k.state <> 'done'
			    OR (SELECT count(*) FROM biz AS b WHERE b.key = k.key
			          AND b.token OPERATOR(fencing.=) k.claim
			          AND k.result ->> 'token' = b.token::text) <> 1}),
		'0', "$path: every key is done, with the result of its one claim");
	is( $node->safe_psql('postgres', q{
			SELECT count(*) FROM biz AS b
			 WHERE NOT EXISTS (SELECT FROM fencing.idempotency_keys AS k WHERE k.key = b.key)}),
		'0', "$path: no business row without its key");
	my ($started, $replayed, $busy) = split /\|/, $node->safe_psql('postgres',
		'SELECT started, replayed, in_progress_rejected FROM fencing.idempotency_stats');
	cmp_ok($started, '>', 10, "$path: many keys were started ($started)");
	cmp_ok($replayed + $busy, '>', 0,
		"$path: callers met a key being begun ($replayed replays, $busy SF004)");
	note("$path: $started started, $replayed replayed, $busy SF004");
}

race('direct');

# An extra index: the table no longer qualifies for the direct path, and
# the helpers go through SPI.
$node->safe_psql('postgres',
	'CREATE INDEX race_extra ON fencing.idempotency_keys (created_at)');
race('spi');

$node->stop;
done_testing();
