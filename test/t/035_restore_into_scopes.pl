# A dump restored into a database that already has scopes.
#
# pg_dump of one database (protected tables in key and table scope, a
# partitioned one) restored with pg_restore into another database that
# has protected tables and scopes of its own:
#
#  - scopes of other names: the storage tables are named after their
#    scopes, so the dump's storage tables are new tables there; the
#    restore goes through (but for CREATE SCHEMA fencing), the restored
#    tables refuse stale writes with their restored fences, the target's
#    own fences are untouched, and fencing.protected_tables says every
#    guard is intact;
#  - a scope of the same name with other keys: the two scopes' fences
#    merge; the registry's rows of the dump cannot be restored (its
#    scope names collide), so the restored tables of the other scopes
#    fail closed (SF005), and fencing.protected_tables says so;
#  - storage tables numbered as fencing 1.1 named them, colliding: the
#    restored tables fail closed and fencing.protected_tables says their
#    guard is not intact; the target's own fences are not lowered.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FencingTest;

my $node = PostgreSQL::Test::Cluster->new('restore_scopes');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->start;

my $src_schema = q{
CREATE EXTENSION fencing;
CREATE TABLE ledger (id bigserial PRIMARY KEY, account text NOT NULL, amount bigint,
                     fence fencing.fence);
CREATE TABLE settings (name text PRIMARY KEY, value text, fence fencing.fence);
CREATE TABLE events (tenant text NOT NULL, day date NOT NULL, fence fencing.fence)
    PARTITION BY RANGE (day);
CREATE TABLE events_jan PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2024-02-01');
SELECT fencing.protect('ledger', key_columns => '{account}', scope_name => 'acct');
SELECT fencing.protect('settings', key_columns => '{}');
SELECT fencing.protect('events', key_columns => '{tenant}');
INSERT INTO ledger (account, amount, fence) VALUES ('a', 1, '5:5'), ('b', 1, '6:6');
INSERT INTO settings VALUES ('mode', 'on', '7:7');
INSERT INTO events VALUES ('t1', '2024-01-10', '8:8');
};
my $dst_schema = q{
CREATE EXTENSION fencing;
CREATE TABLE orders (id bigserial PRIMARY KEY, account text NOT NULL, fence fencing.fence);
SELECT fencing.protect('orders', key_columns => '{account}');
INSERT INTO orders (account, fence) VALUES ('a', '2:2'), ('z', '3:3');
};

my $q_health = q{SELECT string_agg(relid::text || '=' || guard_intact, ' ' ORDER BY relid::text)
	FROM fencing.protected_tables};
my $q_dst_own = q{SELECT string_agg(key || '@' || fence, ' ' ORDER BY key)
	FROM fencing.scopes WHERE scope_name = 'public.orders'};

# Restore the dump of src into db; the errors pg_restore reported.
sub restore
{
	my ($dump, $db) = @_;
	my ($stdout, $stderr) = ('', '');
	IPC::Run::run([ 'pg_restore', '-d', $node->connstr($db), $dump ],
		'>', \$stdout, '2>', \$stderr);
	my @errors = ($stderr =~ /ERROR:  (.*)/g);
	return @errors;
}

# The SQLSTATEs of writes to the restored tables: a stale one per table,
# and a newer one
sub probe
{
	my ($db) = @_;
	my @states;
	foreach my $sql (
		"BEGIN; SET LOCAL fencing.token = '5:0'; INSERT INTO ledger (account, amount) VALUES ('a', 2); COMMIT;",
		"UPDATE settings SET value = 'off', fence = '7:0'",
		"INSERT INTO events VALUES ('t1', '2024-01-11', '8:0')",
		"BEGIN; SET LOCAL fencing.token = '9:0'; INSERT INTO ledger (account, amount) VALUES ('a', 3); COMMIT;")
	{
		my ($state) = FencingTest::sql_error($node, $db, $sql);
		push @states, $state eq '' ? 'ok' : $state;
	}
	return join(' ', @states);
}

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', $src_schema);
my $dump = $PostgreSQL::Test::Utils::tmp_check . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('src'), '-f', $dump ],
	'pg_dump -Fc of the source');

# 1. scopes of other names
$node->safe_psql('postgres', 'CREATE DATABASE dst1');
$node->safe_psql('dst1', $dst_schema);
my $before = $node->safe_psql('dst1', $q_dst_own);
my @errors = restore($dump, 'dst1');
is_deeply(\@errors, [ 'schema "fencing" already exists' ],
	'other scope names: the restore reports nothing but the existing schema');
