# The guard's memory does not grow with the number of rows a statement
# writes.
#
# Statements write N and then 4N rows through the guard:
# - an UPDATE of a table protected in row scope (fencing.token set);
# - an UPDATE of a table protected in key scope (1,000 keys);
# - a COPY FROM into a table protected in key scope (1,000 keys, each
#   advanced in fencing.scopes by the first row that has it and re-checked
#   by every later row: "one token, one transaction").
# Each has a control: an unprotected twin table with the same rows, written
# by the same statement with the same fence values, through a BEFORE ROW
# trigger that allocates nothing per row of its own (a C trigger,
# suppress_redundant_updates_trigger, for the UPDATEs; a PL/pgSQL trigger
# returning NEW for the COPY, which needs a BEFORE INSERT trigger to take
# COPY's row-at-a-time path as the guarded table does).
#
# The memory is read at a fixed point, not sampled while the statement
# runs: an AFTER STATEMENT trigger on the written table copies the
# backend's own memory contexts (pg_backend_memory_contexts) into a table.
# It fires once every row is written, before the executor frees the
# statement's memory, so whatever per-row allocation was kept until the
# end of the statement is in its figures, whatever the machine's load.
# The figure compared is the backend's used memory (used_bytes over every
# context): allocations, not the blocks that hold them, which grow in steps
# of up to 8 MB and so hide or invent megabytes.
#
# The guard's own memory is the guarded statement's minus its control's;
# from N to 4N rows it must grow by less than 1 byte per extra row (a
# leaked pointer costs 16 bytes a row or more).  The COPY must also be flat
# on its own.
#
# PostgreSQL itself (15.20 and 18.6 alike) keeps 32 bytes of ExecutorState
# per row that an UPDATE writes through any BEFORE ROW UPDATE trigger
# (ExecBRUpdateTriggers computes the updated columns' bitmaps for every row
# in the statement's memory): a 1,000,000-row UPDATE of a protected table
# holds 32 MB until it ends, as it would with any other such trigger.  The
# controls show it; it is reported, not judged.
#
# FENCING_MEMORY_ROWS is 4N: 400,000 by default, 1,000,000 with
# FENCING_LONG=1.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $big = $ENV{FENCING_MEMORY_ROWS} // ($ENV{FENCING_LONG} ? 1000000 : 400000);
my $small = int($big / 4);

my $node = PostgreSQL::Test::Cluster->new('memory');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'fencing'
fsync = off
synchronous_commit = off
max_wal_size = 4GB
checkpoint_timeout = 30min
autovacuum = off
});
$node->start;

# the COPY files, where the server can read them
my $dir = $node->basedir;
foreach my $n ($small, $big)
{
	open my $fh, '>', "$dir/k$n.tsv" or die $!;
	print $fh 'key-' . ($_ % 1000) . "\t$_\n" for 1 .. $n;
	close $fh;
}

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION fencing;

-- the backend's memory contexts, copied at the end of a statement
CREATE TABLE memory_probe (label text, name text, ident text, level int,
    used bigint, total bigint);
CREATE FUNCTION memory_probe() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN
    INSERT INTO memory_probe
        SELECT current_setting('memtest.label'), name, ident, level, used_bytes, total_bytes
        FROM pg_backend_memory_contexts;
    RETURN NULL;
END \$\$;
CREATE FUNCTION return_new() RETURNS trigger LANGUAGE plpgsql AS
    'BEGIN RETURN NEW; END';

-- row scope, and its control
CREATE TABLE r (id int PRIMARY KEY, v int NOT NULL, fence fencing.fence)
    WITH (fillfactor = 50);
INSERT INTO r SELECT g, 0, NULL FROM generate_series(1, $big) g;
CREATE TABLE r_control (LIKE r INCLUDING ALL) WITH (fillfactor = 50);
INSERT INTO r_control SELECT * FROM r;
SELECT fencing.protect('r');

