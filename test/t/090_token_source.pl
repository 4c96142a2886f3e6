# fencing.token and fencing.bypass come from the writing session only.
#
# One server, first without the preload, then with it.  A value stored
# where the session does not set it -- ALTER DATABASE ... SET, ALTER ROLE
# ... SET (every form), postgresql.conf, ALTER SYSTEM -- is refused with
# 55P02 when the library can check it, and one stored before (the library
# not loaded in the session that stored it) is dropped with a WARNING when
# it is applied: when the library loads (without the preload) or when the
# backend starts or reloads (with it).  Either way a write without a
# session token gets SF002: neither accepted with the stored token, nor
# failed with 22P02 as for a bad token of the session's own.  A value in
# the connection's options is the session's own and is used.  A database
# owner who is not a superuser cannot store one at all.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FencingTest;

my $max = '9223372036854775807:0';

my $node = PostgreSQL::Test::Cluster->new('token_source');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE app LOGIN;
	CREATE ROLE dbo LOGIN;
	CREATE DATABASE appdb OWNER dbo;
});
$node->safe_psql('appdb', q{
	CREATE EXTENSION fencing;
	CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL,
	                       fence fencing.fence);
	INSERT INTO accounts VALUES (1, 0, '1:0');
	SELECT fencing.protect('accounts');
	CREATE TABLE ledger (id serial PRIMARY KEY, account int NOT NULL,
	                     amount bigint NOT NULL, fence fencing.fence);
	INSERT INTO ledger (account, amount, fence) VALUES (1, 0, '1:0');
	SELECT fencing.protect('ledger', key_columns => '{account}');
	GRANT SELECT, INSERT, UPDATE ON accounts, ledger TO app;
	GRANT USAGE ON SEQUENCE ledger_id_seq TO app;
});

# the bootstrap superuser: the OS user that ran initdb (postgres in the
# harness, whoever runs make prove_installcheck otherwise)
my $superuser = $node->safe_psql('postgres', 'SELECT current_user');

# $sql run in appdb by $user, in a new session ($options: its connection
# options); (SQLSTATE or '', stderr).
sub run
{
	my ($user, $sql, $options) = @_;
	my $connstr = $node->connstr('appdb') . " user=$user";
	$connstr .= " options='$options'" if defined $options;
	my ($ret, $out, $err) =
	  $node->psql('appdb', "\\set VERBOSITY verbose\n$sql", connstr => $connstr);
	return ('', $err) if $ret == 0 && $err !~ /ERROR:/;
	return ($1, $err) if $err =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ('?????', $err);
}

# the fences: "accounts/1=E:C ledger/1=E:C"
sub fences
{
	return $node->safe_psql('appdb', q{
		SELECT string_agg(x, ' ' ORDER BY x) FROM (
		    SELECT 'accounts/' || id || '=' || fence AS x FROM accounts
		    UNION ALL
		    SELECT 'ledger/' || (key::jsonb ->> 0) || '=' || fence FROM fencing.scopes
		     WHERE scope_name = 'public.ledger') s});
}

my $tokenless = q{
	UPDATE accounts SET balance = balance + 1 WHERE id = 1;
	INSERT INTO ledger (account, amount) VALUES (1, 1);};

# A stored setting of fencing.token or fencing.bypass, applied to the
# writes of app: each tokenless write still gets SF002, and the WARNING
# names where the value came from.
sub stored_value_ignored
{
	my ($label, $where, $warning) = @_;
	my $before = fences();
	foreach my $sql (split /;\n/, $tokenless)
	{
		next unless $sql =~ /\S/;
		my ($state, $err) = run('app', $sql);
		is($state, 'SF002', "$label: a write without a token still gets SF002 ($where)")
		  or diag $err;
		like($err, qr/WARNING:  55P02: parameter "fencing\.(token|bypass)" cannot be set by \Q$warning\E/,
			"$label: ... and the stored value was dropped with a WARNING ($where)");
	}
	is(fences(), $before, "$label: no fence moved ($where)");
}

# ---------------------------------------------------------------------
# Without the preload: the library loads when a session first needs it
my $label = 'no preload';

is(fences(), 'accounts/1=1:0 ledger/1=1:0', "$label: the fences to begin with");

