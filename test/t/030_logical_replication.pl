# Protected tables under logical replication.
#
# Publisher and subscriber both have the extension and the same tables
# protected: accounts in row scope, ledger in key scope (per account).
# Writes accepted on the publisher replicate: the apply worker carries no
# fencing.token and runs with session_replication_role = replica, and the
# guard (enabled ALWAYS) lets it through, because the publisher already
# checked.  Local writes on the subscriber are still guarded: no token is
# SF002, a token older than what replicated is SF001, with or without
# session_replication_role = replica.  And a replicated change never
# lowers a fence of the subscriber: the apply worker gets SF001.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FencingTest;

my $schema = q{
CREATE EXTENSION fencing;
CREATE TABLE accounts (id text PRIMARY KEY, balance bigint NOT NULL,
                       fence fencing.fence);
CREATE TABLE ledger (id bigint PRIMARY KEY, account text NOT NULL,
                     amount bigint NOT NULL, fence fencing.fence);
SELECT fencing.protect('accounts');
SELECT fencing.protect('ledger', key_columns => '{account}');
};

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->start;
my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init(allows_streaming => 'logical');
$sub->start;

$pub->safe_psql('postgres', $schema);
$sub->safe_psql('postgres', $schema);

# rows that exist before the subscription: the initial copy
$pub->safe_psql('postgres', q{
	INSERT INTO accounts VALUES ('acct-1', 100, '1:1'), ('acct-2', 100, '1:1'),
	                            ('acct-3', 100, '1:1');
	BEGIN; SELECT fencing.set_token('1:5');
	INSERT INTO ledger VALUES (1, 'acct-1', 100), (2, 'acct-2', 100);
	COMMIT;
	CREATE PUBLICATION pub FOR TABLE accounts, ledger;
});
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION sub CONNECTION '"
	  . $pub->connstr
	  . " dbname=postgres' PUBLICATION pub");
$sub->wait_for_subscription_sync($pub, 'sub');

my $q_all = q{
	SELECT string_agg(id || '=' || balance || '@' || fence, ' ' ORDER BY id)
	  FROM accounts
	UNION ALL
	SELECT string_agg(id || ':' || account || '=' || amount || '@' || fence, ' ' ORDER BY id)
	  FROM ledger};
is($sub->safe_psql('postgres', $q_all),
	$pub->safe_psql('postgres', $q_all),
	'the initial copy went through the guard of the subscriber');

# Writes with tokens on the publisher: UPDATE, INSERT, DELETE, both scopes
$pub->safe_psql('postgres', q{
	UPDATE accounts SET balance = balance - 10, fence = '2:1' WHERE id = 'acct-1';
	BEGIN; SELECT fencing.set_token('2:2');
	UPDATE accounts SET balance = balance + 10 WHERE id = 'acct-2';
	COMMIT;
	BEGIN; SELECT fencing.set_token('2:3');
	INSERT INTO ledger VALUES (3, 'acct-1', -10), (4, 'acct-1', 5);
	UPDATE ledger SET amount = amount + 1 WHERE id = 1;
	DELETE FROM ledger WHERE id = 4;
	COMMIT;
	BEGIN; SELECT fencing.set_token('2:4');
	INSERT INTO ledger VALUES (5, 'acct-2', 10);
	COMMIT;
	BEGIN; SELECT fencing.set_token('2:5');
	DELETE FROM accounts WHERE id = 'acct-3';
	COMMIT;
});
my ($state) = FencingTest::sql_error($pub, 'postgres',
	"UPDATE accounts SET balance = 0, fence = '2:0' WHERE id = 'acct-1'");
is($state, 'SF001', 'the publisher refuses a stale token');
($state) = FencingTest::sql_error($pub, 'postgres', 'TRUNCATE ledger');
is($state, 'SF002', 'the publisher refuses TRUNCATE of a protected table');
$pub->wait_for_catchup('sub');

is($sub->safe_psql('postgres', $q_all),
	$pub->safe_psql('postgres', $q_all),
	'UPDATE, INSERT and DELETE with tokens replicated, in both scopes');
is( $sub->safe_psql(
		'postgres',
		"SELECT fence FROM accounts WHERE id = 'acct-1'"),
	'2:1',
	'the replicated row carries the publisher\'s token');
my $q_scopes = q{SELECT string_agg(key || '@' || fence, ' ' ORDER BY key)
	FROM fencing.scopes};
is($sub->safe_psql('postgres', $q_scopes),
	$pub->safe_psql('postgres', $q_scopes),
	'the subscriber\'s key scope fences follow the replicated tokens');
is( $sub->safe_psql(
		'postgres', q{
	SELECT count(*) FROM pg_stat_subscription_stats
	 WHERE subname = 'sub' AND apply_error_count + sync_error_count > 0}),
	'0', 'the apply worker met no error');