-- key scope, and its control
CREATE TABLE kr (id int PRIMARY KEY, key text NOT NULL, v int NOT NULL,
    fence fencing.fence) WITH (fillfactor = 50);
INSERT INTO kr SELECT g, 'key-' || g % 1000, 0, NULL FROM generate_series(1, $big) g;
CREATE TABLE kr_control (LIKE kr INCLUDING ALL) WITH (fillfactor = 50);
INSERT INTO kr_control SELECT * FROM kr;
SELECT fencing.protect('kr', key_columns => '{key}');

CREATE TRIGGER control BEFORE UPDATE ON r_control FOR EACH ROW
    EXECUTE FUNCTION suppress_redundant_updates_trigger();
CREATE TRIGGER control BEFORE UPDATE ON kr_control FOR EACH ROW
    EXECUTE FUNCTION suppress_redundant_updates_trigger();

-- COPY in key scope, and its control
CREATE TABLE k (key text NOT NULL, v int NOT NULL, fence fencing.fence);
CREATE TABLE k_control (key text NOT NULL, v int NOT NULL,
    fence fencing.fence DEFAULT '1:1');
SELECT fencing.protect('k', key_columns => '{key}');
CREATE TRIGGER control BEFORE INSERT ON k_control FOR EACH ROW
    EXECUTE FUNCTION return_new();

CREATE TRIGGER probe AFTER UPDATE ON r FOR EACH STATEMENT EXECUTE FUNCTION memory_probe();
CREATE TRIGGER probe AFTER UPDATE ON r_control FOR EACH STATEMENT EXECUTE FUNCTION memory_probe();
CREATE TRIGGER probe AFTER UPDATE ON kr FOR EACH STATEMENT EXECUTE FUNCTION memory_probe();
CREATE TRIGGER probe AFTER UPDATE ON kr_control FOR EACH STATEMENT EXECUTE FUNCTION memory_probe();
CREATE TRIGGER probe AFTER INSERT ON k FOR EACH STATEMENT EXECUTE FUNCTION memory_probe();
CREATE TRIGGER probe AFTER INSERT ON k_control FOR EACH STATEMENT EXECUTE FUNCTION memory_probe();
VACUUM ANALYZE;
});

# Every statement in one session (one backend), each in a transaction of
# its own with the next token: first each kind once on a few rows (caches,
# plans, the guard's per-relation state), then N and 4N rows.  The guarded
# statement and its control write the same fence values, so that their
# tables' rows stay alike.
my $token = 0;
my @cases = (
	[ 'row-scope UPDATE', 'r', 'r_control',
		sub { my ($t, $n, $tok, $ctl) = @_;
			"UPDATE $t SET v = v + 1" . ($ctl ? ", fence = '$tok'" : '') . " WHERE id <= $n;" } ],
	[ 'key-scope UPDATE', 'kr', 'kr_control',
		sub { my ($t, $n, $tok, $ctl) = @_;
			"UPDATE $t SET v = v + 1" . ($ctl ? ", fence = '$tok'" : '') . " WHERE id <= $n;" } ],
	[ 'key-scope COPY', 'k', 'k_control',
		sub { my ($t, $n) = @_; "COPY $t (key, v) FROM '$dir/k$n.tsv';" } ]);