# Stored by a superuser whose session never loaded the library: PostgreSQL
# keeps it as a placeholder, unchecked
my @stored = (
	[ 'ALTER DATABASE', q{ALTER DATABASE appdb SET fencing.token = '%s'},
	  q{ALTER DATABASE appdb RESET fencing.token}, 'ALTER DATABASE ... SET' ],
	[ 'ALTER ROLE', q{ALTER ROLE app SET fencing.token = '%s'},
	  q{ALTER ROLE app RESET fencing.token}, 'ALTER ROLE ... SET' ],
	[ 'ALTER ROLE IN DATABASE', q{ALTER ROLE app IN DATABASE appdb SET fencing.token = '%s'},
	  q{ALTER ROLE app IN DATABASE appdb RESET fencing.token},
	  'ALTER ROLE ... IN DATABASE ... SET' ],
	[ 'ALTER ROLE ALL', q{ALTER ROLE ALL SET fencing.token = '%s'},
	  q{ALTER ROLE ALL RESET fencing.token}, 'ALTER ROLE ALL ... SET' ],
	[ 'ALTER ROLE ... SET fencing.bypass', q{ALTER ROLE app SET fencing.bypass = on},
	  q{ALTER ROLE app RESET fencing.bypass}, 'ALTER ROLE ... SET' ],
);
foreach my $s (@stored)
{
	my ($what, $set, $reset, $warning) = @$s;
	my ($state, $err) = run($superuser, sprintf($set, $max));
	is($state, '', "$label: $what, the library not loaded: stored as a placeholder")
	  or diag $err;
	stored_value_ignored($label, $what, $warning);
	run($superuser, $reset);
}

# a bad token of the session's own is still 22P02 when the library loads
my ($state, $err) = run('app', "SET fencing.token = 'not-a-token';\n$tokenless");
is($state, '22P02', "$label: a bad token the session set before the library loaded: 22P02")
  or diag $err;

# The connection's options are the session's own
($state, $err) = run('app', 'UPDATE accounts SET balance = balance + 1 WHERE id = 1',
	'-c fencing.token=2:0');
is($state, '', "$label: fencing.token in the connection's options is used") or diag $err;
is(fences(), 'accounts/1=2:0 ledger/1=1:0', "$label: ... and its token was the one accepted");

