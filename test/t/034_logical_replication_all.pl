# Logical replication of a whole database: a publication FOR ALL TABLES,
# which includes the extension's own tables.
#
# Publisher and subscriber both have the extension and the same tables,
# protected in row, key and table scope, the subscriber in another order
# (the scopes' storage tables are named after their scopes, so they are
# the same tables on both).  Each keeps its own protections, scopes and
# epochs: the apply worker's rows for fencing.protected, the registry,
# fencing.epoch_state and the storage tables are skipped, a storage row
# first advancing the subscriber's fence of its key to the publisher's.
# Idempotency keys and leases replicate as they are.  Nothing stops the
# apply worker: every change that lowers nothing arrives, the initial copy
# included; a table protected later on both (the subscriber first) joins
# with ALTER SUBSCRIPTION ... REFRESH PUBLICATION.  A change that would
# lower a fence of the subscriber, and a replicated TRUNCATE of a storage
# table, still fail with SF001, and ALTER SUBSCRIPTION ... SKIP goes on.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FencingTest;

my $tables = q{
CREATE EXTENSION fencing;
CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL, fence fencing.fence);
CREATE TABLE ledger (id bigint PRIMARY KEY, account text NOT NULL, amount bigint NOT NULL,
                     fence fencing.fence);
CREATE TABLE events (id bigint PRIMARY KEY, day int NOT NULL, fence fencing.fence);
CREATE TABLE config (name text PRIMARY KEY, value text, fence fencing.fence);
};
my %protect = (
	accounts => q{SELECT fencing.protect('accounts');},
	ledger => q{SELECT fencing.protect('ledger', key_columns => '{account}', scope_name => 'acct');},
	events => q{SELECT fencing.protect('events', key_columns => '{day}');},
	config => q{SELECT fencing.protect('config', key_columns => '{}');});

my $pub = PostgreSQL::Test::Cluster->new('pub_all');
$pub->init(allows_streaming => 'logical');
$pub->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$pub->start;
my $sub = PostgreSQL::Test::Cluster->new('sub_all');
$sub->init(allows_streaming => 'logical');
$sub->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$sub->start;

$pub->safe_psql('postgres',
	$tables . join("\n", map { $protect{$_} } qw(accounts ledger events config)));
$sub->safe_psql('postgres',
	$tables . join("\n", map { $protect{$_} } qw(config events ledger accounts)));
# a table only the subscriber protects, with a fence of its own
$sub->safe_psql('postgres', q{
	CREATE TABLE local_only (k text, fence fencing.fence);
	SELECT fencing.protect('local_only', key_columns => '{k}');
	INSERT INTO local_only VALUES ('x', '9:9');});

is( $pub->safe_psql('postgres',
		'SELECT string_agg(scope_name || \'=\' || storage::text, \' \' ORDER BY scope_name) FROM fencing.scope_storage'),
	$sub->safe_psql('postgres',
		'SELECT string_agg(scope_name || \'=\' || storage::text, \' \' ORDER BY scope_name) FROM fencing.scope_storage WHERE scope_name <> \'public.local_only\''),
	'the same scopes have the same storage tables on both, whatever the order of protect()');

# rows, fences, a lease and an idempotency key before the subscription
$pub->safe_psql('postgres', q{
	INSERT INTO accounts VALUES ('acct-1', 100, '1:1'), ('acct-2', 100, '1:1');
	BEGIN; SET LOCAL fencing.token = '1:5';
	INSERT INTO ledger VALUES (1, 'acct-1', 100), (2, 'acct-2', 100);
	INSERT INTO events VALUES (1, 20240101);
	INSERT INTO config VALUES ('mode', 'on');
	COMMIT;
	SELECT fencing.lease_acquire('orders', 'worker-a', '1 hour');
	SELECT fencing.idem_complete('req-1', token, '{"ok": true}')
	  FROM fencing.idem_begin('req-1', '{"n": 1}');
	CREATE PUBLICATION pub FOR ALL TABLES;
});
my $sub_epoch_state = $sub->safe_psql('postgres',
	'SELECT system_identifier FROM fencing.epoch_state');
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION sub CONNECTION '" . $pub->connstr . " dbname=postgres' PUBLICATION pub");
$sub->wait_for_subscription_sync($pub, 'sub');

my $q_rows = q{
	SELECT (SELECT string_agg(id || '=' || balance || '@' || fence, ' ' ORDER BY id) FROM accounts)
	    || ' | ' || (SELECT string_agg(id || ':' || account || '=' || amount || '@' || fence, ' ' ORDER BY id) FROM ledger)
	    || ' | ' || (SELECT string_agg(id || ':' || day || '@' || fence, ' ' ORDER BY id) FROM events)
	    || ' | ' || (SELECT string_agg(name || '=' || coalesce(value, '-') || '@' || fence, ' ' ORDER BY name) FROM config)};
