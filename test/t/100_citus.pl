# The guard on Citus distributed and reference tables, on a coordinator and
# two workers (a third joins later), all on this machine.
#
#   FENCING_CITUS_INSTALL   an installation (its bin/ holds postgres, psql,
#                           pg_config) with both fencing and Citus installed;
#                           without it the test is skipped with the reason.
#                           test/suites/citus.sh builds Citus for the server
#                           under test into a private copy and sets it.
#
# Every part shows a stale write refused with SF001, raised on a worker and
# relayed by the coordinator with its DETAIL and HINT, a fresh one
# accepted, and counts rows after: row scope on a distributed table (routed,
# multi-shard, COPY, on a shard directly), the guard guarded on the
# coordinator and on the shards, partitioned tables, key scope with its
# co-located storage, seeding, shards moved, split and rebalanced (fences
# moving with their keys, writes in each phase of a transfer), races
# between two sessions, a reference table, what cannot hold, unprotect(),
# DROP EXTENSION.
use strict;
use warnings;
use File::Basename qw(dirname);
use lib dirname(__FILE__) . '/../perl';
use FencingCitus;
use PostgreSQL::Test::Utils;
use Test::More;

my $inst = $ENV{FENCING_CITUS_INSTALL};
if (my $why = citus_unusable($inst))
{
	plan skip_all => "$why (an installation with fencing and Citus; test/README.md)";
}

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $out;

# --- the cluster: a coordinator and two workers; w3 joins for the rebalance
citus_start($inst, qw(coord w1 w2 w3));
foreach my $node (qw(coord w1 w2 w3))
{
	Q2($node, 'CREATE EXTENSION citus') eq ''
	  or BAIL_OUT("CREATE EXTENSION citus failed on $node");
}
Q('coord', "SELECT citus_set_coordinator_host('127.0.0.1', " . port('coord') . ')');
foreach my $node (qw(w1 w2))
{
	Q2('coord', "SELECT citus_add_node('127.0.0.1', " . port($node) . ')') =~ /^\d+$/
	  or BAIL_OUT("citus_add_node $node failed");
}
Q2('coord', 'CREATE EXTENSION fencing') eq ''
  or BAIL_OUT('CREATE EXTENSION fencing failed');
note('Citus cluster up: coordinator ' . port('coord') . ', workers '
	  . port('w1') . ' ' . port('w2') . ' (w3 ' . port('w3') . ' joins later)');

my $v = fencing_default_version($inst);
is( join('', map { Q($_, "SELECT extversion FROM pg_extension WHERE extname = 'fencing'") . ' ' }
		  qw(coord w1 w2)),
	"$v $v $v ",
	"CREATE EXTENSION fencing on the coordinator reaches every worker (at $v)");

# --- a distributed table in row scope
Q('coord', 'SET citus.shard_count = 4',
	'CREATE TABLE accounts (id bigint PRIMARY KEY, balance int NOT NULL DEFAULT 0, fence fencing.fence)',
	"SELECT create_distributed_table('accounts', 'id')",
	'INSERT INTO accounts (id) SELECT g FROM generate_series(1, 40) g');
is(Q2('coord', "SELECT fencing.protect('accounts')"), '', 'protect() on a distributed table, on the coordinator');
is(guard_census('accounts'), '4 4 4',
	'every shard on every node has the row guard (ALWAYS) and the TRUNCATE guard');
is( Q('coord', "SELECT count(DISTINCT nodeport) FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = 'accounts'::regclass"),
	'2', 'the shards are spread over both workers');

# every row gets a token
is(Q2('coord', "UPDATE accounts SET fence = '10:0'"), '', 'a multi-shard UPDATE with a first token is accepted');
is(Q('coord', "SELECT count(*) FROM accounts WHERE fence::text = '10:0'"), '40', '... on all 40 rows');

# routed UPDATE
my $s1 = shard_of('accounts', 1);
my $p1 = node_of_shard($s1);
$out = Qerr('coord', "UPDATE accounts SET balance = balance + 100, fence = '9:99' WHERE id = 1");
stale($out, 'routed UPDATE with a stale token');
like($out, qr/while executing command on 127\.0\.0\.1:$p1/,
	"routed UPDATE: the error comes from the worker of the row's shard");
is(Q2('coord', "UPDATE accounts SET balance = balance + 1, fence = '11:0' WHERE id = 1"), '',
	'routed UPDATE with a fresh token is accepted');
is(Q('coord', 'SELECT balance, fence FROM accounts WHERE id = 1'), '1|11:0', '... and only the fresh write landed');

