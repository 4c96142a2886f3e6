# Every path a non-owning role could take to lower or reset a fence.
#
# A table owner protects "accounts" (row scope) and "ledger" (key scope on
# account_id), and grants an application role the writes it needs.  The
# application role (logged in as itself, not SET ROLE) then tries, one by
# one, every path we know of to lower, reset or switch off a fence: each
# path must fail with the expected SQLSTATE (or, for the paths that are
# allowed, leave the fences where they were), and after each path no fence
# may be lower than before it and every guard must be intact.  The number
# of paths tried is printed.
#
# sql/guard_privileges.sql covers the catalog writes, break glass,
# protect/unprotect, DISABLE TRIGGER and a view in a user's psql session;
# this test lists the paths exhaustively, adds those a regress file cannot
# (roles logged in as themselves, GRANT TRIGGER, GRANT SET ON PARAMETER, FK
# cascades, rules, SECURITY DEFINER) and then repeats the hostile
# search_path attack against the DDL guard and fencing.protected_tables,
# with the hostile schema ahead of pg_catalog.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FencingTest;

my $node = PostgreSQL::Test::Cluster->new('privileges');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->start;

# The SQLSTATE of $sql run by $role ('' on success).
sub as_role
{
	my ($role, $sql) = @_;
	my ($ret, $out, $err) = $node->psql(
		'postgres', "\\set VERBOSITY verbose\n$sql",
		extra_params => [ '-U', $role ]);
	return '' if $ret == 0 && $err !~ /ERROR:/;
	return $1 if $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return "? $err";
}

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION fencing;
CREATE ROLE owner LOGIN;
CREATE ROLE app LOGIN;
CREATE ROLE trig LOGIN;
GRANT CREATE ON SCHEMA public TO owner, app, trig;
GRANT CREATE ON DATABASE postgres TO app;
CREATE ROLE sneaky LOGIN;
});
# the app owns a lookup table the protected table references (FK cascade)
as_role('app', q{
CREATE TABLE app_codes (code text PRIMARY KEY);
INSERT INTO app_codes VALUES ('c1');
GRANT REFERENCES ON app_codes TO owner;
}) eq '' or die 'app setup failed';
as_role('owner', q{
CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL,
    code text REFERENCES app_codes ON UPDATE CASCADE ON DELETE CASCADE,
    fence fencing.fence);
CREATE TABLE ledger (id serial PRIMARY KEY, account_id text NOT NULL,
    amount bigint NOT NULL, fence fencing.fence);
INSERT INTO accounts VALUES ('a', 100, 'c1', '5:0'), ('b', 100, NULL, '5:0');
INSERT INTO ledger (account_id, amount, fence) VALUES ('a', 100, '5:0'), ('b', 100, '5:0');
SELECT fencing.protect('accounts');
SELECT fencing.protect('ledger', key_columns => '{account_id}');
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON accounts, ledger TO app, trig;
GRANT TRIGGER ON accounts, ledger TO trig;
GRANT USAGE ON SEQUENCE ledger_id_seq TO app, trig;
}) eq '' or die 'owner setup failed';

# The fences and the guards: ({ "accounts/a" => "5:0", "ledger/[\"a\"]" =>
# ... }, "intact/total" of fencing.protected_tables), in one query.
sub fences
{
	my (%f, $intact);
	foreach my $line (
		split /\n/,
		$node->safe_psql(
			'postgres', q{
		SELECT 'accounts/' || id, coalesce(fence::text, 'NULL') FROM accounts
		UNION ALL
		SELECT 'ledger/' || key, fence::text FROM fencing.scopes
		 WHERE scope_name = 'public.ledger'
		UNION ALL
		SELECT 'intact', count(*) FILTER (WHERE guard_intact) || '/' || count(*)
		  FROM fencing.protected_tables}))
	{
		my ($k, $v) = split /\|/, $line;
		$f{$k} = $v;
	}
	$intact = delete $f{intact};
	return (\%f, $intact);
}

my ($tried, $held) = (0, 0);
my ($last) = fences();