my $q_scopes = q{
	SELECT string_agg(scope_name || key || '@' || fence, ' ' ORDER BY scope_name, key)
	  FROM fencing.scopes WHERE scope_name <> 'public.local_only'};
my $q_protected = q{
	SELECT string_agg(relid::text || ':' || scope_name, ' ' ORDER BY relid::text) FROM fencing.protected};
my $q_leases_keys = q{
	SELECT (SELECT string_agg(name || '/' || holder || '/' || token, ' ' ORDER BY name) FROM fencing.leases)
	    || ' | ' || (SELECT string_agg(key || '/' || state || '/' || coalesce(result::text, '-'), ' ' ORDER BY key)
	                   FROM fencing.idempotency_keys)};
my $q_errors = q{
	SELECT apply_error_count + sync_error_count FROM pg_stat_subscription_stats WHERE subname = 'sub'};
is( $sub->safe_psql('postgres', $q_protected),
	'accounts:public.accounts config:public.config events:public.events ledger:acct local_only:public.local_only',
	'the initial copy left the subscriber\'s protections as they were');

is($sub->safe_psql('postgres', $q_rows), $pub->safe_psql('postgres', $q_rows),
	'the initial copy of the protected tables went through');
is($sub->safe_psql('postgres', $q_scopes), $pub->safe_psql('postgres', $q_scopes),
	'the subscriber\'s scope fences are the publisher\'s after the initial copy');
is($sub->safe_psql('postgres', $q_leases_keys), $pub->safe_psql('postgres', $q_leases_keys),
	'leases and idempotency keys were copied as they are');
is($sub->safe_psql('postgres', $q_errors), '0', 'no error in the initial copy');

# Writes of every kind on the publisher
$pub->safe_psql('postgres', q{
	UPDATE accounts SET balance = 90, fence = '2:1' WHERE id = 'acct-1';
	BEGIN; SET LOCAL fencing.token = '2:2';
	INSERT INTO ledger VALUES (3, 'acct-1', -10), (4, 'acct-3', 5);
	UPDATE events SET day = 20240102 WHERE id = 1;
	UPDATE config SET value = 'off';
	COMMIT;
	-- a DELETE with a newer token: the scope's fence beats every row's
	BEGIN; SET LOCAL fencing.token = '3:0';
	DELETE FROM ledger WHERE id = 4;
	COMMIT;
	SELECT fencing.lease_renew('orders', (SELECT token FROM fencing.leases WHERE name = 'orders'), '2 hours');
	SELECT fencing.lease_acquire('reports', 'worker-b', '1 hour');
	SELECT state FROM fencing.idem_begin('req-2', '{"n": 2}');
	SELECT fencing.bump_epoch();
});
# a table protected later: on the subscriber first, then on the publisher
$sub->safe_psql('postgres', q{
	CREATE TABLE later (id int PRIMARY KEY, tenant text NOT NULL, fence fencing.fence);
	SELECT fencing.protect('later', key_columns => '{tenant}');});
$pub->safe_psql('postgres', q{
	CREATE TABLE later (id int PRIMARY KEY, tenant text NOT NULL, fence fencing.fence);
	SELECT fencing.protect('later', key_columns => '{tenant}');
	INSERT INTO later VALUES (1, 't1', '4:0');});
$sub->safe_psql('postgres', 'ALTER SUBSCRIPTION sub REFRESH PUBLICATION');
$sub->wait_for_subscription_sync($pub, 'sub');
$pub->safe_psql('postgres', q{
	BEGIN; SET LOCAL fencing.token = '4:1';
	INSERT INTO later VALUES (2, 't1');
	COMMIT;
	-- the publisher stops protecting accounts; the subscriber keeps it
	SELECT fencing.unprotect('accounts');});
$pub->wait_for_catchup('sub');

is($sub->safe_psql('postgres', $q_errors), '0', 'the apply worker met no error');
is($sub->safe_psql('postgres', $q_rows), $pub->safe_psql('postgres', $q_rows),
	'every change arrived, in every scope');
is($sub->safe_psql('postgres', 'SELECT string_agg(id || \':\' || fence, \' \' ORDER BY id) FROM later'),
	'1:4:0 2:4:1', 'the table protected later replicates');
is($sub->safe_psql('postgres', $q_scopes), $pub->safe_psql('postgres', $q_scopes),
	'the subscriber\'s scope fences are the publisher\'s, the DELETE\'s token included');
