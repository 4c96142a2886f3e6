# The guard with and without shared_preload_libraries, across restarts.
#
# One server restarted three times: without the preload, with it, and
# without it again.  In each phase the same writes are accepted and refused
# the same way (row and key scope), the fences of the previous phase are
# still there, fencing.stats counts only with the preload (without it:
# 55000 and a HINT to preload), a token SET before the library was loaded
# in a session is never used (55000, without the preload), and a bad
# fencing.token is refused with 22P02: at SET time once the library is
# loaded (always with the preload), and when the library loads in a
# session that set it before (without).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FencingTest;

my $node = PostgreSQL::Test::Cluster->new('restart');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION fencing;
	CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL,
	                       fence fencing.fence);
	INSERT INTO accounts VALUES (1, 0, NULL), (2, 0, NULL);
	SELECT fencing.protect('accounts');
	CREATE TABLE ledger (id int PRIMARY KEY, account int NOT NULL,
	                     amount bigint NOT NULL, fence fencing.fence);
	SELECT fencing.protect('ledger', key_columns => '{account}');
});

my $q_fences = q{
	SELECT (SELECT string_agg(id || '@' || fence, ' ' ORDER BY id) FROM accounts)
	    || ' / ' ||
	       (SELECT string_agg(key || '@' || fence, ' ' ORDER BY key) FROM fencing.scopes)};
my $ledger_id = 0;