# Try one path: $role runs $sql, which must end with one of @codes ('' for
# success); afterwards no fence is lower and every guard is intact.
sub path
{
	my ($what, $role, $sql, @codes) = @_;
	my $before = $last;
	my $got = as_role($role, $sql);
	my ($after, $intact) = fences();
	$last = $after;
	my @lower = grep {
		!defined $after->{$_} || $after->{$_} eq 'NULL'
		  || FencingTest::fence_cmp($after->{$_}, $before->{$_}) < 0
	} sort keys %$before;
	$tried++;
	my $ok = (grep { $_ eq $got } @codes) && !@lower && $intact eq '2/2';
	$held++ if $ok;
	ok($ok,
		sprintf('%s (%s): %s; no fence lowered, guards intact', $what, $role,
			$got eq '' ? 'allowed' : $got))
	  or diag(sprintf("expected %s, got '%s'; lowered: %s; intact: %s",
		join('/', map { $_ eq '' ? 'success' : $_ } @codes),
		$got, join(', ', map { "$_ $before->{$_} -> " . ($after->{$_} // 'gone') } @lower),
		$intact));
}

my $stale = "SET LOCAL fencing.token = '1:0';";

# -- writes through the guard with a stale, missing or lowered token
path('UPDATE lowering the fence column', 'app',
	"UPDATE accounts SET fence = '0:1' WHERE id = 'a'", 'SF001');
path('UPDATE setting the fence column to NULL', 'app',
	"UPDATE accounts SET fence = NULL WHERE id = 'a'", 'SF002');
path('UPDATE with a stale fencing.token', 'app',
	"BEGIN; $stale UPDATE accounts SET balance = 0 WHERE id = 'a'; COMMIT;", 'SF001');
path('UPDATE with the current fence as token (strict)', 'app',
	"BEGIN; SET LOCAL fencing.token = '5:0'; UPDATE accounts SET balance = 0 WHERE id = 'a'; COMMIT;",
	'SF001');
path('UPDATE without a token', 'app',
	"UPDATE accounts SET balance = 0 WHERE id = 'a'", 'SF002');
path('DELETE with a stale token', 'app',
	"BEGIN; $stale DELETE FROM accounts WHERE id = 'a'; COMMIT;", 'SF001');
path('DELETE then INSERT in row scope with a stale token', 'app',
	"BEGIN; $stale DELETE FROM accounts WHERE id = 'b'; INSERT INTO accounts VALUES ('b', 0, NULL, '0:0'); COMMIT;",
	'SF001');
path('INSERT ... ON CONFLICT DO UPDATE lowering the fence', 'app',
	"INSERT INTO accounts VALUES ('a', 0, NULL, '0:1') ON CONFLICT (id) DO UPDATE SET fence = EXCLUDED.fence",
	'SF001');
path('MERGE with a stale token', 'app',
	"BEGIN; $stale MERGE INTO accounts t USING (VALUES ('a')) s(id) ON t.id = s.id WHEN MATCHED THEN UPDATE SET balance = 0; COMMIT;",
	'SF001');
path('key scope: INSERT with a stale token', 'app',
	"INSERT INTO ledger (account_id, amount, fence) VALUES ('a', -1, '1:0')", 'SF001');
path('key scope: INSERT without a token', 'app',
	"INSERT INTO ledger (account_id, amount) VALUES ('a', -1)", 'SF002');
path('key scope: DELETE every row of a key, then INSERT with an older token', 'app',
	"BEGIN; SET LOCAL fencing.token = '6:0'; DELETE FROM ledger WHERE account_id = 'b'; COMMIT;
	 INSERT INTO ledger (account_id, amount, fence) VALUES ('b', 1000, '5:9');",
	'SF001');
path('key scope: UPDATE moving a row to a key with a newer fence', 'app',
	"BEGIN; SET LOCAL fencing.token = '5:5'; UPDATE ledger SET account_id = 'b' WHERE account_id = 'a'; COMMIT;",
	'SF001');
path('key scope: COPY FROM STDIN with a stale token', 'app',
	"BEGIN; $stale COPY ledger (account_id, amount) FROM STDIN;\na\t1\n\\.\nCOMMIT;", 'SF001');
path('TRUNCATE (with the TRUNCATE privilege)', 'app', 'TRUNCATE accounts', 'SF002');
path('TRUNCATE ... CASCADE from a table it owns', 'app', 'TRUNCATE app_codes CASCADE', 'SF002');

# -- the catalog of fences: the view fencing.scopes (not writable by
# anyone), the table that holds the ledger scope's fences and the registry
# of scopes (the extension owner's)
my $fences = $node->safe_psql('postgres',
	"SELECT storage FROM fencing.scope_storage WHERE scope_name = 'public.ledger'");
path('UPDATE fencing.scopes', 'app', "UPDATE fencing.scopes SET fence = '0'", '55000');
path('DELETE FROM fencing.scopes', 'app', 'DELETE FROM fencing.scopes', '55000');
path('INSERT INTO fencing.scopes', 'app',
	q{INSERT INTO fencing.scopes VALUES ('public.ledger', '["c"]', '0')}, '55000');
path('TRUNCATE fencing.scopes', 'app', 'TRUNCATE fencing.scopes', '42809');
path('UPDATE the scope storage', 'app', "UPDATE $fences SET fence = '0'", '42501');
path('DELETE FROM the scope storage', 'app', "DELETE FROM $fences", '42501');
path('INSERT INTO the scope storage', 'app', "INSERT INTO $fences VALUES ('c', '0')", '42501');
path('TRUNCATE the scope storage', 'app', "TRUNCATE $fences", '42501');
path('DROP the scope storage', 'app', "DROP TABLE $fences", '42501');
path('UPDATE fencing.scope_storage', 'app',
	'UPDATE fencing.scope_storage SET owner = current_user::regrole', '42501');
path('DELETE FROM fencing.scope_storage', 'app', 'DELETE FROM fencing.scope_storage', '42501');
path('fencing.reset_scope()', 'app', "SELECT fencing.reset_scope('public.ledger')", '42501');
path('UPDATE fencing.protected', 'app',
	'UPDATE fencing.protected SET key_columns = NULL', '42501');
path('DELETE FROM fencing.protected', 'app', 'DELETE FROM fencing.protected', '42501');
path('UPDATE pg_catalog.pg_trigger', 'app',
	"UPDATE pg_catalog.pg_trigger SET tgenabled = 'D' WHERE tgname LIKE 'zz_fencing%'",
	'42501');

# -- switching the guard off
path('fencing.unprotect()', 'app', "SELECT fencing.unprotect('accounts')", '42501');
path('fencing.protect() with strict => false', 'app',
	"SELECT fencing.protect('accounts', strict => false)", '42501');
path('fencing.protect() of the key-scope table in row scope', 'app',
	"SELECT fencing.protect('ledger')", '42501');
path('ALTER TABLE DISABLE TRIGGER ALL', 'app', 'ALTER TABLE accounts DISABLE TRIGGER ALL', '42501');
path('ALTER TABLE DISABLE TRIGGER zz_fencing_guard', 'app',
	'ALTER TABLE accounts DISABLE TRIGGER zz_fencing_guard', '42501');
path('ALTER TABLE ENABLE REPLICA TRIGGER', 'app',
	'ALTER TABLE ledger ENABLE REPLICA TRIGGER zz_fencing_guard', '42501');
path('DROP TRIGGER', 'app', 'DROP TRIGGER zz_fencing_guard ON accounts', '42501');
path('ALTER TABLE DROP COLUMN fence', 'app', 'ALTER TABLE accounts DROP COLUMN fence', '42501');
path('ALTER TABLE ALTER COLUMN account_id TYPE', 'app',
	'ALTER TABLE ledger ALTER COLUMN account_id TYPE varchar', '42501');
path('ALTER TABLE OWNER TO', 'app', 'ALTER TABLE accounts OWNER TO app', '42501');
path('DROP TABLE', 'app', 'DROP TABLE accounts', '42501');
path('SET ROLE to the owner', 'app', 'SET ROLE owner', '42501');
path('CREATE TABLE ... INHERITS (accounts)', 'app',
	'CREATE TABLE child () INHERITS (accounts)', '42501');
path('DROP EXTENSION fencing', 'app', 'DROP EXTENSION fencing CASCADE', '42501');
path('CREATE TRIGGER without the TRIGGER privilege', 'app',
	q{CREATE FUNCTION zero() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.fence := '0:0'; RETURN NEW; END$$;
	  CREATE TRIGGER aa_zero BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION zero();},
	'42501');

# -- GRANT TRIGGER: on a protected table only a member of the owner adds
#    triggers, of any timing (42501); one that would fire after the guard
#    is refused even then (SF005)
as_role('trig',
	q{CREATE FUNCTION zero_t() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.fence := '0:0'; RETURN NEW; END$$;
	  CREATE FUNCTION max_t() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM set_config('fencing.token', '9223372036854775807:0', true); RETURN NEW; END$$;}
) eq '' or die 'trig setup failed';
path('CREATE TRIGGER BEFORE ROW firing after the guard (GRANT TRIGGER)', 'trig',
	'CREATE TRIGGER zzz_zero BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION zero_t()',
	'42501', 'SF005');
path('CREATE TRIGGER BEFORE ROW on the key-scope table, after the guard', 'trig',
	'CREATE TRIGGER zz_fencing_h BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION zero_t()',
	'42501', 'SF005');
path('CREATE TRIGGER BEFORE ROW firing before the guard (GRANT TRIGGER)', 'trig',
	'CREATE TRIGGER aa_zero BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION zero_t()',
	'42501');
path('CREATE TRIGGER BEFORE ROW setting fencing.token (GRANT TRIGGER)', 'trig',
	'CREATE TRIGGER aa_max BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION max_t()',
	'42501');
path('CREATE TRIGGER AFTER STATEMENT (GRANT TRIGGER)', 'trig',
	'CREATE TRIGGER after_max AFTER INSERT ON ledger FOR EACH STATEMENT EXECUTE FUNCTION max_t()',
	'42501');
path('... so an UPDATE without a token is refused', 'trig',
	"UPDATE accounts SET balance = 1 WHERE id = 'a'", 'SF002');
path('... and so is an INSERT without a token in key scope', 'trig',
	"INSERT INTO ledger (account_id, amount) VALUES ('a', 1)", 'SF002');
as_role('owner',
	'CREATE TRIGGER aa_keep BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()'
) eq '' or die 'owner trigger failed';
path('ALTER TRIGGER ... RENAME past the guard (not the owner)', 'trig',
	'ALTER TRIGGER aa_keep ON accounts RENAME TO zzz_keep', '42501');
$node->safe_psql('postgres', 'DROP TRIGGER aa_keep ON accounts');
($last) = fences();

# -- settings
path('SET fencing.bypass', 'app', "SET fencing.bypass = on; UPDATE accounts SET balance = 0 WHERE id = 'a'",
	'42501');
path('SET session_replication_role = replica', 'app',
	'SET session_replication_role = replica', '42501');
$node->safe_psql('postgres',
	'GRANT SET ON PARAMETER session_replication_role TO app');
path('session_replication_role = replica (GRANT SET ON PARAMETER), stale UPDATE', 'app',
	"SET session_replication_role = replica; BEGIN; $stale UPDATE accounts SET balance = 0 WHERE id = 'a'; COMMIT;",
	'SF001');
path('session_replication_role = replica, INSERT without a token in key scope', 'app',
	"SET session_replication_role = replica; INSERT INTO ledger (account_id, amount) VALUES ('a', 1)",
	'SF002');
$node->safe_psql('postgres',
	'REVOKE SET ON PARAMETER session_replication_role FROM app');

# -- code the app owns
path('a SECURITY DEFINER function it owns', 'app',
	qq{CREATE FUNCTION lower_it() RETURNS void LANGUAGE sql SECURITY DEFINER
	     AS \$\$ UPDATE accounts SET fence = '0:1' WHERE id = 'a' \$\$;
	   SELECT lower_it();},
	'SF001');
path('a SECURITY DEFINER function with a stale token', 'app',
	qq{CREATE FUNCTION pay() RETURNS void LANGUAGE sql SECURITY DEFINER
	     AS \$\$ UPDATE accounts SET balance = 0 WHERE id = 'a' \$\$;
	   BEGIN; $stale SELECT pay(); COMMIT;},
	'SF001');
path('a view it owns', 'app',
	"CREATE VIEW v_accounts AS SELECT * FROM accounts; UPDATE v_accounts SET fence = '0:1' WHERE id = 'a'",
	'SF001');
path('a rule on its view (INSTEAD)', 'app',
	q{CREATE VIEW v2 AS SELECT 1 AS x;
	  CREATE RULE r AS ON INSERT TO v2 DO INSTEAD UPDATE accounts SET fence = '0:1' WHERE id = 'a';
	  INSERT INTO v2 VALUES (1);},
	'SF001');
path('CREATE RULE on the protected table', 'app',
	"CREATE RULE r2 AS ON UPDATE TO accounts DO INSTEAD NOTHING", '42501');
path('an AFTER trigger on its own table writing the protected one', 'app',
	q{CREATE TABLE mine (x int);
	  CREATE FUNCTION w() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN UPDATE accounts SET fence = '0:1' WHERE id = 'a'; RETURN NULL; END$$;
	  CREATE TRIGGER w AFTER INSERT ON mine FOR EACH ROW EXECUTE FUNCTION w();
	  INSERT INTO mine VALUES (1);},
	'SF001');
path('a trigger on its own table setting fencing.token', 'app',
	q{CREATE TABLE mine3 (x int);
	  CREATE FUNCTION t3() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN PERFORM set_config('fencing.token', '9223372036854775807:0', true); RETURN NULL; END$$;
	  CREATE TRIGGER t3 AFTER INSERT ON mine3 FOR EACH ROW EXECUTE FUNCTION t3();
	  BEGIN; INSERT INTO mine3 VALUES (1); UPDATE accounts SET balance = 0 WHERE id = 'a'; COMMIT;},
	'55P02');
path('ALTER ROLE ... SET fencing.token on itself', 'app',
	"ALTER ROLE app SET fencing.token = '9223372036854775807:0'", '55P02');
path('FK cascade (ON UPDATE CASCADE) from a table it owns, stale token', 'app',
	"BEGIN; $stale UPDATE app_codes SET code = 'c2'; COMMIT;", 'SF001');
path('FK cascade (ON DELETE CASCADE) from a table it owns, no token', 'app',
	'DELETE FROM app_codes', 'SF002');
path('its own table borrowing the ledger scope', 'app',
	q{CREATE TABLE mine2 (account_id text, fence fencing.fence);
	  SELECT fencing.protect('mine2', key_columns => '{account_id}', scope_name => 'public.ledger');},
	'42501');
path('fencing.stats_reset()', 'app', 'SELECT fencing.stats_reset()', '42501');

# a fresh token still works for the app, through every scope
path('a fresh token (allowed)', 'app',
	"BEGIN; SET LOCAL fencing.token = '7:0'; UPDATE accounts SET balance = 1 WHERE id = 'a';
	 INSERT INTO ledger (account_id, amount) VALUES ('a', 1); COMMIT;", '');

# ---------------------------------------------------------------------
# Hostile search_path, with the hostile schema ahead of pg_catalog: the
# built-in operators = and <> on oid, name, text and "char", functions
# max, and tables named protected, scopes, pg_trigger and
# pg_class, all planted by the app in a schema the owner and a superuser
# put first.
my $hostile = as_role(
	'app', q{
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
SET search_path = evil, pg_catalog;
CREATE FUNCTION evil.yes(oid, oid) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE FUNCTION evil.yes(name, name) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE FUNCTION evil.yes(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE FUNCTION evil.yes("char", "char") RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE FUNCTION evil.no(oid, oid) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT false';
CREATE FUNCTION evil.no(name, name) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT false';
CREATE FUNCTION evil.no(text, text) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT false';
CREATE FUNCTION evil.no("char", "char") RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT false';
CREATE OPERATOR evil.= (FUNCTION = evil.yes, LEFTARG = oid, RIGHTARG = oid);
CREATE OPERATOR evil.= (FUNCTION = evil.yes, LEFTARG = name, RIGHTARG = name);
CREATE OPERATOR evil.= (FUNCTION = evil.yes, LEFTARG = text, RIGHTARG = text);
CREATE OPERATOR evil.= (FUNCTION = evil.yes, LEFTARG = "char", RIGHTARG = "char");
CREATE OPERATOR evil.<> (FUNCTION = evil.no, LEFTARG = oid, RIGHTARG = oid);
CREATE OPERATOR evil.<> (FUNCTION = evil.no, LEFTARG = name, RIGHTARG = name);
CREATE OPERATOR evil.<> (FUNCTION = evil.no, LEFTARG = text, RIGHTARG = text);
CREATE OPERATOR evil.<> (FUNCTION = evil.no, LEFTARG = "char", RIGHTARG = "char");
CREATE FUNCTION evil.first_fence(fencing.fence, fencing.fence) RETURNS fencing.fence
    LANGUAGE sql AS $$SELECT '0'::fencing.fence$$;
CREATE AGGREGATE evil.max(fencing.fence) (SFUNC = evil.first_fence, STYPE = fencing.fence);
CREATE TABLE evil.protected (relid regclass, fence_column name, key_columns name[],
                             strict boolean, scope_name text);
CREATE TABLE evil.scopes (scope_name text, key text, fence fencing.fence);
CREATE TABLE evil.pg_trigger (tgrelid oid, tgname name, tgenabled "char", tgfoid oid);
CREATE TABLE evil.pg_class (oid oid, relkind "char");
GRANT SELECT ON ALL TABLES IN SCHEMA evil TO PUBLIC;
});
is($hostile, '', 'the app planted its objects in schema evil');
my $path = 'SET search_path = evil, pg_catalog, public, fencing;';
my $clean_view = $node->safe_psql('postgres',
	'SELECT relid, scope_kind, guard_intact, problem FROM fencing.protected_tables ORDER BY 1');

# the bootstrap superuser: the OS user that ran initdb (postgres in the
# full run, anyone with make prove_installcheck)
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');
foreach my $role ('owner', $superuser)
{
	path("hostile path: DISABLE TRIGGER ALL", $role,
		"$path ALTER TABLE accounts DISABLE TRIGGER ALL", 'SF005');
	path("hostile path: DISABLE TRIGGER zz_fencing_guard", $role,
		"$path ALTER TABLE ledger DISABLE TRIGGER zz_fencing_guard", 'SF005');
	path("hostile path: ENABLE REPLICA TRIGGER", $role,
		"$path ALTER TABLE accounts ENABLE REPLICA TRIGGER zz_fencing_truncate", 'SF005');
	path("hostile path: DROP TRIGGER", $role,
		"$path DROP TRIGGER zz_fencing_guard ON accounts", 'SF005');
	path("hostile path: DROP COLUMN fence", $role,
		"$path ALTER TABLE accounts DROP COLUMN fence", 'SF005');
	path("hostile path: ALTER COLUMN key TYPE", $role,
		"$path ALTER TABLE ledger ALTER COLUMN account_id TYPE varchar", 'SF005');
	path("hostile path: CREATE TRIGGER after the guard", $role,
		"$path CREATE TRIGGER zzz BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()",
		'SF005');
	path("hostile path: stale UPDATE", $role,
		"$path BEGIN; $stale UPDATE accounts SET balance = 0 WHERE id = 'a'; COMMIT;", 'SF001');
	path("hostile path: stale INSERT in key scope", $role,
		"$path BEGIN; $stale INSERT INTO ledger (account_id, amount) VALUES ('a', 0); COMMIT;",
		'SF001');
	is( $node->safe_psql(
			'postgres',
			"$path SELECT relid, scope_kind, guard_intact, problem FROM fencing.protected_tables ORDER BY 1"
		),
		$clean_view,
		"hostile path ($role): fencing.protected_tables reads the same");
}
# protect() again by the owner with the hostile path: same settings, the
# fences stay, seeded with the real max
path('hostile path: protect() again', 'owner',
	"$path SELECT fencing.protect('ledger', key_columns => '{account_id}'); SELECT fencing.protect('accounts');",
	'');
path('hostile path: unprotect() + protect() in one transaction', 'owner',
	"$path BEGIN; SELECT fencing.unprotect('ledger'); SELECT fencing.protect('ledger', key_columns => '{account_id}'); COMMIT;",
	'');
is($node->safe_psql('postgres', 'SELECT count(*) FROM evil.protected') . '/'
	  . $node->safe_psql('postgres', 'SELECT count(*) FROM evil.scopes'),
	'0/0', 'nothing was written to the planted tables');

note "privilege paths: $held of $tried held";
is($held, $tried, "every one of the $tried privilege and search_path paths held");

$node->stop;
done_testing();