is( $sub->safe_psql('postgres',
		q{SELECT fence FROM fencing.scopes WHERE scope_name = 'acct' AND key = '["acct-3"]'}),
	'3:0', 'the fence a DELETE left on the publisher is the subscriber\'s too');
is($sub->safe_psql('postgres', $q_leases_keys), $pub->safe_psql('postgres', $q_leases_keys),
	'leases and idempotency keys replicate as they are');
is( $sub->safe_psql('postgres', $q_protected),
	'accounts:public.accounts config:public.config events:public.events later:public.later ledger:acct local_only:public.local_only',
	'the subscriber keeps its own protections (accounts too, unprotected on the publisher)');
is( $sub->safe_psql('postgres', q{SELECT fence FROM fencing.scopes WHERE scope_name = 'public.local_only'}),
	'9:9', 'the subscriber\'s own scope is untouched');
is($sub->safe_psql('postgres', 'SELECT system_identifier FROM fencing.epoch_state'),
	$sub_epoch_state, 'the subscriber keeps its own epoch state');
is( $sub->safe_psql('postgres',
		'SELECT count(*) FROM fencing.protected_tables WHERE NOT guard_intact'),
	'0', 'every guard of the subscriber is intact');

# The subscriber's own writes are still guarded against what replicated
my ($state) = FencingTest::sql_error($sub, 'postgres',
	"BEGIN; SET LOCAL fencing.token = '2:9'; INSERT INTO ledger VALUES (10, 'acct-3', 1); COMMIT;");
is($state, 'SF001', 'subscriber: a token older than the replicated fence of a key is refused');
($state) = FencingTest::sql_error($sub, 'postgres',
	"UPDATE accounts SET balance = 0, fence = '1:9' WHERE id = 'acct-1'");
is($state, 'SF001', 'subscriber: a token older than a replicated row fence is refused');

# A change that would lower a fence of the subscriber is refused (SF001);
# skipping it, replication goes on
$sub->safe_psql('postgres',
	"BEGIN; SET LOCAL fencing.token = '8:0'; INSERT INTO ledger VALUES (20, 'acct-1', 1); COMMIT;");
my $offset = -s $sub->logfile;
$pub->safe_psql('postgres',
	"BEGIN; SET LOCAL fencing.token = '5:0'; INSERT INTO ledger VALUES (21, 'acct-1', 1); COMMIT;");
ok($sub->wait_for_log(qr/ERROR:  stale fence token 5:0 for table "ledger"/, $offset),
	'the apply worker is refused a row older than the subscriber\'s key fence (SF001)');
is( $sub->safe_psql('postgres',
		q{SELECT (SELECT fence FROM fencing.scopes WHERE scope_name = 'acct' AND key = '["acct-1"]')
		         || ' ' || (SELECT count(*) FROM ledger WHERE id = 21)}),
	'8:0 0', 'no fence lowered, no stale row');

sub skip_failed
{
	my ($from) = @_;
	my $log = slurp_file($sub->logfile, $from);
	# the transaction that failed last
	my @lsns = ($log =~ /ERROR: .*\n(?:.*\n)*?.*CONTEXT: .*finished at ([0-9A-F]+\/[0-9A-F]+)/g)
	  or die "no failed transaction in the log";
	$sub->safe_psql('postgres', "ALTER SUBSCRIPTION sub SKIP (lsn = '$lsns[-1]')");
}
skip_failed($offset);

# A replicated TRUNCATE of a storage table would lower every fence of the
# scope: refused (SF001), and skipped
$offset = -s $sub->logfile;
$pub->safe_psql('postgres', q{
	DO $$ BEGIN
	  EXECUTE format('TRUNCATE %s', (SELECT storage FROM fencing.scope_storage WHERE scope_name = 'public.events'));
	END $$;});
ok($sub->wait_for_log(qr/ERROR:  replicated TRUNCATE of table "scope_\w+" is refused/, $offset),
	'a replicated TRUNCATE of a storage table is refused (SF001)');
is( $sub->safe_psql('postgres',
		q{SELECT string_agg(key || '@' || fence, ' ' ORDER BY key) FROM fencing.scopes WHERE scope_name = 'public.events'}),
	'["20240101"]@2:2 ["20240102"]@2:2', 'the subscriber keeps the fences of the scope');
skip_failed($offset);

$pub->safe_psql('postgres',
	"BEGIN; SET LOCAL fencing.token = '9:1'; INSERT INTO ledger VALUES (30, 'acct-2', 1); COMMIT;");
$pub->wait_for_catchup('sub');
is($sub->safe_psql('postgres', 'SELECT fence FROM ledger WHERE id = 30'),
	'9:1', 'replication goes on after the skipped transactions');

$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sub');
$sub->stop;
$pub->stop;
done_testing();