# The subscriber's own writes are still guarded
my @local = (
	[
		'row scope UPDATE without a token',
		"UPDATE accounts SET balance = 0 WHERE id = 'acct-1'", 'SF002'
	],
	[
		'row scope UPDATE with an older token than replicated',
		"UPDATE accounts SET balance = 0, fence = '2:0' WHERE id = 'acct-1'",
		'SF001'
	],
	[
		'row scope UPDATE with the replicated token',
		"BEGIN; SELECT fencing.set_token('2:1'); UPDATE accounts SET balance = 0 WHERE id = 'acct-1'; COMMIT;",
		'SF001'
	],
	[
		'row scope DELETE without a token',
		"DELETE FROM accounts WHERE id = 'acct-2'", 'SF002'
	],
	[
		'key scope INSERT without a token',
		"INSERT INTO ledger VALUES (10, 'acct-1', 1)", 'SF002'
	],
	[
		'key scope INSERT with an older token than replicated',
		"BEGIN; SELECT fencing.set_token('2:2'); INSERT INTO ledger VALUES (10, 'acct-1', 1); COMMIT;",
		'SF001'
	],
	[
		'key scope UPDATE with an older token than replicated',
		"BEGIN; SELECT fencing.set_token('2:3'); UPDATE ledger SET amount = 0 WHERE id = 5; COMMIT;",
		'SF001'
	],
	[
		'key scope DELETE without a token',
		"DELETE FROM ledger WHERE id = 1", 'SF002'
	],
	[ 'TRUNCATE', 'TRUNCATE ledger', 'SF002' ],);
foreach my $t (@local)
{
	my ($name, $sql, $want) = @$t;
	($state) = FencingTest::sql_error($sub, 'postgres', $sql);
	is($state, $want, "subscriber: $name is refused with $want");
	($state) = FencingTest::sql_error($sub, 'postgres',
		"SET session_replication_role = replica;\n$sql");
	is($state, $want,
		"subscriber: $name is refused with $want under session_replication_role = replica"
	);
}

# a local write with a newer token is accepted (it is guarded, not blocked)
($state) = FencingTest::sql_error($sub, 'postgres', q{
	BEGIN; SELECT fencing.set_token('3:1');
	INSERT INTO ledger VALUES (11, 'acct-9', 1);
	UPDATE accounts SET balance = 1 WHERE id = 'acct-2';
	COMMIT;});
is($state, '', 'subscriber: a local write with a newer token is accepted');

# and replication goes on
$pub->safe_psql('postgres', q{
	BEGIN; SELECT fencing.set_token('2:6');
	INSERT INTO ledger VALUES (6, 'acct-1', 7);
	COMMIT;});
$pub->wait_for_catchup('sub');
is($sub->safe_psql('postgres', 'SELECT fence FROM ledger WHERE id = 6'),
	'2:6', 'replication goes on after the refused local writes');

# A replicated change never lowers a fence of the subscriber.  Each table
# has a subscription of its own, so that each refused change (the apply
# worker then retries it, as PostgreSQL does with a failed apply) holds up
# only its own.
my $lowering = q{
CREATE TABLE r_acc (id text PRIMARY KEY, fence fencing.fence);
CREATE TABLE k_led (id bigint PRIMARY KEY, account text NOT NULL, fence fencing.fence);
SELECT fencing.protect('r_acc');
SELECT fencing.protect('k_led', key_columns => '{account}');
};
$pub->safe_psql('postgres', $lowering . q{
	INSERT INTO r_acc VALUES ('x', '4:1');
	CREATE PUBLICATION pub_r FOR TABLE r_acc;
	CREATE PUBLICATION pub_k FOR TABLE k_led;});
$sub->safe_psql('postgres', $lowering);
foreach my $t ('r', 'k')
{
	$sub->safe_psql('postgres',
		"CREATE SUBSCRIPTION sub_$t CONNECTION '"
		  . $pub->connstr
		  . " dbname=postgres' PUBLICATION pub_$t");
	$sub->wait_for_subscription_sync($pub, "sub_$t");
}
# the subscriber's own writes take its fences beyond the publisher's
$sub->safe_psql('postgres', q{
	UPDATE r_acc SET fence = '6:0' WHERE id = 'x';
	BEGIN; SELECT fencing.set_token('6:0');
	INSERT INTO k_led VALUES (100, 'k');
	COMMIT;});
# then the publisher writes tokens newer than its own fences, older than
# the subscriber's
my $offset = -s $sub->logfile;
$pub->safe_psql('postgres', q{
	UPDATE r_acc SET fence = '5:0' WHERE id = 'x';
	BEGIN; SELECT fencing.set_token('5:0');
	INSERT INTO k_led VALUES (1, 'k');
	COMMIT;});
ok($sub->wait_for_log(qr/ERROR:  stale fence token 5:0 for table "r_acc"/, $offset),
	'the apply worker is refused a change that would lower a row fence (SF001)');
ok($sub->wait_for_log(qr/ERROR:  stale fence token 5:0 for table "k_led"/, $offset),
	'the apply worker is refused a row older than its key scope fence (SF001)');
is($sub->safe_psql('postgres', q{
	SELECT (SELECT fence FROM r_acc WHERE id = 'x') || ' ' ||
	       (SELECT count(*) FROM k_led WHERE id = 1) || ' ' ||
	       (SELECT fence FROM fencing.scopes WHERE scope_name = 'public.k_led')}),
	'6:0 0 6:0', 'the subscriber keeps its fences: no fence lowered, no stale row');
$sub->safe_psql('postgres', 'DROP SUBSCRIPTION sub_r; DROP SUBSCRIPTION sub_k');

$sub->stop;
$pub->stop;
done_testing();