my $sql = "SET memtest.label = 'warm-up';\n";
foreach my $case (@cases)
{
	my ($what, $t, $ctl, $stmt) = @$case;
	$token++;
	$sql .= "BEGIN; SET LOCAL fencing.token = '1:$token'; "
	  . ($t eq 'k' ? "COPY k (key, v) FROM '$dir/k$small.tsv'; ROLLBACK;\n" : $stmt->($t, 1000, "1:$token") . " COMMIT;\n");
	$sql .= "BEGIN; " . ($t eq 'k' ? "COPY k_control (key, v) FROM '$dir/k$small.tsv'; ROLLBACK;\n"
		: $stmt->($ctl, 1000, "1:$token", 1) . " COMMIT;\n");
}
foreach my $case (@cases)
{
	my ($what, $t, $ctl, $stmt) = @$case;
	foreach my $n ($small, $big)
	{
		$token++;
		$sql .= "BEGIN; SET LOCAL fencing.token = '1:$token'; SET LOCAL memtest.label = '$t $n'; "
		  . $stmt->($t, $n, "1:$token") . " COMMIT;\n";
		$sql .= "BEGIN; SET LOCAL memtest.label = '$ctl $n'; "
		  . $stmt->($ctl, $n, "1:$token", 1) . " COMMIT;\n";
	}
}
$node->safe_psql('postgres', $sql);

# label => [used bytes over every context, used bytes of ExecutorState
# contexts, how many contexts]
my %mem;
foreach my $line (split /\n/, $node->safe_psql('postgres', q{
	SELECT label, sum(used), coalesce(sum(used) FILTER (WHERE name = 'ExecutorState'), 0), count(*)
	FROM memory_probe GROUP BY label ORDER BY label}))
{
	my ($label, $used, $executor, $n) = split /\|/, $line;
	$mem{$label} = [ $used, $executor, $n ];
}

foreach my $case (@cases)
{
	my ($what, $t, $ctl) = @$case;
	foreach my $n ($small, $big)
	{
		foreach my $label ("$t $n", "$ctl $n")
		{
			ok(defined $mem{$label} && $mem{$label}[1] > 0,
				"$what: the memory contexts were read inside the statement ($label, its ExecutorState among them)")
			  or $mem{$label} = [ 0, 0, 0 ];
		}
	}
	my ($g1, $g4, $c1, $c4) = map { $mem{$_}[0] } ("$t $small", "$t $big", "$ctl $small", "$ctl $big");
	my $extra = $big - $small;
	my $guard_per_row = (($g4 - $c4) - ($g1 - $c1)) / $extra;
	my $control_per_row = ($c4 - $c1) / $extra;
	note sprintf('%s: used memory at the end of the statement, guarded %d / %d bytes, control %d / %d bytes '
		  . '(%d / %d rows); ExecutorState guarded %d / %d, control %d / %d',
		$what, $g1, $g4, $c1, $c4, $small, $big, map { $mem{$_}[1] } ("$t $small", "$t $big", "$ctl $small", "$ctl $big"));
	note sprintf('%s: the control itself keeps %.2f bytes per extra row (PostgreSQL\'s own)', $what, $control_per_row);
	cmp_ok($guard_per_row, '<', 1,
		sprintf('%s: the guard adds < 1 byte per extra row from %d to %d rows (%.3f: %+d bytes over the control for %d rows, %+d for %d)',
			$what, $small, $big, $guard_per_row, $g1 - $c1, $small, $g4 - $c4, $big));
	if ($t eq 'k')
	{
		cmp_ok(($g4 - $g1) / $extra, '<', 1,
			sprintf('%s: the guarded COPY itself keeps < 1 byte per extra row (%.3f)', $what, ($g4 - $g1) / $extra));
	}
}

is( $node->safe_psql('postgres',
		"SELECT count(*) FROM r WHERE fence IS NOT NULL"),
	$big, 'every row updated carries the token the guard wrote');
is( $node->safe_psql('postgres',
		"SELECT count(*) || ' ' || fencing.max(fence)::text FROM fencing.scopes WHERE scope_name = 'public.kr'"),
	"1000 1:" . ($token - 2), 'every key scope of the UPDATE was advanced');
is( $node->safe_psql('postgres',
		"SELECT count(*) || ' ' || fencing.max(fence)::text FROM fencing.scopes WHERE scope_name = 'public.k'"),
	"1000 1:$token", 'every key scope of the COPY was advanced');

$node->stop;
done_testing();