# routed DELETE, the token in SET LOCAL (propagated)
$out = Qerr('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '10:0'", 'DELETE FROM accounts WHERE id = 2', 'COMMIT');
used($out, "routed DELETE with SET LOCAL fencing.token equal to the row's fence");
is(Q2('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '10:3'", 'DELETE FROM accounts WHERE id = 2', 'COMMIT'),
	'', 'routed DELETE with a fresh token is accepted');
is(Q('coord', 'SELECT count(*) FROM accounts'), '39', '... 39 rows left');

# without citus.propagate_set_commands the token never reaches the worker:
# the write fails closed
$out = Qerr('coord', 'BEGIN', "SET LOCAL fencing.token = '99:0'", 'UPDATE accounts SET balance = 7 WHERE id = 3', 'COMMIT');
like($out, qr/ERROR:  SF002: UPDATE on table "accounts_[0-9]+" requires a fence token/,
	'SET LOCAL fencing.token without citus.propagate_set_commands = local: refused on the worker (SF002), not let through');
is(Q('coord', 'SELECT balance FROM accounts WHERE id = 3'), '0', '... the row is unchanged');

# routed INSERT: a new row takes its token; a stale write to it is refused
is(Q2('coord', "INSERT INTO accounts (id, balance, fence) VALUES (100, 5, '20:0')"), '',
	'routed INSERT with a token is accepted');
stale(Qerr('coord', "UPDATE accounts SET balance = 0, fence = '19:0' WHERE id = 100"),
	'stale UPDATE of the row just inserted');
is(Q2('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '21:0'", 'INSERT INTO accounts (id, balance) VALUES (101, 6)', 'COMMIT'),
	'', 'routed INSERT with SET LOCAL fencing.token is accepted');
is(Q('coord', 'SELECT id, balance, fence FROM accounts WHERE id IN (100, 101) ORDER BY id') =~ tr/\n/ /r . ' ',
	'100|5|20:0 101|6|21:0 ', '... the guard on the worker wrote the token into the row');

# multi-shard UPDATE: one stale row refuses the whole statement
Q('coord', "UPDATE accounts SET fence = '30:0' WHERE id = 40");
stale(Qerr('coord', "UPDATE accounts SET balance = balance + 1000, fence = '25:0'"),
	"multi-shard UPDATE with a token older than one row's fence");
is(Q('coord', 'SELECT count(*) FROM accounts WHERE balance >= 1000'), '0', '... no row of any shard changed');
is(Q2('coord', "UPDATE accounts SET balance = balance + 1000, fence = '31:0'"), '',
	'multi-shard UPDATE with a fresh token is accepted');
is(Q('coord', "SELECT count(*) FROM accounts WHERE balance >= 1000 AND fence::text = '31:0'"), '41', '... on all 41 rows');

# INSERT ... ON CONFLICT DO UPDATE
my $upsert = 'ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence';
stale(Qerr('coord', "INSERT INTO accounts (id, balance, fence) VALUES (5, 1, '30:5') $upsert"),
	'INSERT ... ON CONFLICT DO UPDATE with a stale token');
is(Q2('coord', "INSERT INTO accounts (id, balance, fence) VALUES (5, 1, '32:5') $upsert"), '',
	'INSERT ... ON CONFLICT DO UPDATE with a fresh token is accepted');
is(Q('coord', 'SELECT balance, fence FROM accounts WHERE id = 5'), '1|32:5', '... the row took it');

# COPY: new rows in row scope have no fence to beat; the guard still runs on
# the worker for every copied row (it writes the token, and refuses two)
append_to_file("$tmp/copy.csv", "200,1,\n201,2,\n202,3,\n");
is(Qerr('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '40:0'",
		"\\copy accounts (id, balance, fence) FROM '$tmp/copy.csv' WITH (FORMAT csv)", 'COMMIT'),
	'', 'COPY with SET LOCAL fencing.token is accepted');
is(Q('coord', "SELECT count(*) FROM accounts WHERE id BETWEEN 200 AND 202 AND fence::text = '40:0'"), '3',
	'... the guard on the workers wrote the token into the 3 copied rows');
append_to_file("$tmp/copy2.csv", "203,1,41:0\n");
$out = Qerr('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '40:0'",
	"\\copy accounts (id, balance, fence) FROM '$tmp/copy2.csv' WITH (FORMAT csv)", 'COMMIT');
# Citus' COPY relays the worker's message and DETAIL, not its SQLSTATE or HINT
like($out, qr/ERROR:  (SF002|XX000): conflicting fence tokens for table "accounts_[0-9]+"/,
	'COPY of a row whose fence disagrees with the token is refused on the worker');
like($out, qr/DETAIL:  The setting fencing.token is 40:0 but the write puts 41:0 in the fence column./,
	'... the DETAIL relayed');
is(Q('coord', 'SELECT count(*) FROM accounts'), '44', '... 44 rows');

# a write sent to a shard directly, on its worker
my $manual = 'SET citus.enable_manual_changes_to_shards = on';
my $s7 = shard_of('accounts', 7);
my $n7 = name_of_shard($s7);
my $sh7 = Q('coord', "SELECT shard_name('accounts', $s7)");
stale(Qerr($n7, $manual, "UPDATE $sh7 SET balance = -1, fence = '12:0' WHERE id = 7"),
	"UPDATE sent directly to shard $sh7 on its worker, stale");
is(Q2($n7, $manual, "UPDATE $sh7 SET balance = 77, fence = '50:7' WHERE id = 7"), '', '... fresh, accepted');
like(Qerr($n7, $manual, "DELETE FROM $sh7 WHERE id = 7"), qr/ERROR:  SF002: DELETE on table .* requires a fence token/,
	'DELETE on the shard directly without a token is refused');
is(Q('coord', 'SELECT balance, fence FROM accounts WHERE id = 7'), '77|50:7',
	'... the coordinator sees the one accepted write');

# --- guarding the guard: the distributed table and its shards
foreach my $ddl ('ALTER TABLE accounts DISABLE TRIGGER zz_fencing_guard',
	'ALTER TABLE accounts DISABLE TRIGGER ALL',
	'ALTER TABLE accounts ENABLE REPLICA TRIGGER zz_fencing_guard',
	'DROP TRIGGER zz_fencing_guard ON accounts',
	'ALTER TABLE accounts DROP COLUMN fence')
{
	like(Qerr('coord', 'SET citus.enable_unsafe_triggers = on', $ddl), qr/ERROR:  SF005:/,
		"SF005 on the coordinator: $ddl");
}
is(guard_census('accounts'), '4 4 4', '... every shard keeps its guard');

my $sg = "zz_fencing_guard_$s7";
foreach my $ddl ("ALTER TABLE $sh7 DISABLE TRIGGER $sg",
	"ALTER TABLE $sh7 DISABLE TRIGGER ALL",
	"ALTER TABLE $sh7 DISABLE TRIGGER USER",
	"ALTER TABLE $sh7 ENABLE REPLICA TRIGGER $sg",
	"ALTER TABLE $sh7 ENABLE TRIGGER $sg",
	"DROP TRIGGER $sg ON $sh7",
	"DROP TRIGGER zz_fencing_truncate ON $sh7",
	"ALTER TABLE $sh7 DISABLE TRIGGER zz_fencing_truncate",
	"ALTER TRIGGER $sg ON $sh7 RENAME TO a_guard",
	"CREATE OR REPLACE TRIGGER $sg BEFORE INSERT OR UPDATE OR DELETE ON $sh7 FOR EACH ROW EXECUTE FUNCTION fencing.guard('citus:1', 'fence_column=fence', 'strict=off')",
	"CREATE TRIGGER zzz_late BEFORE UPDATE ON $sh7 FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()",
	"ALTER TABLE $sh7 DROP COLUMN fence",
	"ALTER TABLE $sh7 ALTER COLUMN fence TYPE text",
	"ALTER TABLE $sh7 RENAME COLUMN fence TO f2",
	"ALTER TABLE $sh7 ALTER COLUMN fence SET DEFAULT '99:0'",
	"ALTER TABLE $sh7 ALTER COLUMN balance TYPE bigint USING balance * 2")
{
	like(Qerr($n7, $manual, $ddl), qr/ERROR:  SF005:/,
		"SF005 on shard $sh7 on its worker: " . substr($ddl, 0, 90));
}
# run_command_on_placements() reaches the shards through Citus' connections
# too, but as a user's command: checked on every worker
is( Q('coord', q{SELECT count(*) FILTER (WHERE NOT success), count(*) FILTER (WHERE result LIKE '%cannot disable trigger%of protected table%')
               FROM run_command_on_placements('accounts', 'ALTER TABLE %s DISABLE TRIGGER ALL')}),
	'4|4', 'run_command_on_placements() disabling the guard: refused on every shard');
like(Qerr($n7, $manual, "ALTER TABLE $sh7 DISABLE TRIGGER $sg"),
	qr/HINT:  Call fencing.unprotect\('public.accounts'\) on the coordinator first./,
	'... the HINT names the distributed table');
stale(Qerr($n7, $manual, "UPDATE $sh7 SET fence = '1:0' WHERE id = 7"),
	'after all that, a stale write to the shard is still refused');

# TRUNCATE
like(Qerr('coord', 'TRUNCATE accounts'), qr/ERROR:  SF002: cannot truncate protected table "accounts"/,
	'TRUNCATE of the distributed table is refused (SF002)');
like(Qerr($n7, $manual, "TRUNCATE $sh7"), qr/ERROR:  SF002: cannot truncate protected table "$sh7"/,
	'TRUNCATE of a shard on its worker is refused (SF002)');
is(Q('coord', 'SELECT count(*) FROM accounts'), '44', '... 44 rows still');

# --- a distributed partitioned table: every partition's shards, and a
# partition created later
Q('coord', 'SET citus.shard_count = 4',
	'CREATE TABLE events (id bigint, day date, v int, fence fencing.fence, PRIMARY KEY (id, day)) PARTITION BY RANGE (day)',
	"CREATE TABLE events_jan PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2024-02-01')",
	"SELECT create_distributed_table('events', 'id', colocate_with => 'none')",
	"INSERT INTO events VALUES (1, '2024-01-05', 0, '5:0'), (2, '2024-01-06', 0, '5:0')");
is(Q2('coord', "SELECT fencing.protect('events')"), '', 'protect() on a distributed partitioned table');
is(guard_census('events_jan'), '4 4 4', '... every shard of its partition has both guards');
like(Qerr('coord', "UPDATE events SET v = 1, fence = '4:0' WHERE id = 1"),
	qr/ERROR:  SF001: stale fence token 4:0 for table "events_jan_[0-9]+"/,
	"partitioned: a stale write to a partition's shard is refused");
is(Q2('coord', "UPDATE events SET v = 1, fence = '6:0' WHERE id = 1"), '', 'partitioned: a fresh write is accepted');
like(Qerr('coord', "CREATE TABLE events_feb PARTITION OF events FOR VALUES FROM ('2024-02-01') TO ('2024-03-01')"),
	qr/ERROR:  55000: creating a partition of protected distributed table "events" needs citus.enable_unsafe_triggers/,
	'partitioned: a new partition needs citus.enable_unsafe_triggers, and says so');
Q('coord', 'SET citus.enable_unsafe_triggers = on',
	"CREATE TABLE events_feb PARTITION OF events FOR VALUES FROM ('2024-02-01') TO ('2024-03-01')",
	"INSERT INTO events VALUES (3, '2024-02-03', 0, '5:0')");
is(guard_census('events_feb'), '4 4 4', 'partitioned: a partition created later has both guards on every shard');
like(Qerr('coord', "UPDATE events SET v = 1, fence = '4:0' WHERE id = 3"),
	qr/ERROR:  SF001: stale fence token 4:0 for table "events_feb_[0-9]+"/,
	'partitioned: a stale write to the new partition is refused');
like(Qerr('coord', 'TRUNCATE events_feb'), qr/ERROR:  SF002: cannot truncate/,
	'partitioned: TRUNCATE of a partition is refused');
my $sf = Q('coord', "SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'events_feb'::regclass ORDER BY shardid LIMIT 1");
like(Qerr(name_of_shard($sf), $manual, 'TRUNCATE ' . Q('coord', "SELECT shard_name('events_feb', $sf)")),
	qr/ERROR:  SF002: cannot truncate/, "partitioned: TRUNCATE of a partition's shard on its worker is refused");
Q('coord', 'CREATE TABLE events_mar (LIKE events)',
	"SELECT create_distributed_table('events_mar', 'id', colocate_with => 'events')",
	"INSERT INTO events_mar VALUES (4, '2024-03-03', 0, '5:0')");
is(Q2('coord', 'SET citus.enable_unsafe_triggers = on',
		"ALTER TABLE events ATTACH PARTITION events_mar FOR VALUES FROM ('2024-03-01') TO ('2024-04-01')"),
	'', 'partitioned: ATTACH PARTITION of a distributed table');
is(guard_census('events_mar'), '4 4 4', '... its shards get both guards');
like(Qerr('coord', "UPDATE events SET v = 1, fence = '4:0' WHERE id = 4"),
	qr/ERROR:  SF001: stale fence token 4:0 for table "events_mar_[0-9]+"/,
	'partitioned: a stale write to the attached partition is refused');
is(Q('coord', 'SELECT count(*) FROM events'), '4', 'partitioned: 4 rows');

# --- key scope: a ledger of accounts, its fences in storage co-located with
# its shards.  The ledger belongs to a role of its own (as an application's
# would), so that Citus moves it and the extension owner's storage by two
# logical replication streams.
Q('coord', 'CREATE ROLE app LOGIN', 'GRANT CREATE ON SCHEMA public TO app');
Qa('coord', 'SET citus.shard_count = 4',
	"CREATE TABLE ledger (acct bigint NOT NULL, id bigint NOT NULL, book text NOT NULL DEFAULT 'main',
                          amount int NOT NULL DEFAULT 0, fence fencing.fence, PRIMARY KEY (acct, id))",
	"SELECT create_distributed_table('ledger', 'acct', colocate_with => 'none')",
	"INSERT INTO ledger (acct, id, fence) SELECT g % 20, g, ('1:' || g)::fencing.fence FROM generate_series(1, 60) g");
is(Qa2('coord', "SELECT fencing.protect('ledger', key_columns => '{book,acct}')"), '',
	'key scope (book, acct) on a distributed table, protect() by its owner');
my $storage = Q('coord', "SELECT storage FROM fencing.scope_storage WHERE scope_name = 'public.ledger'");
(my $storage_rel = $storage) =~ s/^fencing\.//;
is( Q('coord', "SELECT s.colocationid = l.colocationid, column_to_column_name(s.logicalrelid, s.partkey)
               FROM pg_dist_partition s, pg_dist_partition l
               WHERE s.logicalrelid = '$storage'::regclass AND l.logicalrelid = 'ledger'::regclass"),
	't|key_2', "its storage $storage is distributed co-located with the ledger, by key_2 (acct)");
is( Q('coord', "SELECT count(*), count(*) FILTER (WHERE result = 'f') FROM run_command_on_placements('$storage',
               \$\$SELECT relreplident FROM pg_class WHERE oid = '%s'::regclass\$\$)"),
	'4|4', '... 4 storage shards, each REPLICA IDENTITY FULL (logical replication moves them)');
is( Q('coord', "SELECT count(*), fencing.max(fence) FILTER (WHERE key = fencing.scope_key('main', '7')) FROM fencing.scopes WHERE scope_name = 'public.ledger'"),
	'20|1:47', 'protect() seeded the 20 keys from the rows on the shards, each with its highest fence');
is(guard_census('ledger'), '4 4 4', 'every ledger shard has both guards');
like(Q('coord', "SELECT string_agg(DISTINCT encode(tgargs, 'escape'), ' ') FROM pg_trigger WHERE tgrelid = 'ledger'::regclass AND tgname = 'zz_fencing_guard'"),
	qr/key=book.*key=acct.*scope=public\.ledger.*storage=scope_/,
	'the guard carries its key columns, scope and storage to every shard');

# routed INSERT: a new row of a key already fenced
stale_key(Qaerr('coord', "INSERT INTO ledger (acct, id, amount, fence) VALUES (7, 1001, 5, '1:46')"),
	'main","7', "key scope: routed INSERT with a token older than the key's fence");
is(Qa2('coord', "INSERT INTO ledger (acct, id, amount, fence) VALUES (7, 1001, 5, '2:0')"), '',
	'key scope: routed INSERT with a fresh token is accepted');
is(Q('coord', 'SELECT count(*) FROM ledger WHERE acct = 7'), '4', '... account 7 has 4 rows');
# routed UPDATE of another row of the same key: the key's fence, not the row's
stale_key(Qaerr('coord', "UPDATE ledger SET amount = 99, fence = '1:99' WHERE acct = 7 AND id = 7"),
	'main","7', "key scope: routed UPDATE of a row whose own fence is older than the token, the key's newer");
is(Qa2('coord', "UPDATE ledger SET amount = 9, fence = '2:1' WHERE acct = 7 AND id = 7"), '',
	'key scope: routed UPDATE with a fresh token is accepted');
# routed DELETE, the token in SET LOCAL
stale_key(Qaerr('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '2:0'", 'DELETE FROM ledger WHERE acct = 7 AND id = 27', 'COMMIT'),
	'main","7', 'key scope: routed DELETE with a stale SET LOCAL fencing.token');
is(Qa2('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '2:2'", 'DELETE FROM ledger WHERE acct = 7 AND id = 27', 'COMMIT'),
	'', 'key scope: routed DELETE with a fresh token is accepted');
is(Q('coord', 'SELECT count(*), sum(amount) FROM ledger WHERE acct = 7'), '3|14',
	'... account 7: 3 rows, only the accepted writes');
is(Q('coord', "SELECT fence FROM fencing.scopes WHERE scope_name = 'public.ledger' AND key = fencing.scope_key('main', '7')"),
	'2:2', "... its fence is the last accepted token, on the worker's storage shard");

# the first write of a new key, and a stale one after it
is(Qa2('coord', "INSERT INTO ledger (acct, id, book, fence) VALUES (100, 1, 'new', '7:0')"), '',
	'key scope: the first write of a new key is accepted');
stale_key(Qaerr('coord', "INSERT INTO ledger (acct, id, book, fence) VALUES (100, 2, 'new', '6:0')"),
	'new","100', 'key scope: a second write of the new key with an older token');
is(Q('coord', 'SELECT count(*) FROM ledger WHERE acct = 100'), '1', '... one row for the new key');

# multi-shard UPDATE: one key whose fence is newer refuses the whole statement
Qa('coord', "UPDATE ledger SET fence = '30:0' WHERE acct = 3 AND id = 3");
stale_key(Qaerr('coord', "UPDATE ledger SET amount = amount + 1000, fence = '25:0'"),
	'main","3', "key scope: multi-shard UPDATE with a token older than one key's fence");
is(Q('coord', 'SELECT count(*) FROM ledger WHERE amount >= 1000'), '0', '... no row of any shard changed');
is(Qa2('coord', "UPDATE ledger SET amount = amount + 1000, fence = '31:0'"), '',
	'key scope: multi-shard UPDATE with a fresh token is accepted');
is(Q('coord', "SELECT count(*), count(*) FILTER (WHERE amount >= 1000 AND fence::text = '31:0') FROM ledger"),
	'61|61', '... on all 61 rows');
is(Q('coord', "SELECT count(*) FILTER (WHERE fence::text = '31:0'), count(*) FROM fencing.scopes WHERE scope_name = 'public.ledger'"),
	'21|21', "... and every key's fence, on every storage shard, is 31:0");

# INSERT ... ON CONFLICT DO UPDATE
my $kupsert = 'ON CONFLICT (acct, id) DO UPDATE SET amount = EXCLUDED.amount, fence = EXCLUDED.fence';
stale_key(Qaerr('coord', "INSERT INTO ledger (acct, id, amount, fence) VALUES (5, 5, 1, '30:5') $kupsert"),
	'main","5', 'key scope: INSERT ... ON CONFLICT DO UPDATE with a stale token');
is(Qa2('coord', "INSERT INTO ledger (acct, id, amount, fence) VALUES (5, 5, 1, '32:5') $kupsert"), '',
	'key scope: INSERT ... ON CONFLICT DO UPDATE with a fresh token is accepted');
is(Q('coord', 'SELECT amount, fence FROM ledger WHERE acct = 5 AND id = 5'), '1|32:5', '... the row took it');

# COPY
append_to_file("$tmp/kcopy.csv", "9,2001,main,1,\n9,2002,main,2,\n");
my $kcopy = "\\copy ledger (acct, id, book, amount, fence) FROM '$tmp/kcopy.csv' WITH (FORMAT csv)";
$out = Qaerr('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '20:0'", $kcopy, 'COMMIT');
# Citus' COPY relays the worker's message and DETAIL, not its SQLSTATE or HINT
like($out, qr/ERROR:  (SF001|XX000): stale fence token 20:0 for table "ledger_[0-9]+"/,
	'key scope: COPY with a stale token is refused on the worker (Citus relays it as XX000)');
like($out, qr/DETAIL:  The scope "public.ledger" key \["main","9"\] has already accepted fence token 31:0/,
	'... the DETAIL relayed');
is(Qa2('coord', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '40:0'", $kcopy, 'COMMIT'), '',
	'key scope: COPY with a fresh token is accepted');
is(Q('coord', "SELECT count(*), count(*) FILTER (WHERE fence::text = '40:0') FROM ledger WHERE acct = 9"),
	'5|2', '... account 9: 5 rows, the 2 copied ones with the token');

# a write sent to a shard directly, on its worker
my $k4 = shard_of('ledger', 4);
my $nk4 = name_of_shard($k4);
my $shk4 = Q('coord', "SELECT shard_name('ledger', $k4)");
used_key(Qaerr($nk4, $manual, "INSERT INTO $shk4 (acct, id, fence) VALUES (4, 3001, '31:0')"),
	'main","4', "key scope: INSERT sent directly to shard $shk4 on its worker, equal token (strict)");
is(Qa2($nk4, $manual, "INSERT INTO $shk4 (acct, id, fence) VALUES (4, 3001, '41:0')"), '', '... fresh, accepted');
is(Q('coord', 'SELECT count(*), fencing.max(fence) FROM ledger WHERE acct = 4'), '4|41:0', '... the coordinator sees it');
# the storage shards: the extension owner's, read-only to everyone else
my $sk4 = Q('coord', "SELECT s.shardid FROM pg_dist_shard s, pg_dist_shard l WHERE l.shardid = $k4
               AND s.logicalrelid = '$storage'::regclass AND s.shardminvalue = l.shardminvalue");
like(Qaerr($nk4, $manual, 'UPDATE ' . Q('coord', "SELECT shard_name('$storage', $sk4)") . " SET fence = '0:0'"),
	qr/ERROR:  42501: permission denied for table scope_/,
	'the co-located storage shard on the worker: the application cannot lower a fence there');
foreach my $ddl ("ALTER TABLE $shk4 RENAME COLUMN book TO b2", "ALTER TABLE $shk4 DROP COLUMN acct CASCADE",
	"ALTER TABLE $shk4 ALTER COLUMN book TYPE varchar(10)")
{
	$out = Qaerr($nk4, $manual, $ddl);
	like($out, qr/ERROR:  SF005: cannot .* column "(book|acct)" of protected table "ledger_[0-9]+"/,
		"SF005 on shard $shk4: " . substr($ddl, 0, 60));
	like($out,
		qr/DETAIL:  Table "ledger_[0-9]+" \(a shard of distributed table "ledger"\) is protected by fencing: column "(book|acct)" is a key column of its fence scope/,
		'... the DETAIL says why');
}

# Two coordinator sessions racing: the first (a session) takes a row or a
# key in an open transaction, the second blocks on it on a worker (a
# statement whose text starts with $waiting), the first commits.  Returns
# "waited=N", then both outputs.
sub race_sessions
{
	my (%o) = @_;
	my $sess = session('coord');
	$sess->feed(join('', map { "$_;\n" } @{ $o{first} }));
	$sess->mark('locked');
	my $job = q_start('coord', @{ $o{second} });
	my $w = 0;
	wait_until(60, sub {
		foreach my $node (@{ $o{nodes} })
		{
			$w = Q($node, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '$o{waiting}%'");
			return 1 if $w > 0;
		}
		return 0;
	});
	$sess->feed("COMMIT;\n");
	my $aout = $sess->finish;
	return "waited=$w\n$aout\n" . q_finish($job);
}

# race_key TOKEN1 SQL1 TOKEN2 SQL2 WAITING, as the application
sub race_key
{
	my ($t1, $s1, $t2, $s2, $waiting) = @_;
	return race_sessions(
		first => [ 'SET ROLE app', COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '$t1'", $s1 ],
		second => [ 'SET ROLE app', COORD_TOKEN, '\set VERBOSITY verbose', 'BEGIN',
			"SET LOCAL fencing.token = '$t2'", $s2, 'COMMIT' ],
		nodes => [qw(w1 w2)],
		waiting => $waiting);
}
$out = race_key('50:2', 'UPDATE ledger SET amount = amount + 1 WHERE acct = 11 AND id = 11',
	'50:1', 'UPDATE ledger SET amount = amount + 10 WHERE acct = 11 AND id = 31', 'UPDATE');
like($out, qr/waited=1/, "key race: the older token's UPDATE of another row of the key waited on the worker");
stale_key($out, 'main","11', 'key race: the newer token commits first, the blocked older one');
is( Q('coord', "SELECT fence FROM fencing.scopes WHERE scope_name = 'public.ledger' AND key = fencing.scope_key('main', '11')")
	  . '|' . Q('coord', 'SELECT sum(amount) FROM ledger WHERE acct = 11'),
	'50:2|3001', 'key race: exactly one of the two ordered tokens won: 50:2, one write');
$out = race_key('60:2', "INSERT INTO ledger (acct, id, book) VALUES (500, 1, 'fresh')",
	'60:1', "INSERT INTO ledger (acct, id, book) VALUES (500, 2, 'fresh')", 'INSERT');
like($out, qr/waited=1/, "key race on a brand-new key: the second insert waited for the first's on the worker");
stale_key($out, 'fresh","500', 'key race on a brand-new key: newer first, the older refused');
is( Q('coord', 'SELECT count(*), fencing.max(fence) FROM ledger WHERE acct = 500') . '|'
	  . Q('coord', "SELECT fence FROM fencing.scopes WHERE key = fencing.scope_key('fresh', '500')"),
	'1|60:2|60:2', 'key race on a brand-new key: one row, one fence, 60:2');
$out = race_key('61:0', "INSERT INTO ledger (acct, id, book) VALUES (501, 1, 'fresh')",
	'61:0', "INSERT INTO ledger (acct, id, book) VALUES (501, 2, 'fresh')", 'INSERT');
used_key($out, 'fresh","501', 'key race on a brand-new key, the same token in two transactions: the second refused (strict)');
is(Q('coord', 'SELECT count(*) FROM ledger WHERE acct = 501'), '1', '... one row');

# a second table shares the scope: co-located, the distribution column at
# the same position of its key columns
Qa('coord', 'CREATE TABLE ledger_lines (line bigint, book text, acct bigint, fence fencing.fence, PRIMARY KEY (acct, line))',
	"SELECT create_distributed_table('ledger_lines', 'acct', colocate_with => 'ledger')");
is(Qa2('coord', "SELECT fencing.protect('ledger_lines', key_columns => '{book,acct}', scope_name => 'public.ledger')"),
	'', 'a co-located table joins the scope');
stale_key(Qaerr('coord', "INSERT INTO ledger_lines VALUES (1, 'main', 11, '50:1')"),
	'main","11', "shared scope: the joining table's write with a token older than the ledger's");
is(Qa2('coord', "INSERT INTO ledger_lines VALUES (1, 'main', 11, '70:0')"), '', 'shared scope: a fresh one is accepted');
stale_key(Qaerr('coord', "UPDATE ledger SET amount = 0, fence = '69:0' WHERE acct = 11 AND id = 11"),
	'main","11', "shared scope: the ledger is fenced by the joining table's write");
is(Q('coord', 'SELECT (SELECT count(*) FROM ledger_lines), (SELECT sum(amount) FROM ledger WHERE acct = 11)'),
	'1|3001', '... 1 line, the ledger unchanged');

# what cannot join, each refused with 0A000 naming what works
Qa('coord', 'CREATE TABLE other_ledger (acct bigint, book text, fence fencing.fence)',
	"SELECT create_distributed_table('other_ledger', 'acct', colocate_with => 'none')",
	'CREATE TABLE swapped (acct bigint, book text, fence fencing.fence)',
	"SELECT create_distributed_table('swapped', 'acct', colocate_with => 'ledger')",
	'CREATE TABLE single (acct bigint, book text, fence fencing.fence)',
	"SELECT create_distributed_table('single', NULL)");
$out = Qaerr('coord', "SELECT fencing.protect('other_ledger', key_columns => '{book,acct}', scope_name => 'public.ledger')");
like($out, qr/ERROR:  0A000: fencing scope "public.ledger" cannot be shared by tables/,
	"a table not co-located with the scope's tables: 0A000");
like($out, qr/HINT:  Distribute both tables co-located \(create_distributed_table\(..., colocate_with => 'public.ledger/,
	'... the HINT names what works');
$out = Qaerr('coord', "SELECT fencing.protect('swapped', key_columns => '{acct,book}', scope_name => 'public.ledger')");
like($out, qr/ERROR:  0A000: fencing scope "public.ledger" cannot hold on distributed table "swapped"/,
	'co-located, but the distribution column at another key position: 0A000');
like($out, qr/HINT:  List the key columns so that the distribution column "acct" comes at position 2/,
	'... the HINT names what works');
$out = Qaerr('coord', "SELECT fencing.protect('single', key_columns => '{acct}')");
like($out, qr/ERROR:  0A000: key scope cannot hold on distributed table "single"/, 'key scope on a single-shard table: 0A000');
like($out, qr/HINT:  Use row scope \(key_columns => NULL\), or distribute the table by hash/, '... the HINT names what works');
is(Q('coord', "SELECT string_agg(relid::text, ',' ORDER BY relid::text) FROM fencing.protected WHERE scope_name = 'public.ledger'"),
	'ledger,ledger_lines', 'after the refusals the scope has its two tables');
# (swapped has no replica identity, which would stop the moves below)
Qa('coord', 'DROP TABLE other_ledger, swapped, single');

# key scope on a distributed partitioned table: the partitions' shards find
# the storage shard of their hash range; a partition created later too
Qa('coord', 'SET citus.shard_count = 4',
	'CREATE TABLE postings (acct bigint, day date, v int, fence fencing.fence, PRIMARY KEY (acct, day)) PARTITION BY RANGE (day)',
	"CREATE TABLE postings_jan PARTITION OF postings FOR VALUES FROM ('2024-01-01') TO ('2024-02-01')",
	"SELECT create_distributed_table('postings', 'acct', colocate_with => 'none')",
	"INSERT INTO postings VALUES (1, '2024-01-05', 0, '5:0'), (2, '2024-01-06', 0, '5:0')");
is(Qa2('coord', "SELECT fencing.protect('postings', key_columns => '{acct}')"), '', 'key scope on a distributed partitioned table');
$out = Qaerr('coord', "INSERT INTO postings VALUES (1, '2024-01-07', 0, '4:0')");
like($out, qr/ERROR:  SF001: stale fence token 4:0 for table "postings_jan_[0-9]+"/,
	"partitioned key scope: a stale insert into a partition's shard");
like($out, qr/DETAIL:  The scope "public.postings" key \["1"\] has already accepted fence token 5:0/,
	"... against the key's seeded fence");
is(Qa2('coord', 'SET citus.enable_unsafe_triggers = on',
		"CREATE TABLE postings_feb PARTITION OF postings FOR VALUES FROM ('2024-02-01') TO ('2024-03-01')",
		"INSERT INTO postings VALUES (1, '2024-02-07', 0, '6:0')"),
	'', 'partitioned key scope: a partition created later, a fresh write into it');
like(Qaerr('coord', "INSERT INTO postings VALUES (1, '2024-01-08', 0, '5:9')"),
	qr/DETAIL:  The scope "public.postings" key \["1"\] has already accepted fence token 6:0/,
	'... fences the key in the other partition too');
is(Q('coord', 'SELECT count(*) FROM postings'), '3', 'partitioned key scope: 3 rows');

# --- seeding sees every committed row: protect() of a distributed table in
# key scope while a writer's open transaction, on a shard directly, holds a
# row with fence 0:50.  protect()'s trigger DDL waits on the worker for the
# writer; at READ COMMITTED the worker then reads the shard with a snapshot
# taken after that lock, so the row's fence is seeded and an older token is
# refused.  At REPEATABLE READ the worker's snapshot predates the lock:
# seeding refuses (0A000) and writes nothing.
Qa('coord', 'SET citus.shard_count = 4',
	'CREATE TABLE deposits (acct bigint NOT NULL, id bigint NOT NULL, amount int NOT NULL DEFAULT 0, fence fencing.fence, PRIMARY KEY (acct, id))',
	"SELECT create_distributed_table('deposits', 'acct', colocate_with => 'none')",
	"INSERT INTO deposits (acct, id, fence) VALUES (1, 1, '0:10')");

# seed_race LEVEL ACCT: "waited=N", the writer's and protect()'s output
sub seed_race
{
	my ($level, $acct) = @_;
	my $shard = Q('coord', "SELECT shard_name('deposits', get_shard_id_for_distribution_column('deposits', $acct))");
	my $node = name_of_shard(shard_of('deposits', $acct));
	my $sess = session($node);
	$sess->feed("SET ROLE app;\n$manual;\nBEGIN;\nINSERT INTO $shard (acct, id, fence) VALUES ($acct, 1, '0:50');\n");
	$sess->mark('locked');
	my $job = q_start('coord', 'SET ROLE app', '\set VERBOSITY verbose', "BEGIN ISOLATION LEVEL $level",
		"SELECT fencing.protect('deposits', key_columns => '{acct}')", 'COMMIT');
	# wait until protect()'s trigger DDL waits for the writer on its node
	my $w = 0;
	wait_until(60, sub {
		$w = Q($node, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND backend_type = 'client backend'");
		return $w > 0;
	});
	$sess->feed("COMMIT;\n");
	my $aout = $sess->finish;
	return "waited=$w\n$aout\n" . q_finish($job);
}
my $protected_deposits = sub {
	return Q('coord', "SELECT count(*) FROM fencing.protected WHERE relid = 'deposits'::regclass") . '|'
	  . guard_census('deposits');
};
$out = seed_race('REPEATABLE READ', 5);
like($out, qr/waited=1/, "seeding: protect() at REPEATABLE READ waited on the worker for the shard's writer");
like($out,
	qr/ERROR:  0A000: cannot seed the fences of distributed scope "public.deposits" under REPEATABLE READ or SERIALIZABLE/,
	"... and refuses to seed from a snapshot older than the writer's commit");
like($out, qr/HINT:  Run it in a READ COMMITTED transaction./, '... the HINT says what works');
is($protected_deposits->(), '0|4 0 0', '... and leaves nothing behind: not protected, no guard on any shard');
$out = seed_race('READ COMMITTED', 6);
like($out, qr/waited=1/, "seeding: protect() at READ COMMITTED waited on the worker for the shard's writer");
is($protected_deposits->(), '1|4 4 4', '... and protected the table');
is( Q('coord', "SELECT string_agg(key || '=' || fence::text, ' ' ORDER BY key) FROM fencing.scopes WHERE scope_name = 'public.deposits'"),
	'["1"]=0:10 ["5"]=0:50 ["6"]=0:50', '... seeding every committed row, the one committed while it waited too');
$out = Qaerr('coord', "UPDATE deposits SET amount = 1, fence = '0:20' WHERE acct = 6");
like($out, qr/ERROR:  SF001: stale fence token 0:20/, "seeding: an older token than the waited-for row's is refused: SF001");
like($out, qr/DETAIL:  The scope "public.deposits" key \["6"\] has already accepted fence token 0:50/,
	'... against the seeded fence');
is(Qa2('coord', "UPDATE deposits SET amount = 2, fence = '0:60' WHERE acct = 6"), '', '... a newer one is accepted');
Qa('coord', 'DROP TABLE deposits');
Q('coord', "SELECT fencing.reset_scope('public.deposits')");

# --- shards that move, split, or land on a new node
my $nodeid = sub { return "(SELECT nodeid FROM pg_dist_node WHERE nodeport = " . port($_[0]) . ')'; };
my $split_sql = sub {
	my ($shard, $mid) = @_;
	return "SELECT citus_split_shard_by_split_points($shard, ARRAY['$mid'], ARRAY["
	  . $nodeid->('w1') . ', ' . $nodeid->('w2') . '])';
};
my $move_sql = sub {
	my ($shard, $from, $to) = @_;
	return "SELECT citus_move_shard_placement($shard, '127.0.0.1', " . port($from) . ", '127.0.0.1', " . port($to) . ')';
};
my $mid_of = sub {
	return Q('coord', "SELECT (shardminvalue::bigint + shardmaxvalue::bigint) / 2 FROM pg_dist_shard WHERE shardid = $_[0]");
};
my $old_node = $n7;
my $new_node = $old_node eq 'w1' ? 'w2' : 'w1';
is(Q2('coord', $move_sql->($s7, $old_node, $new_node)), '',
	"citus_move_shard_placement of shard $s7 from $old_node to $new_node");
cleanup_orphans();
is(name_of_shard($s7), $new_node, "... the shard is on $new_node");
is(guard_census('accounts'), '4 4 4', '... the moved shard has both guards');
$out = Qerr('coord', "UPDATE accounts SET balance = 0, fence = '50:6' WHERE id = 7");
stale($out, 'after the move, a stale write is refused');
like($out, qr/while executing command on 127\.0\.0\.1:${\ port($new_node)}/, '... by the new node');
is(Q2('coord', "UPDATE accounts SET balance = 8, fence = '51:0' WHERE id = 7"), '', 'after the move, a fresh write is accepted');
like(Qerr($new_node, $manual, "TRUNCATE $sh7"), qr/ERROR:  SF002: cannot truncate/,
	'after the move, TRUNCATE of the shard on its new node is refused');
like(Qerr($new_node, $manual, "ALTER TABLE $sh7 DISABLE TRIGGER $sg"), qr/ERROR:  SF005:/,
	'after the move, disabling its guard on the new node is refused');

# split the shard of row 11 in two, one half on each worker
my $s11 = shard_of('accounts', 11);
is(Q2('coord', $split_sql->($s11, $mid_of->($s11))), '', "citus_split_shard_by_split_points of shard $s11");
cleanup_orphans();
is(guard_census('accounts'), '5 5 5', '... 5 shards, all guarded');
my $s11b = shard_of('accounts', 11);
isnt($s11b, $s11, "... row 11 is in a new shard ($s11b)");
stale(Qerr('coord', "UPDATE accounts SET balance = 0, fence = '10:11' WHERE id = 11"), 'after the split, a stale write is refused');
is(Q2('coord', "UPDATE accounts SET balance = 11, fence = '60:11' WHERE id = 11"), '', 'after the split, a fresh write is accepted');
like(Qerr(name_of_shard($s11b), $manual, 'TRUNCATE ' . Q('coord', "SELECT shard_name('accounts', $s11b)")),
	qr/ERROR:  SF002: cannot truncate/, 'after the split, TRUNCATE of the new shard is refused');

# a new node and a rebalance
Q('coord', "SELECT citus_add_node('127.0.0.1', " . port('w3') . ')');
like(Q('w3', "SELECT extversion FROM pg_extension WHERE extname = 'fencing'"), qr/^\Q$v\E$/,
	'a node added later gets the extension');
Q2('coord', "SELECT rebalance_table_shards('accounts')");
cleanup_orphans();
my $on_w3_sql = sub {
	return "SELECT count(*) FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = '$_[0]'::regclass AND nodeport = "
	  . port('w3');
};
my $on_w3 = Q('coord', $on_w3_sql->('accounts'));
ok($on_w3 > 0, "rebalance_table_shards moved $on_w3 shard(s) onto the new node");
is(guard_census('accounts'), '5 5 5', '... every shard guarded');
my $id3 = Q('coord', "SELECT id FROM accounts WHERE get_shard_id_for_distribution_column('accounts', id) IN
        (SELECT shardid FROM pg_dist_shard_placement WHERE nodeport = " . port('w3') . ') ORDER BY id LIMIT 1');
my $f3 = Q('coord', "SELECT fence FROM accounts WHERE id = $id3");
$out = Qerr('coord', "UPDATE accounts SET balance = 0, fence = '9:0' WHERE id = $id3");
stale($out, "on the new node (row $id3, fence $f3), a stale write is refused");
like($out, qr/while executing command on 127\.0\.0\.1:${\ port('w3')}/, '... by the new node');
is(Q2('coord', "UPDATE accounts SET balance = 3, fence = '70:0' WHERE id = $id3"), '', 'on the new node, a fresh write is accepted');
my $s3 = shard_of('accounts', $id3);
stale(Qerr('w3', $manual, 'UPDATE ' . Q('coord', "SELECT shard_name('accounts', $s3)") . " SET fence = '69:0' WHERE id = $id3"),
	'on the new node, a stale write sent to the shard directly is refused');
is(Q('coord', 'SELECT count(*), count(*) FILTER (WHERE fence IS NULL) FROM accounts'), '44|0', '44 rows, every one fenced');

# --- key scope: the fences move with their keys
# a move of the shard of account 1 while a writer adds new keys to it
my $k1 = shard_of('ledger', 1);
my $from = name_of_shard($k1);
my $to = $from eq 'w1' ? 'w2' : 'w1';
append_to_file("$tmp/writer.sql",
	"SET ROLE app;\n"
	  . join('', map { "INSERT INTO ledger (acct, id, book, fence) VALUES (1, " . (10000 + $_) . ", 'w" . ($_ % 50) . "', '80:$_');\n" } 1 .. 1500));
my $writer = q_start('coord', "\\i $tmp/writer.sql");
wait_until(10, sub { Q('coord', 'SELECT count(*) FROM ledger WHERE id > 10000') > 50 });
is(Q2('coord', $move_sql->($k1, $from, $to)), '',
	"key scope: citus_move_shard_placement of ledger shard $k1 ($from to $to) while a writer adds keys to it");
my $wout = q_finish($writer);
is(scalar(() = $wout =~ /ERROR/g), 0, '... every write of the writer was accepted');
cleanup_orphans();
is(name_of_shard($k1), $to, "... the shard is on $to");
# every ledger shard's co-located storage shard is on the same node
my $colocated_census = sub {
	my $r = Q('coord', "SELECT count(*), count(*) FILTER (WHERE lp.groupid = sp.groupid)
             FROM pg_dist_shard l JOIN pg_dist_placement lp USING (shardid)
             JOIN pg_dist_shard s ON s.logicalrelid = '$storage'::regclass
                  AND s.shardminvalue = l.shardminvalue AND s.shardmaxvalue = l.shardmaxvalue
             JOIN pg_dist_placement sp ON sp.shardid = s.shardid
             WHERE l.logicalrelid = 'ledger'::regclass");
	$r =~ tr/|/ /;
	return $r;
};
is($colocated_census->(), '4 4', '... every storage shard is on the node of its ledger shard');
my $rows1 = Q('coord', "SELECT count(*) || ': ' || string_agg(book || '=' || f::text, ',' ORDER BY book)
                 FROM (SELECT book, fencing.max(fence) AS f FROM ledger WHERE acct = 1 GROUP BY book) l");
like($rows1, qr/^51: /, '... account 1 has 51 keys');
is( Q('coord', "SELECT count(*) || ': ' || string_agg((key::json->>0) || '=' || fence::text, ',' ORDER BY key::json->>0)
               FROM fencing.scopes WHERE scope_name = 'public.ledger' AND key::json->>1 = '1'"),
	$rows1, "... and after the move each one's fence is its highest accepted token");
my $dups = 0;
foreach my $log (FencingCitus::logfiles())
{
	$dups += () = slurp_file($log) =~ /duplicate key value violates unique constraint "scope_/g;
}
is($dups, 0, '... no replication of the move failed on a storage row');
$out = Qaerr('coord', "INSERT INTO ledger (acct, id, book, fence) VALUES (1, 20001, 'w7', '80:6')");
stale_key($out, 'w7","1', 'after the move, a stale insert of a key that moved');
like($out, qr/while executing command on 127\.0\.0\.1:${\ port($to)}/, "... refused by the new node $to");
is(Qa2('coord', "INSERT INTO ledger (acct, id, book, fence) VALUES (1, 20001, 'w7', '81:0')"), '',
	'after the move, a fresh insert is accepted');
stale_key(Qaerr($to, $manual, 'UPDATE ' . Q('coord', "SELECT shard_name('ledger', $k1)") . " SET fence = '30:0' WHERE acct = 1 AND id = 1"),
	'main","1', "after the move, a stale write sent to the shard on $to directly");

# a split of the shard of account 2: the storage shard splits with it
my $k2 = shard_of('ledger', 2);
is(Q2('coord', $split_sql->($k2, $mid_of->($k2))), '', "key scope: citus_split_shard_by_split_points of ledger shard $k2");
cleanup_orphans();
is($colocated_census->(), '5 5', '... 5 ledger shards, each with its storage shard on its node');
is(guard_census('ledger'), '5 5 5', '... all guarded');
stale_key(Qaerr('coord', "UPDATE ledger SET amount = 0, fence = '30:9' WHERE acct = 2 AND id = 2"),
	'main","2', 'after the split, a stale write of account 2');
is(Qa2('coord', "UPDATE ledger SET amount = 2, fence = '82:0' WHERE acct = 2 AND id = 2"), '',
	'after the split, a fresh write is accepted');

# the node w3 joined above: rebalance the ledger onto it
Q2('coord', "SELECT rebalance_table_shards('ledger')");
cleanup_orphans();
$on_w3 = Q('coord', $on_w3_sql->('ledger'));
ok($on_w3 > 0, "key scope: rebalance_table_shards('ledger') moved $on_w3 shard(s) onto the new node");
is($colocated_census->(), '5 5', '... with their storage shards');
my $acct3 = Q('coord', "SELECT acct FROM ledger WHERE get_shard_id_for_distribution_column('ledger', acct) IN
        (SELECT shardid FROM pg_dist_shard_placement WHERE nodeport = " . port('w3') . ") AND book = 'main' ORDER BY acct LIMIT 1");
$f3 = Q('coord', "SELECT fence FROM fencing.scopes WHERE scope_name = 'public.ledger' AND key = fencing.scope_key('main', '$acct3')");
$out = Qaerr('coord', "INSERT INTO ledger (acct, id, fence) VALUES ($acct3, 30001, '$f3')");
used_key($out, "main\",\"$acct3", "on the new node, an insert of account $acct3 with its own fence $f3 (which moved with it)");
like($out, qr/while executing command on 127\.0\.0\.1:${\ port('w3')}/, '... refused by the new node');
is(Qa2('coord', "INSERT INTO ledger (acct, id, fence) VALUES ($acct3, 30001, '90:0')"), '',
	'on the new node, a fresh insert is accepted');

# --- key scope: a transfer whose stream of fences falls behind its rows'
# Citus moves and splits a table and its scope's storage by one stream per
# table owner, and counts as caught up a subscription whose apply worker is
# not running (its latest_end_lsn is NULL).  Here the storage shard on the
# new node refuses the stream of fences (a CHECK constraint on it, as a
# late or failing apply worker would) while writes fall into each phase of
# the transfer, held at Citus' own hooks for isolation tests (with
# citus.running_under_citus_test_suite, the transfer takes advisory lock
# (55152, 44000) before it copies, and (44000, 55152) after the catch-up,
# before it blocks writes); the fences are let through once the transfer
# waits for them, and must all be there after it.
my $hook_waiting = sub {
	my ($c, $o) = @_;
	return Q('coord', "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $c AND objid = $o AND objsubid = 2");
};
# backends of the nodes waiting for a scope's fences to arrive
my $fences_awaited = sub {
	my $t = 0;
	foreach my $node (@_)
	{
		$t += Q($node, "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'FencingScopeStream'
                              OR (wait_event_type = 'Extension' AND wait_event = 'Extension' AND backend_type NOT LIKE 'Citus%')");
	}
	return $t;
};
# the storage shard NAME on NODE refuses fences from TOKEN on, or again takes them
my $free_fences = sub {
	my ($node, $shard) = @_;
	Q2($node, $manual, "ALTER TABLE $shard DROP CONSTRAINT IF EXISTS fencing_test_hold");
	return;
};
my $hold_fences = sub {
	my ($node, $shard, $token) = @_;
	$free_fences->($node, $shard);
	Q($node, $manual, "ALTER TABLE $shard ADD CONSTRAINT fencing_test_hold CHECK (fence OPERATOR(fencing.<) '$token') NOT VALID");
	return;
};
# the storage shards that a split is filling on NODE (not in Citus' metadata yet)
my $split_storage = sub {
	return split ' ', Q($_[0], "SET citus.show_shards_for_app_name_prefixes = '*'",
		"SELECT string_agg(DISTINCT r.srrelid::regclass::text, ' ') FROM pg_subscription_rel r JOIN pg_class c ON c.oid = r.srrelid
         WHERE c.relnamespace = 'fencing'::regnamespace AND c.relname ~ '^${storage_rel}_[0-9]+\$'
           AND NOT EXISTS (SELECT 1 FROM pg_dist_shard s WHERE s.shardid = substring(c.relname from '[0-9]+\$')::bigint)");
};
# does a transfer block writes (Citus' exclusive lock on the metadata of a
# shard, or of a shard index of a co-location group, which only a transfer
# takes, and only when it blocks writes)?
my $writes_blocked = sub {
	return Q('coord', "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid IN (4, 8)
             AND mode = 'ExclusiveLock' AND granted");
};
# run SQL as the application, with a token propagated to the workers
my $qt = sub { return Qa2('coord', COORD_TOKEN, @_); };
# account 5's key fences and the stale writes after a transfer
my $fences_of = sub {
	return Q('coord', "SELECT string_agg((key::json->>0) || '=' || fence::text, ',' ORDER BY key::json->>0) FROM fencing.scopes
             WHERE scope_name = 'public.ledger' AND key::json->>1 = '5' AND key::json->>0 LIKE '$_[0]%'");
};
my $other_than = sub { my $n = shift; return (grep { $_ ne $n } qw(w1 w2 w3))[0]; };
my $in_test_suite = 'SET citus.running_under_citus_test_suite = on';
my $ma = 5;
my $mshard = shard_of('ledger', $ma);
my $mfrom = name_of_shard($mshard);
my $mto = $other_than->($mfrom);
my $msk = Q('coord', "SELECT s.shardid FROM pg_dist_shard s, pg_dist_shard l WHERE l.shardid = $mshard
               AND s.logicalrelid = '$storage'::regclass AND s.shardminvalue = l.shardminvalue");
my $mstorage = Q('coord', "SELECT shard_name('$storage', $msk)");
my $hooks = session('coord');
$hooks->feed("SELECT pg_advisory_lock(55152, 44000);\nSELECT pg_advisory_lock(44000, 55152);\n");
$hooks->mark('held');
my $transfer = session('coord');
$transfer->feed("$in_test_suite;\n" . $move_sql->($mshard, $mfrom, $mto) . ";\n\\echo \@\@done\@\@\n");
wait_until(60, sub { $hook_waiting->(55152, 44000) eq '1' });
# 1. the slot is made, the copy not yet: new keys, and a DELETE whose token
# only the fences carry
$out = $qt->("INSERT INTO ledger (acct, id, book, fence) SELECT $ma, 40000 + g, 'mv' || g % 3, ('95:' || g)::fencing.fence FROM generate_series(1, 6) g",
	"INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40101, 'mvd', '95:1')",
	'BEGIN', "SET LOCAL fencing.token = '95:50'", "DELETE FROM ledger WHERE acct = $ma AND id = 40101", 'COMMIT');
$hold_fences->($mto, $mstorage, '95:0');
$hooks->feed("SELECT pg_advisory_unlock(55152, 44000);\n");
# with the guard arriving on the new shard, the transfer waits for the fences
my $waited = 0;
wait_until(120, sub {
	return 1 if $hook_waiting->(44000, 55152) eq '1';
	if ($fences_awaited->($mto) > 0)
	{
		$waited = 1;
		$free_fences->($mto, $mstorage);
	}
	return 0;
});
ok($waited, 'key scope move: the guard arrives on the new shard only after the fences of the writes replayed before it');
# 2. caught up, the guard on the new shard, writes not yet blocked: more
# writes, a key changed by an UPDATE, another DELETE with a token
$hold_fences->($mto, $mstorage, '95:0');
$out .= $qt->("INSERT INTO ledger (acct, id, book, fence) SELECT $ma, 40000 + g, 'mv' || g % 3, ('95:' || g)::fencing.fence FROM generate_series(7, 12) g",
	"UPDATE ledger SET book = 'mv2', fence = '95:13' WHERE acct = $ma AND id = 40001",
	"INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40102, 'mve', '95:2')",
	'BEGIN', "SET LOCAL fencing.token = '95:60'", "DELETE FROM ledger WHERE acct = $ma AND id = 40102", 'COMMIT');
$hooks->feed("SELECT pg_advisory_unlock(44000, 55152);\n");
# 3. writes blocked while the transfer catches up: it waits for the fences;
# a write sent now waits for the switch, and lands on the new node
my $blocked_sql = "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40013, 'mv0', '95:14')";
my $blocked_out;
$waited = 0;
wait_until(120, sub {
	return 1 if $transfer->done('done');
	return 0 unless $fences_awaited->($mto) > 0 && $writes_blocked->() > 0;
	$waited = 1;
	my $job = q_start('coord', 'SET ROLE app', COORD_TOKEN, $blocked_sql);
	wait_until(60, sub {
		Q('coord', "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO ledger%40013%'") > 0;
	});
	$free_fences->($mto, $mstorage);
	$blocked_out = q_finish($job);
	return 1;
});
ok($waited, 'key scope move: the transfer, writes blocked, waits for the fences of the writes replayed after the guard arrived');
$transfer->wait_out(qr/\@\@done\@\@/, 120);
my $transfer_out = $transfer->finish;
$free_fences->($mto, $mstorage);
$blocked_out = $qt->($blocked_sql) unless $waited;
is($transfer_out, '', "key scope: citus_move_shard_placement of ledger shard $mshard ($mfrom to $mto), writes in each of its phases");
cleanup_orphans();
is($out . $blocked_out, '', '... every write accepted');
is(name_of_shard($mshard), $mto, "... the shard is on $mto");
is(Q('coord', "SELECT count(*) FROM ledger WHERE acct = $ma AND id > 40000"), '13', '... with all 13 rows written during the move');
is($fences_of->('mv'), 'mv0=95:14,mv1=95:13,mv2=95:13,mvd=95:50,mve=95:60',
	"... and every key's fence is its highest accepted token, a DELETE's too");
foreach my $st ([ 'mvd', '95:30' ], [ 'mve', '95:55' ], [ 'mv1', '95:12' ])
{
	my ($key, $token) = @$st;
	stale_key(Qaerr('coord', "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40201, '$key', '$token')"),
		"$key\",\"$ma", "after the move, a stale write of key $key with $token");
}

# the same for a split, writes at its last catch-up, the new storage shards
# refusing the fences on both nodes
my $sk = shard_of('ledger', $ma);
my $smid = $mid_of->($sk);
$hooks->feed("SELECT pg_advisory_lock(44000, 55152);\n");
$hooks->mark('held2');
$transfer = session('coord');
$transfer->feed("$in_test_suite;\n" . $split_sql->($sk, $smid) . ";\n\\echo \@\@done\@\@\n");
wait_until(120, sub { $hook_waiting->(44000, 55152) eq '1' });
my %held;
foreach my $node (qw(w1 w2))
{
	$held{$node} = [ $split_storage->($node) ];
	$hold_fences->($node, $_, '96:0') foreach @{ $held{$node} };
}
$out = $qt->("INSERT INTO ledger (acct, id, book, fence) SELECT $ma, 50000 + g, 'sp' || g % 2, ('96:' || g)::fencing.fence FROM generate_series(1, 6) g",
	"INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 50101, 'spd', '96:1')",
	'BEGIN', "SET LOCAL fencing.token = '96:40'", "DELETE FROM ledger WHERE acct = $ma AND id = 50101", 'COMMIT');
$hooks->feed("SELECT pg_advisory_unlock(44000, 55152);\n");
$waited = 0;
wait_until(120, sub {
	return 1 if $transfer->done('done');
	return $waited = 1 if $fences_awaited->('w1', 'w2') > 0;
	return 0;
});
foreach my $node (qw(w1 w2))
{
	$free_fences->($node, $_) foreach @{ $held{$node} };
}
$transfer->wait_out(qr/\@\@done\@\@/, 120);
$transfer_out = $transfer->finish;
ok($waited, 'key scope split: the split, writes blocked, waits for the fences of the writes replayed into the new shards');
is($transfer_out, '', "key scope: citus_split_shard_by_split_points of ledger shard $sk, writes at its last catch-up");
cleanup_orphans();
is($out, '', '... every write accepted');
is(Q('coord', "SELECT count(*) FROM ledger WHERE acct = $ma AND id > 50000"), '6', '... and all 6 rows are in the new shards');
is($fences_of->('sp'), 'sp0=96:6,sp1=96:5,spd=96:40', "... with every key's fence its highest accepted token, a DELETE's too");
stale_key(Qaerr('coord', "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 50201, 'spd', '96:20')"),
	"spd\",\"$ma", 'after the split, a stale write of key spd');
is($colocated_census->(), '6 6', '... 6 ledger shards, each with its storage shard on its node');

# the other way round: the new ledger shard refuses the stream of rows
# (from before the copy on, before the guard is there) while the fences of
# the same writes come; the transfer must wait for the rows, not complete
# without them
my $ck = shard_of('ledger', $ma);
my $cfrom = name_of_shard($ck);
my $cto = $other_than->($cfrom);
my $cledger = Q('coord', "SELECT shard_name('ledger', $ck)");
$hooks->finish;
$hooks = session('coord');
$hooks->feed("SELECT pg_advisory_lock(55152, 44000);\n");
$hooks->mark('held3');
$transfer = session('coord');
$transfer->feed("$in_test_suite;\n" . $move_sql->($ck, $cfrom, $cto) . ";\n\\echo \@\@done\@\@\n");
wait_until(120, sub { $hook_waiting->(55152, 44000) eq '1' });
$hold_fences->($cto, $cledger, '97:0');
$out = $qt->("INSERT INTO ledger (acct, id, book, fence) SELECT $ma, 60000 + g, 'cr' || g % 3, ('97:' || g)::fencing.fence FROM generate_series(1, 6) g");
$hooks->feed("SELECT pg_advisory_unlock(55152, 44000);\n");
$waited = 0;
wait_until(120, sub {
	return 1 if $transfer->done('done');
	return $waited = 1 if $fences_awaited->($cto) > 0;
	return 0;
});
$free_fences->($cto, $cledger);
$transfer->wait_out(qr/\@\@done\@\@/, 120);
$transfer_out = $transfer->finish;
$hooks->finish;
ok($waited, 'key scope move: the stream of fences waits for the rows of the same writes');
is($transfer_out, '', "key scope: citus_move_shard_placement of ledger shard $ck ($cfrom to $cto), its rows held back on $cto");
cleanup_orphans();
is($out, '', '... every write accepted');
is(name_of_shard($ck), $cto, "... the shard is on $cto");
is(Q('coord', "SELECT count(*) FROM ledger WHERE acct = $ma AND id > 60000"), '6', '... with all 6 rows written during the move');
is($fences_of->('cr'), 'cr0=97:6,cr1=97:4,cr2=97:5', "... and every key's fence is its highest accepted token");

is(Q('coord', 'SELECT count(*) FROM ledger'), '1593', 'the ledger: 1593 rows, each accepted write once');

# --- two coordinator sessions racing on one row: the first takes the row,
# the second blocks on it on the worker, the first commits; the outputs and
# the row's fence
sub race
{
	my ($first, $second) = @_;
	my $out = race_sessions(
		first => [ COORD_TOKEN, 'BEGIN', "SET LOCAL fencing.token = '$first'",
			'UPDATE accounts SET balance = balance + 1 WHERE id = 9' ],
		second => [ COORD_TOKEN, '\set VERBOSITY verbose', 'BEGIN', "SET LOCAL fencing.token = '$second'",
			'UPDATE accounts SET balance = balance + 10 WHERE id = 9', 'COMMIT' ],
		nodes => [qw(w1 w2 w3)],
		waiting => 'UPDATE');
	return "$out\nfence=" . Q('coord', 'SELECT fence FROM accounts WHERE id = 9');
}
Q('coord', "UPDATE accounts SET fence = '80:0' WHERE id = 9");
$out = race('90:2', '90:1');
like($out, qr/waited=1/, "race: the older token's UPDATE waited for the newer one's row lock on the worker");
stale($out, 'race: newer token commits first, the blocked older one');
like($out, qr/fence=90:2$/, 'race: exactly one of the two ordered tokens won: 90:2');
$out = race('91:0', '91:0');
like($out, qr/ERROR:  SF001: fence token 91:0 for table "[a-z_0-9]+" was already used/,
	'race: the same token in two transactions, the second is refused (strict)');
like($out, qr/fence=91:0$/, '... one write of 91:0');
is(Q('coord', 'SELECT balance FROM accounts WHERE id = 9'), '1002', '... the balance shows the two accepted writes only');

# --- a reference table: row scope
Q('coord', 'CREATE TABLE rates (code text PRIMARY KEY, rate numeric, fence fencing.fence)',
	"SELECT create_reference_table('rates')",
	"INSERT INTO rates VALUES ('EUR', 1, '5:0'), ('USD', 2, '5:0')");
is(Q2('coord', "SELECT fencing.protect('rates')"), '', 'protect() on a reference table');
is(guard_census('rates'), '4 4 4', '... every placement (coordinator and 3 workers) guarded');
stale(Qerr('coord', "UPDATE rates SET rate = 0, fence = '4:0' WHERE code = 'EUR'"), 'reference table: stale write refused');
is(Q2('coord', "UPDATE rates SET rate = 3, fence = '6:0' WHERE code = 'EUR'"), '', 'reference table: fresh write accepted');
my $rates_shard = Q('coord', "SELECT shard_name('rates', shardid) FROM pg_dist_shard WHERE logicalrelid = 'rates'::regclass");
is(join('', map { Q($_, $manual, "SELECT rate || '/' || fence FROM $rates_shard WHERE code = 'EUR'") . ' ' } qw(w1 w2 w3)),
	'3/6:0 3/6:0 3/6:0 ', '... every copy took it');
like(Qerr('coord', 'TRUNCATE rates'), qr/ERROR:  SF002: cannot truncate/, 'reference table: TRUNCATE refused');

# --- what cannot hold is refused, naming what works
$out = Qerr('coord', "SELECT fencing.protect('accounts', key_columns => '{}')");
like($out, qr/ERROR:  0A000: table scope cannot hold on distributed table "accounts"/, 'table scope on a distributed table: 0A000');
like($out, qr/HINT:  Use row scope \(key_columns => NULL\), or key scope with the distribution column "id"/,
	'... the HINT names what works');
Q('coord', 'ALTER TABLE accounts ADD COLUMN region text');
$out = Qerr('coord', "SELECT fencing.protect('accounts', key_columns => '{region}')");
like($out, qr/ERROR:  0A000: key scope without the distribution column cannot hold/, 'key scope without the distribution column: 0A000');
like($out, qr/HINT:  Add the distribution column "id" to key_columns/, '... the HINT names what works');
Q('coord', 'CREATE DOMAIN account_id AS bigint', 'CREATE TABLE by_domain (a account_id, fence fencing.fence)',
	"SELECT create_distributed_table('by_domain', 'a')");
$out = Qerr('coord', "SELECT fencing.protect('by_domain', key_columns => '{a}')");
like($out, qr/ERROR:  0A000: key scope cannot hold on distributed table "by_domain"/,
	'key scope by a distribution column of a domain type: 0A000');
like($out, qr/HINT:  Use row scope \(key_columns => NULL\), or distribute the table by a column of a base type/,
	'... the HINT names what works');
like(Qerr('coord', "SELECT fencing.protect('rates', key_columns => '{code}')"),
	qr/ERROR:  0A000: key scope cannot hold on reference table/, 'key scope on a reference table: 0A000');
like(Qerr('coord', "SELECT fencing.protect('rates', key_columns => '{}')"),
	qr/ERROR:  0A000: table scope cannot hold on reference table/, 'table scope on a reference table: 0A000');
like(Qerr('coord', "SELECT fencing.protect('accounts', lease => 'l1')"),
	qr/ERROR:  0A000: cannot protect distributed table "accounts" with a lease/, 'a lease on a distributed table: 0A000');
Q('coord', 'CREATE TABLE local_ledger (id bigint, fence fencing.fence)',
	"SELECT fencing.protect('local_ledger', key_columns => '{id}', scope_name => 'shared')");
$out = Qerr('coord', "SELECT fencing.protect('accounts', key_columns => '{id}', scope_name => 'shared')");
like($out, qr/ERROR:  0A000: fencing scope "shared" cannot be shared by tables "local_ledger" and "accounts"/,
	'a scope_name shared with a table that is not co-located: 0A000');
like($out, qr/HINT:  Distribute both tables co-located/, '... the HINT names what works');
like(Qerr(name_of_shard($s7), "SELECT fencing.protect('$sh7')"),
	qr/ERROR:  0A000: cannot protect ".*", a shard of distributed table "accounts"/, 'protect() of a shard on a worker: 0A000');
is(Q('coord', "SELECT key_columns IS NULL FROM fencing.protected WHERE relid = 'accounts'::regclass"), 't',
	'... after every refusal, accounts is still protected in row scope');
stale(Qerr('coord', "UPDATE accounts SET fence = '1:0' WHERE id = 1"), '... and still refuses stale writes');

# --- unprotect() leaves nothing behind on any node
is(Q2('coord', "SELECT fencing.unprotect('accounts')", "SELECT fencing.unprotect('rates')", "SELECT fencing.unprotect('events')"),
	'', 'unprotect() of the distributed, the reference and the partitioned table');
is(Qa2('coord', "SELECT fencing.unprotect('ledger')", "SELECT fencing.unprotect('ledger_lines')", "SELECT fencing.unprotect('postings')"),
	'', 'unprotect() of the two tables of the key scope, and of the partitioned one');
# a scope outlives its tables (its fences stop a stale writer of a table
# protected into it again), until the extension's owner resets it
my $on_every_node = sub {
	my @sql = @_;
	return join('', map { Q($_, @sql) . ' ' } qw(coord w1 w2 w3));
};
my $storage_shards = sub {
	return $on_every_node->("SET citus.show_shards_for_app_name_prefixes = '*'",
		"SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'fencing'::regnamespace AND relname LIKE '${storage_rel}\\_%'");
};
like($storage_shards->(), qr/[1-9]/, "... the scope's storage shards stay, as a scope's fences do");
is(Q('coord', "SELECT fencing.reset_scope('public.ledger') > 0"), 't', 'reset_scope() of the distributed scope');
is($storage_shards->(), '0 0 0 0 ', '... drops its storage shards on every node');
is( Q('coord', "SELECT count(*) FROM fencing.scope_storage WHERE scope_name = 'public.ledger'") . '|'
	  . Q('coord', "SELECT to_regclass('$storage') IS NULL"),
	'0|t', '... and its registry row and table on the coordinator');
cleanup_orphans();
is( $on_every_node->("SELECT count(*) FROM pg_trigger WHERE tgfoid IN ('fencing.guard'::regproc, 'fencing.guard_truncate'::regproc)
             AND tgrelid::regclass::text NOT LIKE 'local_ledger%'"),
	'0 0 0 0 ', 'no fencing trigger left on any node (shells and shards)');
is(Q('coord', "SELECT count(*) FROM fencing.protected WHERE relid::text <> 'local_ledger'"), '0', 'fencing.protected forgets them');
is(Q2('coord', "UPDATE accounts SET balance = 0, fence = '1:0' WHERE id = 1", 'TRUNCATE rates', 'TRUNCATE events'),
	'', 'writes with old tokens and TRUNCATE go through again');
Q2('coord', "SELECT fencing.protect('accounts')");
is(guard_census('accounts'), '5 5 5', 'protect() again guards every shard again');
stale(Qerr('coord', "UPDATE accounts SET fence = '0:1' WHERE id = 1"), '... and refuses stale writes again');

# --- DROP EXTENSION
like(Qerr('coord', 'DROP EXTENSION fencing'),
	qr/ERROR:  2BP01: cannot drop extension fencing because other objects depend on it/,
	'DROP EXTENSION fencing is refused while a table is protected');
my $ext_count = "SELECT count(*) FROM pg_extension WHERE extname = 'fencing'";
is($on_every_node->($ext_count), '1 1 1 1 ', '... the extension is still on every node');
stale(Qerr('coord', "UPDATE accounts SET fence = '0:2' WHERE id = 1"), '... and the guard still holds');
like(Q2('coord', 'DROP EXTENSION fencing CASCADE'), qr/^(NOTICE|$)/m, 'DROP EXTENSION fencing CASCADE on the coordinator');
is($on_every_node->($ext_count), '0 0 0 0 ', '... removes it from every node');
is( $on_every_node->("SELECT count(*) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid WHERE p.proname IN ('guard', 'guard_truncate')"),
	'0 0 0 0 ', '... with every guard trigger on every node');
is(Q('coord', 'SELECT count(*) FROM accounts'), '44', '... the table keeps its 44 rows');

done_testing();
