# pg_dump and pg_restore keep every protection and every fence.
#
# Tables protected in row, key and table scope and a partitioned table are
# dumped with pg_dump -Fc and restored into a new database.  The restore
# must run without an error (the DDL guard lets through what a restore
# does: CREATE TRIGGER, then ALTER TABLE ... ENABLE ALWAYS TRIGGER), and the
# restored database must refuse the stale and the token-less writes.  At
# the end DROP EXTENSION fencing CASCADE must work.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dump_restore');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql(
	'src', q{
CREATE EXTENSION fencing;
CREATE TABLE accounts (id text PRIMARY KEY, balance bigint, fence fencing.fence);
CREATE TABLE ledger (id bigserial PRIMARY KEY, account_id text NOT NULL,
                     amount bigint, fence fencing.fence);
CREATE TABLE settings (name text PRIMARY KEY, value text, fence fencing.fence);
CREATE TABLE events (tenant text NOT NULL, day date NOT NULL, fence fencing.fence)
    PARTITION BY RANGE (day);
CREATE TABLE events_jan PARTITION OF events
    FOR VALUES FROM ('2024-01-01') TO ('2024-02-01');
INSERT INTO accounts VALUES ('a', 100, '2:5'), ('b', 50, '1:1');
INSERT INTO ledger (account_id, amount, fence) VALUES ('a', 100, '2:5'), ('b', 50, '1:1');
INSERT INTO settings VALUES ('mode', 'on', '3:0');
SELECT fencing.protect('accounts');
SELECT fencing.protect('ledger', key_columns => '{account_id}', scope_name => 'acct');
SELECT fencing.protect('settings', key_columns => '{}', strict => false);
SELECT fencing.protect('events', key_columns => '{tenant}');
-- a partition created after protect()
CREATE TABLE events_feb PARTITION OF events
    FOR VALUES FROM ('2024-02-01') TO ('2024-03-01');
INSERT INTO events VALUES ('t1', '2024-01-10', '4:0'), ('t1', '2024-02-10', '4:1');
-- idempotency keys: one done, one running (its lease still live)
SELECT fencing.idem_complete('req-1', token, '{"paid": 25}')
  FROM fencing.idem_begin('req-1', '{"refund": "r-1"}');
SELECT state FROM fencing.idem_begin('req-2', '{"refund": "r-2"}', lease => '1 hour');
});

my $catalog_sql = q{
SELECT relid::text, fence_column, key_columns, strict, scope_name
  FROM fencing.protected ORDER BY 1;
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY 1, 2;
SELECT tgrelid::regclass::text, tgname, tgenabled, tgfoid::regproc::text
  FROM pg_trigger WHERE tgname LIKE 'zz_fencing%' ORDER BY 1, 2;
SELECT relid::text, scope_kind, partitions, guard_intact
  FROM fencing.protected_tables ORDER BY 1;
};
my $before = $node->safe_psql('src', $catalog_sql);

my $dump = $PostgreSQL::Test::Utils::tmp_check . '/src.dump';
$node->command_ok(
	[ 'pg_dump', '-Fc', '-d', $node->connstr('src'), '-f', $dump ],
	'pg_dump -Fc of a database with protected tables');

$node->safe_psql('postgres', 'CREATE DATABASE dst');
my ($stdout, $stderr) = ('', '');
my $ok = IPC::Run::run(
	[ 'pg_restore', '--exit-on-error', '-d', $node->connstr('dst'), $dump ],
	'>', \$stdout, '2>', \$stderr);
ok($ok, 'pg_restore into a new database succeeds');
is($stderr, '', 'pg_restore reports no error') or diag($stderr);

my $after = $node->safe_psql('dst', $catalog_sql);
is($after, $before,
	'fencing.protected, fencing.scopes and the triggers match after the restore');
unlike($after, qr/\|[^A|]\|fencing\.guard/,
	'every fencing trigger is ENABLE ALWAYS after the restore');
is( $node->safe_psql(
		'dst',
		"SELECT count(*) FROM fencing.protected_tables WHERE NOT guard_intact"),
	'0',
	'fencing.protected_tables: every guard intact after the restore');

# Writes into the restored database
my @refused = (
	[ "UPDATE accounts SET balance = 0, fence = '2:4' WHERE id = 'a'",
		'SF001', 'row scope: a stale write' ],
	[ "UPDATE accounts SET balance = 0 WHERE id = 'a'",
		'SF002', 'row scope: a write without a token' ],
	[ "INSERT INTO ledger (account_id, amount, fence) VALUES ('a', 1, '2:5')",
		'SF001', 'key scope: an insert with a token older than the restored fence' ],
	[ "INSERT INTO ledger (account_id, amount) VALUES ('a', 1)",
		'SF002', 'key scope: an insert without a token' ],
	[ "UPDATE settings SET value = 'off', fence = '2:9'",
		'SF001', 'table scope: a stale write' ],
	[ "INSERT INTO events VALUES ('t1', '2024-02-11', '4:0')",
		'SF001', 'partitioned: a stale insert into a later partition' ],
	[ "TRUNCATE events_feb",
		'SF002', 'partitioned: TRUNCATE of a later partition' ],
	[ "ALTER TABLE events DISABLE TRIGGER ALL",
		'SF005', 'the DDL guard works in the restored database' ]);
foreach my $case (@refused)
{
	my ($sql, $code, $what) = @$case;
	my ($ret, $out, $err) =
	  $node->psql('dst', "\\set VERBOSITY verbose\n$sql");
	isnt($ret, 0, "restored: $what is refused");
	like($err, qr/ERROR:  $code:/, "... with $code");
}
is( $node->safe_psql(
		'dst',
		"UPDATE accounts SET balance = 1, fence = '2:6' WHERE id = 'a' RETURNING fence"),
	'2:6',
	'restored: a newer token is accepted');

# Recorded idempotency results survive the restore: a replay is answered
# from the record, another request under the key is refused, and the
# running claim still holds its key
is( $node->safe_psql('dst',
		q{SELECT state || ' ' || result::text FROM fencing.idem_begin('req-1', '{"refund": "r-1"}')}),
	'done {"paid": 25}',
	'restored: a replayed request gets the recorded result (done)');
foreach my $case (
	[ q{SELECT fencing.idem_begin('req-1', '{"refund": "r-9"}')}, 'SF003',
		'restored: the key with another request' ],
	[ q{SELECT fencing.idem_begin('req-2', '{"refund": "r-2"}', wait => false)}, 'SF004',
		'restored: a key whose claim is still running' ])
{
	my ($sql, $code, $what) = @$case;
	my ($ret, $out, $err) = $node->psql('dst', "\\set VERBOSITY verbose\n$sql");
	like($err, qr/ERROR:  $code:/, "$what is refused with $code");
}

# The extension can go away again
$node->safe_psql('dst', 'DROP EXTENSION fencing CASCADE');
is( $node->safe_psql(
		'dst',
		"SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'zz_fencing%'"),
	'0',
	'DROP EXTENSION fencing CASCADE removes the triggers without an error');
$node->safe_psql('dst', 'CREATE EXTENSION fencing');
is($node->safe_psql('dst', 'SELECT count(*) FROM fencing.protected_tables'),
	'0', 'CREATE EXTENSION fencing again works');

$node->stop;
done_testing();