# Run the writes of phase $p (tokens of epoch $p); $preload: is it loaded.
sub phase
{
	my ($p, $preload) = @_;
	my $label = "phase $p, " . ($preload ? 'with' : 'without') . ' the preload';
	my $prev = $p - 1;
	my ($state, $err);

	if ($p > 1)
	{
		is($node->safe_psql('postgres', $q_fences),
			"1\@$prev:2 2\@$prev:1 / [\"1\"]\@$prev:2",
			"$label: the fences of the previous phase survived the restart");
	}

	# a valid token set before anything loaded the library: without the
	# preload a placeholder, which any code could have set, never used
	# (55000); fencing.set_token() loads the library and is used
	($state, $err) = FencingTest::sql_error($node, 'postgres', qq{
		SET fencing.token = '$p:1';
		UPDATE accounts SET balance = balance + 1 WHERE id IN (1, 2);});
	if ($preload)
	{
		is($state, '', "$label: a token set first thing in the session is used");
	}
	else
	{
		is($state, '55000',
			"$label: a token SET before the library was loaded is never used (55000)")
		  or diag $err;
		like($err, qr/HINT:.*shared_preload_libraries.*fencing\.set_token/s,
			"$label: ... the HINT names both remedies");
		($state, $err) = FencingTest::sql_error($node, 'postgres', qq{
			BEGIN; SELECT fencing.set_token('$p:1');
			UPDATE accounts SET balance = balance + 1 WHERE id IN (1, 2); COMMIT;});
		is($state, '', "$label: fencing.set_token() first thing in the session is used")
		  or diag $err;
	}

	# accepted
	my @ok = (
		[ 'row scope, token in the column',
		  "UPDATE accounts SET balance = balance + 1, fence = '$p:2' WHERE id = 1" ],
		[ 'row scope, repeat in one transaction',
		  "BEGIN; SELECT fencing.set_token('$p:3'); UPDATE accounts SET balance = 0 WHERE id = 2; UPDATE accounts SET balance = 1 WHERE id = 2; ROLLBACK;" ],
		[ 'key scope INSERT with SET LOCAL',
		  "BEGIN; SELECT fencing.set_token('$p:2'); INSERT INTO ledger VALUES (" . ++$ledger_id . ", 1, 5); COMMIT;" ],
	);
	foreach my $t (@ok)
	{
		($state, $err) = FencingTest::sql_error($node, 'postgres', $t->[1]);
		is($state, '', "$label: $t->[0] is accepted") or diag $err;
	}

	# refused
	my @refused = (
		[ 'row scope, older token', 'SF001',
		  "UPDATE accounts SET balance = 0, fence = '$prev:9' WHERE id = 1" ],
		[ 'row scope, same token in another transaction', 'SF001',
		  "BEGIN; SELECT fencing.set_token('$p:2'); UPDATE accounts SET balance = 0 WHERE id = 1; COMMIT;" ],
		[ 'row scope, no token', 'SF002',
		  'UPDATE accounts SET balance = 0 WHERE id = 1' ],
		[ 'key scope, older token', 'SF001',
		  "BEGIN; SELECT fencing.set_token('$p:1'); INSERT INTO ledger VALUES (1000, 1, 0); COMMIT;" ],
		[ 'key scope, no token', 'SF002',
		  'INSERT INTO ledger VALUES (1000, 1, 0)' ],
		[ 'TRUNCATE', 'SF002', 'TRUNCATE ledger' ],
	);
	foreach my $t (@refused)
	{
		($state, $err) = FencingTest::sql_error($node, 'postgres', $t->[2]);
		is($state, $t->[1], "$label: $t->[0] is refused with $t->[1]");
	}

	# the statistics
	my ($ret, $stdout, $stderr) = $node->psql('postgres', q{
		\set VERBOSITY verbose
		SELECT accepted, rejected_stale, rejected_missing FROM fencing.stats
		 WHERE relid = 'accounts'::regclass});
	if ($preload)
	{
		# accepted: 2 + 1 + 2 (the repeat, rolled back, still counts);
		# stale 1 (the older token; the same token in another transaction
		# is counted as already used), missing 1
		is($stdout, '5|1|1', "$label: fencing.stats counted the writes of accounts");
	}
	else
	{
		isnt($ret, 0, "$label: fencing.stats fails");
		like($stderr, qr/ERROR:  55000: .*shared_preload_libraries.*\n(.*\n)*HINT:  Add fencing to "shared_preload_libraries"/,
			"$label: ... with 55000 and a HINT to preload");
	}

	# a bad token
	($state, $err) = FencingTest::sql_error($node, 'postgres',
		"SET fencing.token = 'not-a-token'");
	if ($preload)
	{
		is($state, '22P02', "$label: a bad fencing.token is refused at SET time");
		like($err, qr/invalid input syntax for type fence: "not-a-token"/,
			"$label: ... naming the bad value");
	}
	else
	{
		# the library is not loaded yet: a placeholder takes any value,
		# and it is checked when the library loads
		is($state, '', "$label: before the library loads, SET takes any value");
		($state, $err) = FencingTest::sql_error($node, 'postgres', q{
			SET fencing.token = 'not-a-token';
			UPDATE accounts SET balance = 0 WHERE id = 1;});
		like($err, qr/WARNING:  22P02: invalid input syntax for type fence: "not-a-token"/,
			"$label: when the guard loads the library, the bad token is reported with 22P02");
		is($state, '22P02', "$label: ... and the write fails with 22P02 too");
		like($err, qr/fencing.token was set before the fencing library was loaded/,
			"$label: ... saying why the bad value was not refused at SET");
		($state) = FencingTest::sql_error($node, 'postgres', q{
			SET fencing.token = 'not-a-token';
			UPDATE accounts SET balance = 0, fence = '9:9' WHERE id = 1;});
		is($state, '22P02',
			"$label: a token in the fence column does not let the write in either");
		($state) = FencingTest::sql_error($node, 'postgres', q{
			SET fencing.token = 'not-a-token';
			UPDATE accounts SET balance = 0, fence = '9:9' WHERE id = 1;
			RESET fencing.token;
			SELECT 1;});
		is($state, '22P02', "$label: ... until fencing.token is set again");
		($state) = FencingTest::sql_error($node, 'postgres', q{
			SELECT '1:1'::fencing.fence;
			SET fencing.token = 'not-a-token';});
		is($state, '22P02',
			"$label: once the library is loaded, a bad token is refused at SET time");
	}
}

phase(1, 0);

$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->restart;
phase(2, 1);

$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$node->restart;
phase(3, 0);

$node->stop;
done_testing();
