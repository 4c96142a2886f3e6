# The counters under concurrent writers from many backends: pgbench runs
# 16 clients at once, every transaction making a known set of calls (guarded
# writes accepted and rejected in row and key scope, idem_begin outcomes,
# lease calls on each client's own lease and on one lease that all of them
# fight for), and every counter of fencing.stats, fencing.idempotency_stats
# and fencing.lease_stats must equal the number of calls made.  Nothing is
# lost to a race between backends (the table counters are atomic adds, the
# lease counters are kept under a spinlock, the end of each grant is
# counted once).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $clients = 16;
my $xacts   = 150;

my $node = PostgreSQL::Test::Cluster->new('concurrency');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'fencing'
max_connections = 40
});
$node->start;

$node->safe_psql('postgres', qq{
	CREATE EXTENSION fencing;
	CREATE SEQUENCE tok;
	CREATE SEQUENCE keys;
	-- row scope: client c writes row c with ever newer tokens
	CREATE TABLE accounts (id int PRIMARY KEY, fence fencing.fence);
	INSERT INTO accounts SELECT g, NULL FROM generate_series(1, $clients) g;
	SELECT fencing.protect('accounts');
	-- key scope: client c appends to account c
	CREATE TABLE ledger (id bigserial PRIMARY KEY, account int NOT NULL,
	                     fence fencing.fence);
	SELECT fencing.protect('ledger', key_columns => '{account}');

	-- a rejected write, caught so that the client goes on (its count stays)
	CREATE FUNCTION try_stale(c int) RETURNS void LANGUAGE plpgsql AS \$\$
	BEGIN
	    UPDATE accounts SET fence = '0:1' WHERE id = c;
	    RAISE EXCEPTION 'stale write accepted';
	EXCEPTION WHEN SQLSTATE 'SF001' THEN
	    NULL;
	END \$\$;
	CREATE FUNCTION try_missing(c int) RETURNS void LANGUAGE plpgsql AS \$\$
	BEGIN
	    INSERT INTO ledger (account) VALUES (c);
	    RAISE EXCEPTION 'tokenless write accepted';
	EXCEPTION WHEN SQLSTATE 'SF002' THEN
	    NULL;
	END \$\$;
	CREATE FUNCTION try_in_progress() RETURNS void LANGUAGE plpgsql AS \$\$
	BEGIN
	    PERFORM fencing.idem_begin('held', '{}', wait => false);
	    RAISE EXCEPTION 'a held key was claimed';
	EXCEPTION WHEN SQLSTATE 'SF004' THEN
	    NULL;
	END \$\$;

	-- a key that is done (replayed) and one held with a live claim (SF004)
	SELECT fencing.idem_complete('done', token, '{"ok": true}')
	  FROM fencing.idem_begin('done', '{}');
	SELECT fencing.idem_begin('held', '{}', lease => '1 hour');
	SELECT fencing.stats_reset();
});

my $script = q{
UPDATE accounts SET fence = fencing.fence(1, nextval('tok')) WHERE id = :client_id + 1;
SELECT try_stale(:client_id + 1);
BEGIN;
SELECT set_config('fencing.token', fencing.fence(1, nextval('tok'))::text, true);
INSERT INTO ledger (account) VALUES (:client_id + 1);
COMMIT;
SELECT try_missing(:client_id + 1);
SELECT state FROM fencing.idem_begin('k' || nextval('keys'), '{}');
SELECT state FROM fencing.idem_begin('done', '{}');
SELECT try_in_progress();
SELECT fencing.lease_acquire('own-' || :client_id, 'me', '1 hour');
SELECT fencing.lease_acquire('own-' || :client_id, 'someone else', '1 hour');
SELECT fencing.lease_renew('own-' || :client_id, '0:1', '1 hour');
SELECT fencing.lease_acquire('shared', 'client-' || :client_id, '1 hour');
};

$node->pgbench(
	"--no-vacuum --client=$clients --jobs=4 --transactions=$xacts",
	0,
	[ qr{processed: @{[ $clients * $xacts ]}/@{[ $clients * $xacts ]}} ],
	[ qr{^$} ],
	"$clients clients x $xacts transactions ran without an error",
	{ '081_counters' => $script });

my $n = $clients * $xacts;

is( $node->safe_psql('postgres', q{
		SELECT relid, accepted, rejected_stale, rejected_missing, bypassed
		  FROM fencing.stats ORDER BY relid::text}),
	"accounts|$n|$n|0|0\nledger|$n|0|$n|0",
	"fencing.stats: $n accepted and $n rejected writes per table, as made");

is($node->safe_psql('postgres', 'SELECT * FROM fencing.idempotency_stats'),
	"$n|$n|0|0|$n|0",
	"fencing.idempotency_stats: $n started, $n replayed, $n in progress, as made");

# Every client's own lease: granted on each of its acquires (the same
# holder again), refused to the other holder, renewal failed.  The shared
# lease: one client won it and re-granted it on each of its calls, every
# other call was refused.  Each re-grant ended a grant: a hold.
my $acquired = $n + $xacts;
my $refused  = $n + ($n - $xacts);
my $holds    = $clients * ($xacts - 1) + ($xacts - 1);
is( $node->safe_psql('postgres', q{
		SELECT acquired, acquire_refused, renewed, renew_failed, released,
		       release_failed, expired, rejected, hold_count
		  FROM fencing.lease_stats}),
	"$acquired|$refused|0|$n|0|0|0|0|$holds",
	'fencing.lease_stats: every lease call counted once, and every ended grant');

# the counts agree with the tables themselves
is( $node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM ledger),
		       (SELECT fencing.counter(token) FROM fencing.leases WHERE name = 'shared')}),
	"$n|$xacts",
	'the ledger has a row per accepted insert; the shared lease was granted once per winning call');

# Many backends noticing the same expiries at once: each grant's end is
# counted exactly once, whoever notices first (checks and renewals race)
$node->safe_psql('postgres', q{
	SELECT fencing.lease_acquire('exp-' || g, 'gone', '10 milliseconds')
	  FROM generate_series(1, 20) g;
	SELECT pg_sleep(0.05);
	SELECT fencing.stats_reset();
});
$node->pgbench(
	"--no-vacuum --client=$clients --jobs=4 --transactions=5",
	0,
	[ qr{processed: @{[ $clients * 5 ]}/@{[ $clients * 5 ]}} ],
	[ qr{^$} ],
	"$clients clients noticing the same 20 expiries",
	{ '081_expiries' => q{
SELECT count(*) FROM generate_series(1, 20) g WHERE fencing.lease_check('exp-' || g, '0:1');
SELECT count(*) FROM generate_series(1, 20) g WHERE fencing.lease_renew('exp-' || g, '0:1', '1 hour');
} });
is( $node->safe_psql('postgres', q{
		SELECT expired, hold_count, renew_failed, round(hold_seconds_sum::numeric, 6),
		       round(hold_seconds_max::numeric, 6)
		  FROM fencing.lease_stats}),
	'20|20|' . ($clients * 5 * 20) . '|0.200000|0.010000',
	'each of the 20 expiries counted once, with its 10 ms hold');

$node->stop;
done_testing();