is( $node->safe_psql('dst1',
		q{SELECT string_agg(scope_name || key || '@' || fence, ' ' ORDER BY scope_name, key)
		    FROM fencing.scopes WHERE scope_name <> 'public.orders'}),
	$node->safe_psql('src',
		q{SELECT string_agg(scope_name || key || '@' || fence, ' ' ORDER BY scope_name, key)
		    FROM fencing.scopes}),
	'other scope names: every fence of the dump is restored into its own scope');
is($node->safe_psql('dst1', $q_dst_own), $before,
	'other scope names: the target\'s own fences are untouched');
is($node->safe_psql('dst1', $q_health),
	'events=true ledger=true orders=true settings=true',
	'other scope names: every guard is intact, and says so');
is(probe('dst1'), 'SF001 SF001 SF001 ok',
	'other scope names: the restored tables refuse stale writes');

# 2. a scope of the same name, with other keys
$node->safe_psql('postgres', 'CREATE DATABASE dst2');
$node->safe_psql('dst2', $dst_schema . q{
CREATE TABLE wallets (id bigserial PRIMARY KEY, account text NOT NULL, fence fencing.fence);
SELECT fencing.protect('wallets', key_columns => '{account}', scope_name => 'acct');
INSERT INTO wallets (account, fence) VALUES ('w', '4:4');
});
$before = $node->safe_psql('dst2', $q_dst_own);
@errors = restore($dump, 'dst2');
ok((grep { /duplicate key value violates unique constraint "scope_storage_pkey"/ } @errors),
	'same scope name: the registry of the dump cannot be restored');
is( $node->safe_psql('dst2',
		q{SELECT string_agg(key || '@' || fence, ' ' ORDER BY key) FROM fencing.scopes
		   WHERE scope_name = 'acct'}),
	'["a"]@5:5 ["b"]@6:6 ["w"]@4:4',
	'same scope name: the two scopes\' fences merge');
is($node->safe_psql('dst2', $q_dst_own), $before,
	'same scope name: the target\'s own fences are untouched');
is($node->safe_psql('dst2', $q_health),
	'events=false ledger=true orders=true settings=false wallets=true',
	'same scope name: the tables whose scopes are not registered are not intact, and the view says so');
is(probe('dst2'), 'SF001 SF005 SF005 ok',
	'same scope name: the merged scope refuses stale writes, the others fail closed');

# 3. storage tables numbered as fencing 1.1 named them, colliding
sub number_storage
{
	my ($db) = @_;
	$node->safe_psql($db, q{
		DO $$
		DECLARE r record; n int := 0;
		BEGIN
		    FOR r IN SELECT s.storage, c.relname FROM fencing.scope_storage s
		               JOIN pg_class c ON c.oid = s.storage ORDER BY s.scope_name
		    LOOP
		        n := n + 1;
		        EXECUTE format('ALTER INDEX fencing.%I RENAME TO %I', r.relname || '_key', 'scope_' || n || '_key');
		        EXECUTE format('ALTER TABLE %s RENAME TO %I', r.storage, 'scope_' || n);
		    END LOOP;
		END $$;});
}
$node->safe_psql('postgres', 'CREATE DATABASE src3');
$node->safe_psql('src3', $src_schema);
number_storage('src3');
my $dump3 = $PostgreSQL::Test::Utils::tmp_check . '/src3.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-d', $node->connstr('src3'), '-f', $dump3 ],
	'pg_dump -Fc of a source with numbered storage tables');
$node->safe_psql('postgres', 'CREATE DATABASE dst3');
$node->safe_psql('dst3', $dst_schema);
number_storage('dst3');
$before = $node->safe_psql('dst3', $q_dst_own);
@errors = restore($dump3, 'dst3');
ok((grep { /relation "scope_1" already exists/ } @errors),
	'numbered storage: the dump\'s storage table collides with the target\'s');
is($node->safe_psql('dst3', $q_health),
	'events=false ledger=false orders=true settings=false',
	'numbered storage: the restored tables are not intact, and the view says so');
like($node->safe_psql('dst3',
		q{SELECT problem FROM fencing.protected_tables WHERE relid = 'ledger'::regclass}),
	qr/fencing scope 'acct' is not registered/, '... and why');
is(probe('dst3'), 'SF005 SF005 SF005 SF005',
	'numbered storage: the restored tables fail closed');
my $after = $node->safe_psql('dst3', $q_dst_own);
foreach my $kf (split / /, $before)
{
	my ($key, $fence) = split /@/, $kf;
	my ($now) = $after =~ /\Q$key\E@(\S+)/;
	ok(defined $now && FencingTest::fence_cmp($now, $fence) >= 0,
		"numbered storage: the target's fence of $key is not lowered");
}

$node->stop;
done_testing();
