# The token comes from the session and nowhere else.
#
# Each attack of a review of 1.3, tried as the review tried it: mallory
# owns code that alice's protected tables reach (a domain, a default, a
# policy's function, an index expression, a table her foreign keys point
# at); bob, a stale holder, writes.  Each case runs in new connections
# (the caches of a backend that saw the objects before would hide it),
# and each must end with the write refused (or the secret hidden) and no
# fence moved.  Then what the session itself may still do: SET, SET
# LOCAL, set_config() and set_token() as statements of their own, a
# routine it calls by name (also with COMMIT inside a procedure), DO, its
# connection options; and without the preload, set_token() loads the
# library and works while a raw SET LOCAL fails closed.
#
# Statements that bind parameters (as every driver does) are sent with
# pgbench -M extended, whose variables the server receives as bound
# parameters of inferred types.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $max = '9223372036854775807:0';

my $node = PostgreSQL::Test::Cluster->new('provenance');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'\n");
$node->start;

my $bare = PostgreSQL::Test::Cluster->new('provenance_no_preload');
$bare->init;
$bare->start;

# The roles and the harmless first state of mallory's code, on a node.
sub setup
{
	my ($n) = @_;
	$n->safe_psql('postgres', q{
		CREATE ROLE alice LOGIN;
		CREATE ROLE bob LOGIN;
		CREATE ROLE mallory LOGIN;
		CREATE ROLE auditor LOGIN IN ROLE pg_read_all_stats;
		CREATE DATABASE shop;
	});
	$n->safe_psql('shop', qq{
		CREATE EXTENSION fencing;
		GRANT CREATE ON DATABASE shop TO alice, mallory;
		SET ROLE mallory;
		CREATE SCHEMA mal;
		GRANT USAGE ON SCHEMA mal TO PUBLIC;
		-- her domains and functions, harmless for now
		CREATE FUNCTION mal.g(v int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
		    AS \$\$ BEGIN RETURN true; END \$\$;
		CREATE FUNCTION mal.v(v int) RETURNS boolean LANGUAGE plpgsql VOLATILE
		    AS \$\$ BEGIN RETURN true; END \$\$;
		CREATE DOMAIN mal.acct AS int CHECK (VALUE IS NOT NULL AND mal.g(1));
		CREATE DOMAIN mal.vacct AS int CHECK (mal.v(VALUE));
		CREATE FUNCTION mal.dflt() RETURNS text LANGUAGE plpgsql
		    AS \$\$ BEGIN RETURN 'note'; END \$\$;
		CREATE FUNCTION mal.current_tenant() RETURNS text LANGUAGE plpgsql STABLE
		    AS \$\$ BEGIN RETURN 't1'; END \$\$;
		CREATE FUNCTION mal.side(v int) RETURNS text LANGUAGE plpgsql IMMUTABLE
		    AS \$\$ BEGIN RETURN ''; END \$\$;
		CREATE FUNCTION mal.norm(t text) RETURNS text LANGUAGE sql IMMUTABLE
		    AS \$\$ SELECT lower(t) || mal.side(1) \$\$;
		CREATE TABLE mal.currencies (code text PRIMARY KEY);
		INSERT INTO mal.currencies VALUES ('EUR'), ('USD');
		GRANT REFERENCES ON mal.currencies TO alice;
		CREATE TABLE mal.own (id int);
		RESET ROLE;

		SET ROLE alice;
		CREATE SCHEMA a;
		GRANT USAGE ON SCHEMA a TO bob;
		-- 1, 2, 3: a key-scope ledger keyed by mallory's domain
		CREATE TABLE a.ledger (acct mal.acct, cents int, fence fencing.fence);
		SELECT fencing.protect('a.ledger', key_columns => '{acct}');
		-- 4: a row-scope table with mallory's domain on another column
		CREATE TABLE a.pay (id int PRIMARY KEY, acct mal.acct, state text, fence fencing.fence);
		INSERT INTO a.pay VALUES (1, 1, 'new', '0:10');
		SELECT fencing.protect('a.pay');
		-- 5: a table-scope table whose column default is mallory's
		CREATE TABLE a.notes (id int, note text DEFAULT mal.dflt(), fence fencing.fence);
		SELECT fencing.protect('a.notes', key_columns => '{}');
		-- 6: a policy calling mallory's function
		CREATE TABLE a.orders (id int PRIMARY KEY, tenant text, state text, fence fencing.fence);
		INSERT INTO a.orders VALUES (1, 't1', 'new', '0:10');
		SELECT fencing.protect('a.orders');
		ALTER TABLE a.orders ENABLE ROW LEVEL SECURITY;
		CREATE POLICY tenant ON a.orders USING (tenant = mal.current_tenant());
		-- 7: an index on mallory's function
		CREATE TABLE a.docs (id int PRIMARY KEY, note text, fence fencing.fence);
		CREATE INDEX ON a.docs (mal.norm(note));
		INSERT INTO a.docs VALUES (1, 'x', '0:10');
		SELECT fencing.protect('a.docs');
		-- 8b: a key-scope ledger keyed by mallory's volatile domain
		CREATE TABLE a.vledger (acct mal.vacct, cents int, fence fencing.fence);
		SELECT fencing.protect('a.vledger', key_columns => '{acct}');
		-- 9: a ledger whose rows follow mallory's currencies
		CREATE TABLE a.fx (acct int, currency text REFERENCES mal.currencies
		                       ON UPDATE CASCADE ON DELETE CASCADE,
		                   cents int, fence fencing.fence);
		SELECT fencing.protect('a.fx', key_columns => '{acct}');
		-- 10: tenants of one ledger under row security
		CREATE TABLE a.tenants (tenant text, acct text, cents int, fence fencing.fence);
		SELECT fencing.protect('a.tenants', key_columns => '{acct}');
		ALTER TABLE a.tenants ENABLE ROW LEVEL SECURITY;
		CREATE POLICY own ON a.tenants USING (tenant = 't1');
		-- the session's own routines
		CREATE TABLE a.plain (id int PRIMARY KEY, note text, fence fencing.fence);
		INSERT INTO a.plain VALUES (1, 'new', '0:1');
		SELECT fencing.protect('a.plain');
		CREATE FUNCTION a.pay_with(t text, what text) RETURNS text LANGUAGE plpgsql AS \$\$
		BEGIN
		    PERFORM fencing.set_token(t::fencing.fence);
		    UPDATE a.plain SET note = what WHERE id = 1;
		    RETURN current_setting('fencing.token');
		END \$\$;
		CREATE PROCEDURE a.book(t1 text, t2 text) LANGUAGE plpgsql AS \$\$
		BEGIN
		    PERFORM fencing.set_token(t1::fencing.fence);
		    UPDATE a.plain SET note = 'booked ' || t1 WHERE id = 1;
		    COMMIT;
		    SET LOCAL fencing.token = '0:0';
		    PERFORM set_config('fencing.token', t2, true);
		    UPDATE a.plain SET note = 'booked ' || t2 WHERE id = 1;
		END \$\$;
		GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA a TO bob;
		GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA a TO bob;
		GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA a TO bob;
		SELECT fencing.lease_acquire('payouts', 'host-a.internal:pid=4711', '1 hour');
		RESET ROLE;

		-- alice's first writes, at 0:10
		BEGIN;
		SET LOCAL fencing.token = '0:10';
		INSERT INTO a.ledger VALUES (1, 100);
		INSERT INTO a.notes (id) VALUES (1);
		INSERT INTO a.vledger VALUES (1, 100);
		INSERT INTO a.fx VALUES (1, 'EUR', 100), (2, 'USD', 100);
		INSERT INTO a.tenants VALUES ('t2', 'SECRET-T2-ACCT-99', 7);
		COMMIT;
	});
	return;
}

# What makes mallory's code hostile: each function now sets the token.
sub arm
{
	my ($n) = @_;
	$n->safe_psql('shop', qq{
		SET ROLE mallory;
		CREATE OR REPLACE FUNCTION mal.g(v int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS \$\$
		BEGIN
		    PERFORM set_config('fencing.token', '$max', true);
		    RETURN true;
		END \$\$;
		CREATE OR REPLACE FUNCTION mal.v(v int) RETURNS boolean LANGUAGE plpgsql VOLATILE AS \$\$
		BEGIN
		    PERFORM set_config('fencing.token', '$max', false);
		    RETURN true;
		END \$\$;
		CREATE OR REPLACE FUNCTION mal.dflt() RETURNS text LANGUAGE plpgsql IMMUTABLE AS \$\$
		BEGIN
		    PERFORM set_config('fencing.token', '$max', true);
		    RETURN 'note';
		END \$\$;
		CREATE OR REPLACE FUNCTION mal.current_tenant() RETURNS text LANGUAGE plpgsql STABLE AS \$\$
		BEGIN
		    PERFORM set_config('fencing.token', '$max', true);
		    RETURN 't1';
		END \$\$;
		CREATE OR REPLACE FUNCTION mal.side(v int) RETURNS text LANGUAGE plpgsql IMMUTABLE AS \$\$
		BEGIN
		    PERFORM set_config('fencing.token', '$max', true);
		    RETURN '';
		END \$\$;
		-- any constraint change resets every backend's domain cache
		ALTER TABLE mal.own ADD CHECK (id > 0);
	});
	return;
}

# $sql run in shop by $user in a new connection, errors not stopping it;
# the SQLSTATEs of its errors, in order, and its output.
sub session
{
	my ($n, $user, $sql) = @_;
	my ($ret, $out, $err) = $n->psql('shop', "\\set VERBOSITY verbose\n$sql",
		connstr => $n->connstr('shop') . " user=$user", on_error_stop => 0);
	my @states = ($err =~ /ERROR:\s+([0-9A-Z]{5}):/g);
	return (\@states, $out, $err);
}

# $script sent by pgbench -M extended as $user, once, with the variables
# @vars (name=value); (success, stderr)
sub extended
{
	my ($n, $user, $script, @vars) = @_;
	my $file = PostgreSQL::Test::Utils::tempdir() . '/script.sql';
	PostgreSQL::Test::Utils::append_to_file($file, $script);
	my ($stdout, $stderr) = ('', '');
	my @cmd = ($n->installed_command('pgbench'), '-n', '-t', '1', '-M', 'extended',
		(map { ('-D', $_) } @vars),
		'-f', $file, '-h', $n->host, '-p', $n->port, '-U', $user, 'shop');
	my $ok = IPC::Run::run(\@cmd, '>', \$stdout, '2>', \$stderr);
	return ($ok, $stderr);
}

# Every fence of alice's tables: "table/key=fence ..."  (a.docs by COPY:
# planning a query of it loads its index's expressions, which mallory's
# armed function makes fail)
sub fences
{
	my ($n) = @_;
	my $docs = $n->safe_psql('shop', q{COPY a.docs (id, fence) TO STDOUT});
	$docs =~ s/\t/=/g;
	return $n->safe_psql('shop', q{
		SELECT string_agg(x, ' ' ORDER BY x) FROM (
		    SELECT s.scope_name || '/' || s.key || '=' || s.fence AS x FROM fencing.scopes s
		    UNION ALL SELECT 'pay/' || id || '=' || fence FROM a.pay
		    UNION ALL SELECT 'orders/' || id || '=' || fence FROM a.orders
		    UNION ALL SELECT 'plain/' || id || '=' || fence FROM a.plain) f}) . " docs/$docs";
}

sub no_max
{
	my ($n, $label) = @_;
	unlike(fences($n), qr/\Q$max\E/, "$label: no fence is at mallory's token");
	return;
}

setup($node);
arm($node);
my $before = fences($node);

# 1. the domain of the key column, its immutable check folded by the planner
my ($st, $out, $err) = session($node, 'bob', qq{
	BEGIN;
	SET LOCAL fencing.token = '0:5';
	INSERT INTO a.ledger VALUES (1, -100);
	ROLLBACK;
	INSERT INTO a.ledger VALUES (1, -100);});
is_deeply($st, [ '55P02', '55P02' ],
	'1. domain of the key column: a stale and a tokenless INSERT refused (55P02)') or diag $err;
like($err, qr/cannot be changed while a statement is planned/, '1. ... while it is planned');
is(fences($node), $before, '1. no fence moved');

# 2. the same with set_config(..., false): nothing stays in the session
($st, $out, $err) = session($node, 'bob', qq{
	INSERT INTO a.vledger VALUES (1, -100);
	SELECT 'token:' || current_setting('fencing.token');
	UPDATE a.plain SET note = 'tokenless' WHERE id = 1;
	DELETE FROM a.pay WHERE id = 1;});
is($st->[0], '55P02', '2. a session-level set_config in the domain check is refused') or diag $err;
like($out, qr/^token:$/m, '2. ... and bob\'s session has no token after it');
is_deeply([ @$st[ 1 .. 2 ] ], [ 'SF002', 'SF002' ],
	'2. ... later tokenless UPDATE and DELETE of other tables: SF002') or diag $err;
is(fences($node), $before, '2. no fence moved');

# 3. bob keeps one connection; mallory re-arms the cache of it at will
{
	my $in = '';
	my ($o, $e) = ('', '');
	my $h = IPC::Run::start(
		[ $node->installed_command('psql'), '-X', '-v', 'VERBOSITY=verbose',
		  $node->connstr('shop') . ' user=bob' ],
		'<', \$in, '>', \$o, '2>', \$e);
	my $say = sub {
		my ($sql, $mark) = @_;
		$in .= "$sql\n\\echo $mark\n";
		$h->pump until $o =~ /^$mark$/m;
	};
	$say->(q{INSERT INTO a.ledger VALUES (1, -1);}, 'one');
	$node->safe_psql('shop', q{SET ROLE mallory; ALTER TABLE mal.own ADD CHECK (id < 100);});
	$say->(q{INSERT INTO a.ledger VALUES (1, -2);}, 'two');
	$in .= "\\q\n";
	$h->finish;
	my @s = ($e =~ /ERROR:\s+([0-9A-Z]{5}):/g);
	is_deeply(\@s, [ '55P02', '55P02' ],
		'3. a kept connection: refused before and after mallory resets the domain caches')
	  or diag $e;
	is(fences($node), $before, '3. no fence moved');
}

# 4. mallory's domain on another column of a row-scope table
($st, $out, $err) = session($node, 'bob', q{
	BEGIN; SET LOCAL fencing.token = '0:5';
	UPDATE a.pay SET state = 'paid', acct = 2 WHERE id = 1;
	ROLLBACK;});
is_deeply($st, ['55P02'], '4. a stale UPDATE of a row-scope table refused') or diag $err;
($st, $out, $err) = session($node, 'alice', q{
	BEGIN; SET LOCAL fencing.token = '0:11';
	INSERT INTO a.pay VALUES (2, 1, 'new');
	COMMIT;});
is_deeply($st, ['55P02'], "4. alice's own INSERT is refused rather than written with mallory's token")
  or diag $err;
is(fences($node), $before, '4. no fence moved');

# 5. a column DEFAULT, re-declared IMMUTABLE (the planner folds it)
($st, $out, $err) = session($node, 'bob', q{
	BEGIN; SET LOCAL fencing.token = '0:5';
	INSERT INTO a.notes (id) VALUES (2);
	ROLLBACK;});
is_deeply($st, ['55P02'], '5. a DEFAULT the planner folds: the stale INSERT refused') or diag $err;
is(fences($node), $before, '5. no fence moved');

# 6. a policy's STABLE function, called for a selectivity estimate
($st, $out, $err) = session($node, 'bob', q{
	BEGIN; SET LOCAL fencing.token = '0:5';
	UPDATE a.orders SET state = 'shipped' WHERE id = 1;
	ROLLBACK;});
is_deeply($st, ['55P02'], "6. a policy's function: the stale UPDATE refused") or diag $err;
($st, $out, $err) = session($node, 'bob', q{
	EXPLAIN UPDATE a.orders SET state = 'shipped' WHERE id = 1;
	SELECT 'token:' || current_setting('fencing.token');});
is($st->[0], '55P02', '6. ... a plain EXPLAIN of it does not set the token either') or diag $err;
like($out, qr/^token:$/m, '6. ... and leaves no token');
is(fences($node), $before, '6. no fence moved');

# 7. an index on mallory's function (inlined, folded when the relation
# cache loads the index's expressions)
($st, $out, $err) = session($node, 'bob', q{
	BEGIN; SET LOCAL fencing.token = '0:5';
	UPDATE a.docs SET note = 'y' WHERE id = 1;
	ROLLBACK;});
is_deeply($st, ['55P02'], '7. an index expression: the stale UPDATE refused') or diag $err;
is(fences($node), $before, '7. no fence moved');

# 8b. a VOLATILE domain check, the key sent as a bound parameter: the
# check runs while the server binds it, before any statement of bob's runs
my ($ok, $e8) = extended($node, 'bob', q{\set acct 1
INSERT INTO a.vledger VALUES (:acct, -100);
});
ok(!$ok, '8b. a key bound as a parameter: the tokenless INSERT is not accepted');
like($e8, qr/cannot be changed while a statement is parsed or its parameters are bound/,
	'8b. ... refused while the parameter is bound') or diag $e8;
($ok, $e8) = extended($node, 'bob', q{\set acct 1
SELECT count(*) FROM a.vledger WHERE acct = :acct::mal.vacct;
});
ok(!$ok, '8b. ... and a read with the parameter is refused too') or diag $e8;
($st, $out, $err) = session($node, 'bob', q{SELECT 'token:' || current_setting('fencing.token');});
like($out, qr/^token:$/m, '8b. ... and no token stays in a session');
is(fences($node), $before, '8b. no fence moved');

# 9. a foreign key's action from mallory's own table
($st, $out, $err) = session($node, 'mallory', qq{
	SET fencing.token = '$max';
	UPDATE mal.currencies SET code = 'EURO' WHERE code = 'EUR';
	DELETE FROM mal.currencies WHERE code = 'USD';});
is_deeply($st, [ '42501', '42501' ],
	"9. mallory's cascades into alice's protected ledger are refused (42501)") or diag $err;
like($err, qr/a foreign key's action cannot write protected table "fx" for role "mallory"/,
	'9. ... naming the table and the role');
is(fences($node), $before, '9. no fence moved');
is($node->safe_psql('shop', q{SELECT string_agg(currency, ',' ORDER BY acct) FROM a.fx}),
	'EUR,USD', '9. ... and no row of the ledger moved or went');
# alice, the owner, cascading with her token, is judged by it
($st, $out, $err) = session($node, 'alice', q{
	BEGIN; SET LOCAL fencing.token = '0:12';
	ALTER TABLE a.fx DROP CONSTRAINT fx_currency_fkey;
	ROLLBACK;});
is_deeply($st, [], '9. (alice may still change her own foreign keys)') or diag $err;

# 10. row security: a probe with another tenant's key learns nothing
my %answer;
foreach my $t ('0:1', '0:10', '0:99')
{
	foreach my $k ('SECRET-T2-ACCT-99', 'NO-SUCH-ACCT')
	{
		($st, $out, $err) = session($node, 'bob', qq{
			BEGIN; SET LOCAL fencing.token = '$t';
			INSERT INTO a.tenants VALUES ('t2', '$k', 1);
			ROLLBACK;});
		$answer{"$k $t"} = join(',', @$st);
	}
}
is_deeply([ sort keys %{ { map { $_ => 1 } values %answer } } ], ['42501'],
	"10. every probe of another tenant's key gets the policy's 42501, whatever the key and token")
  or diag explain \%answer;
($st, $out, $err) = session($node, 'bob', q{
	BEGIN; SET LOCAL fencing.token = '0:1';
	INSERT INTO a.tenants VALUES ('t1', 'SECRET-T2-ACCT-99', 1);
	ROLLBACK;});
is_deeply($st, ['SF001'], '10. ... a row the policy lets through still gets SF001') or diag $err;

# 11. lease holders: only the owner, the extension owner, superusers and
# pg_read_all_stats see them
is($node->safe_psql('shop', q{SET ROLE mallory;
	SELECT coalesce(holder, '-') || ' ' || coalesce(token::text, '-') FROM fencing.lease_status}),
	'- -', '11. mallory sees neither holder nor token');
like($node->safe_psql('shop', q{SET ROLE auditor;
	SELECT holder FROM fencing.lease_status}), qr/^host-a\.internal:pid=4711$/,
	'11. a member of pg_read_all_stats sees the holder');
is($node->safe_psql('shop', q{SET ROLE alice;
	SELECT holder FROM fencing.lease_status}), 'host-a.internal:pid=4711',
	"11. the lease's owner sees it");

# What the session itself still does
($st, $out, $err) = session($node, 'bob', q{
	BEGIN; SET LOCAL fencing.token = '0:2'; UPDATE a.plain SET note = 'set local' WHERE id = 1; COMMIT;
	BEGIN; SELECT set_config('fencing.token', '0:3', true); UPDATE a.plain SET note = 'set_config' WHERE id = 1; COMMIT;
	BEGIN; SELECT fencing.set_token('0:4') IS NOT NULL; UPDATE a.plain SET note = 'set_token' WHERE id = 1; COMMIT;
	SELECT a.pay_with('0:5', 'by name');
	DO $$ BEGIN PERFORM fencing.set_token('0:6'); UPDATE a.plain SET note = 'do' WHERE id = 1; END $$;
	CALL a.book('0:7', '0:8');
	SELECT note, fence FROM a.plain;});
is_deeply($st, [], "the session's own ways all work") or diag $err;
like($out, qr/booked 0:8\|0:8/, '... the last one, a procedure with COMMIT inside, wrote 0:8');
($ok, $e8) = extended($node, 'bob', q{SELECT a.pay_with(:t, 'bound');
}, 't=0:9');
ok($ok, 'a routine called by name with a bound parameter sets the token') or diag $e8;
is($node->safe_psql('shop', 'SELECT fence FROM a.plain'), '0:9', '... and wrote with it');
($st, $out, $err) = session($node, 'bob', q{
	BEGIN;
	INSERT INTO a.plain VALUES (2, a.pay_with('0:20', 'inside'));
	ROLLBACK;});
is_deeply($st, ['55P02'], 'a routine called from inside a write cannot set the token') or diag $err;

# the connection's options are the session's own
my ($r, $o2, $e2) = $node->psql('shop', q{UPDATE a.plain SET note = 'option' WHERE id = 1},
	connstr => $node->connstr('shop') . q{ user=bob options='-c fencing.token=0:30'});
is($r, 0, 'fencing.token in the connection options writes') or diag $e2;
like($e2, qr/was set for the whole session/,
	'... with the once-per-session WARNING that it is a session-level token');

# 8. without the preload
setup($bare);
arm($bare);
my $bare_before = fences($bare);
($st, $out, $err) = session($bare, 'bob', q{
	BEGIN; SET LOCAL fencing.token = '0:5';
	INSERT INTO a.vledger VALUES (2, -100);
	ROLLBACK;});
ok(scalar(@$st) == 1 && $st->[0] =~ /^(55000|55P02)$/,
	'8. no preload: a placeholder set by mallory\'s check is never bob\'s token') or diag $err;
is(fences($bare), $bare_before, '8. no fence moved');
($st, $out, $err) = session($bare, 'bob', q{
	BEGIN; SET LOCAL fencing.token = '0:11';
	UPDATE a.plain SET note = 'raw' WHERE id = 1;
	ROLLBACK;});
is_deeply($st, ['55000'], '8. no preload: a raw SET LOCAL before any fencing call fails closed')
  or diag $err;
like($err, qr/HINT:.*shared_preload_libraries.*fencing\.set_token/s,
	'8. ... with a HINT naming both remedies');
($st, $out, $err) = session($bare, 'bob', q{
	BEGIN; SELECT fencing.set_token('0:11');
	UPDATE a.plain SET note = 'set_token' WHERE id = 1;
	COMMIT;
	BEGIN; SET LOCAL fencing.token = '0:12';
	UPDATE a.plain SET note = 'set local' WHERE id = 1;
	COMMIT;});
is_deeply($st, [], '8. no preload: set_token() loads the library and works; SET LOCAL after it too')
  or diag $err;
is($bare->safe_psql('shop', 'SELECT fence FROM a.plain'), '0:12', '8. ... and wrote');

# no crash anywhere
foreach my $n ($node, $bare)
{
	my $log = slurp_file($n->logfile);
	unlike($log, qr/terminated by signal|TRAP:/, $n->name . ': no backend crashed');
}

done_testing();