# A token set in the session before the library was loaded is never taken
# as a token (any code could have set it), also when the library first
# loads inside a trigger (here an AFTER trigger of orders writing the
# ledger): 55000; fencing.set_token() loads the library and is the
# session's own
$node->safe_psql('appdb', q{
	CREATE TABLE orders (id int, account int, cents bigint);
	GRANT INSERT ON orders TO app;
	CREATE FUNCTION book() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	    INSERT INTO ledger (account, amount) VALUES (NEW.account, -NEW.cents);
	    RETURN NULL;
	END $$;
	CREATE TRIGGER book AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION book();
});
($state, $err) = run('app', "SET fencing.token = '2:5';
INSERT INTO orders VALUES (1, 1, 5);");
is($state, '55000',
	"$label: a token SET before the library loaded (inside a trigger) is never used: 55000")
  or diag $err;
($state, $err) = run('app', "BEGIN; SELECT fencing.set_token('2:5');
INSERT INTO orders VALUES (1, 1, 5); COMMIT;");
is($state, '', "$label: a token set with fencing.set_token() is used, inside a trigger too")
  or diag $err;
is(fences(), 'accounts/1=2:0 ledger/1=2:5', "$label: ... and its token was the one accepted");

# A database owner who is not a superuser: PostgreSQL refuses a placeholder
# it cannot check (42501); once the library is loaded, fencing refuses it
($state, $err) = run('dbo', "ALTER DATABASE appdb SET fencing.token = '$max'");
is($state, '42501', "$label: the database owner, library not loaded: 42501 from PostgreSQL")
  or diag $err;
($state, $err) = run('dbo',
	"SELECT '1:0'::fencing.fence; ALTER DATABASE appdb SET fencing.token = '$max'");
is($state, '55P02', "$label: the database owner, library loaded: 55P02") or diag $err;
like($err, qr/cannot be set by ALTER DATABASE \.\.\. SET/, "$label: ... naming ALTER DATABASE");

# ALTER SYSTEM from a session without the library: PostgreSQL 17 and
# later write a parameter they do not know into postgresql.auto.conf, and
# it reaches the sessions at the reload; up to 16 they refuse it (42704)
($state, $err) = run($superuser, "ALTER SYSTEM SET fencing.token = '$max'");
if ($node->pg_version >= 17)
{
	is($state, '', "$label: ALTER SYSTEM, the library not loaded: written") or diag $err;
	$node->reload;
	stored_value_ignored($label, 'ALTER SYSTEM, reloaded', 'postgresql.conf or ALTER SYSTEM');
	run($superuser, 'ALTER SYSTEM RESET fencing.token');
	$node->reload;
}
else
{
	is($state, '42704', "$label: ALTER SYSTEM, the library not loaded: PostgreSQL refuses it")
	  or diag $err;
}
# ALTER SYSTEM from a session that loaded the library: refused
($state, $err) = run($superuser,
	"SELECT '1:0'::fencing.fence; ALTER SYSTEM SET fencing.token = '$max'");
is($state, '55P02', "$label: ALTER SYSTEM, library loaded: 55P02") or diag $err;
($state, $err) = run($superuser,
	"SELECT '1:0'::fencing.fence; ALTER SYSTEM SET fencing.bypass = on");
is($state, '55P02', "$label: ALTER SYSTEM SET fencing.bypass, library loaded: 55P02") or diag $err;

# postgresql.conf
$node->append_conf('postgresql.conf', "fencing.token = '$max'\nfencing.bypass = on\n");
$node->reload;
stored_value_ignored($label, 'postgresql.conf, reloaded', 'postgresql.conf or ALTER SYSTEM');

# Left stored for the next phase: a database default made while the
# library was not loaded
run($superuser, "ALTER DATABASE appdb SET fencing.token = '$max'");
run($superuser, "ALTER ROLE app SET fencing.bypass = on");

# ---------------------------------------------------------------------
# With the preload: the library is there before the backend applies them
$label = 'with the preload';
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->restart;

# the values stored before are dropped when the backend starts
my $before = fences();
($state, $err) = run('app', 'UPDATE accounts SET balance = balance + 1 WHERE id = 1');
is($state, 'SF002', "$label: stored database and role values, a write without a token: SF002")
  or diag $err;
# (at connection, before VERBOSITY is set: no SQLSTATE in the text)
like($err, qr/WARNING:  parameter "fencing\.token" cannot be set by ALTER DATABASE \.\.\. SET/,
	"$label: ... the database's value was dropped at connection with a WARNING");
like($err, qr/WARNING:  parameter "fencing\.bypass" cannot be set by ALTER ROLE \.\.\. SET/,
	"$label: ... and so was the role's bypass");
($state, $err) = run('app', 'SHOW fencing.token');
unlike($err, qr/ERROR/, "$label: SHOW fencing.token works");
is($node->safe_psql('appdb', 'SHOW fencing.token', connstr => $node->connstr('appdb') . ' user=app'),
	'', "$label: ... and shows no token");
is(fences(), $before, "$label: no fence moved");
# the server log has the refusal of postgresql.conf's values
like(slurp_file($node->logfile),
	qr/parameter "fencing\.token" cannot be set by postgresql\.conf or ALTER SYSTEM/,
	"$label: the server logged that postgresql.conf's fencing.token was refused");
run($superuser, 'ALTER DATABASE appdb RESET fencing.token');
run($superuser, 'ALTER ROLE app RESET fencing.bypass');

# now every way of storing one is refused when it is made
foreach my $set (
	"ALTER DATABASE appdb SET fencing.token = '$max'",
	"ALTER ROLE app SET fencing.token = '$max'",
	"ALTER ROLE app IN DATABASE appdb SET fencing.token = '$max'",
	"ALTER ROLE ALL SET fencing.token = '$max'",
	"ALTER SYSTEM SET fencing.token = '$max'",
	'ALTER ROLE app SET fencing.bypass = on',
	'ALTER SYSTEM SET fencing.bypass = on')
{
	($state, $err) = run($superuser, $set);
	is($state, '55P02', "$label: $set: 55P02") or diag $err;
}
($state, $err) = run('dbo', "ALTER DATABASE appdb SET fencing.token = '$max'");
is($state, '55P02', "$label: the database owner: 55P02") or diag $err;
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_db_role_setting
		   WHERE array_to_string(setconfig, ',') LIKE '%fencing.%'}),
	'0', "$label: nothing was stored");

# the connection's options are still the session's own
($state, $err) = run('app', 'UPDATE accounts SET balance = balance + 1 WHERE id = 1',
	'-c fencing.token=3:0');
is($state, '', "$label: fencing.token in the connection's options is used") or diag $err;
is(fences(), 'accounts/1=3:0 ledger/1=2:5', "$label: ... and its token was the one accepted");

$node->stop;
done_testing();
