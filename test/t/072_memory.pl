# The guard's memory does not grow with the number of rows a statement
# writes.
#
# In one session (one backend), statements write N and then 4N rows
# through the guard:
# - an UPDATE of a table protected in row scope (fencing.token set);
# - a COPY FROM into a table protected in key scope (1,000 keys, each
#   advanced in fencing.scopes by the first row that has it and re-checked
#   by every later row: "one token, one transaction").
# While each statement runs, the backend's private memory is sampled from
# /proc/<pid>/status (RssAnon: anonymous memory, which excludes the shared
# buffers the backend touches), and its memory contexts are logged once
# mid-statement (pg_log_backend_memory_contexts, "Grand total").  The
# peak growth over the idle backend for 4N rows must stay below twice that
# for N rows plus 1 MB, and the extra memory per extra row below 2 bytes:
# per-row allocations that leaked into a statement-long context would cost
# dozens of bytes a row.
#
# PostgreSQL 15 itself keeps about 30 bytes of ExecutorState per row that
# an UPDATE writes through any BEFORE ROW trigger (measured here with a C
# trigger, suppress_redundant_updates_trigger, on an unprotected twin
# table; a PL/pgSQL trigger returning NEW costs the same): a 1,000,000-row
# UPDATE of a protected table holds ~30 MB until the statement ends, as it
# would with any other BEFORE ROW trigger.  The UPDATE assertions are on
# what the guard adds to that control.
#
# FENCING_MEMORY_ROWS is 4N: 400,000 by default, 1,000,000 with
# FENCING_LONG=1.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run;
use Test::More;
use Time::HiRes qw(time usleep);

my $big = $ENV{FENCING_MEMORY_ROWS} // ($ENV{FENCING_LONG} ? 1000000 : 400000);
my $small = int($big / 4);

my $node = PostgreSQL::Test::Cluster->new('memory');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'fencing'
log_statement = none
log_min_messages = log
fsync = off
synchronous_commit = off
max_wal_size = 4GB
checkpoint_timeout = 30min
});
$node->start;

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION fencing;
CREATE TABLE r (id int PRIMARY KEY, v int NOT NULL, fence fencing.fence)
    WITH (fillfactor = 50);
INSERT INTO r SELECT g, 0, NULL FROM generate_series(1, $big) g;
SELECT fencing.protect('r');
CREATE TABLE u (LIKE r INCLUDING ALL) WITH (fillfactor = 50);
INSERT INTO u SELECT * FROM r;
-- the control: the same table with a C BEFORE ROW trigger that returns the
-- new row (the rows differ, so it never suppresses one) and allocates
-- nothing per row of its own
CREATE TRIGGER control BEFORE UPDATE ON u FOR EACH ROW
    EXECUTE FUNCTION suppress_redundant_updates_trigger();
CREATE TABLE k (key text NOT NULL, v int NOT NULL, fence fencing.fence);
SELECT fencing.protect('k', key_columns => '{key}');
VACUUM ANALYZE r, u;
});

# the COPY files, where the server can read them
my $dir = $node->basedir;
foreach my $n ($small, $big)
{
	open my $fh, '>', "$dir/k$n.tsv" or die $!;
	print $fh 'key-' . ($_ % 1000) . "\t$_\n" for 1 .. $n;
	close $fh;
}

# one session for everything
my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start(
	[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0', '-d', $node->connstr('postgres') ],
	'<', \$in, '>', \$out, '2>', \$err);

# Run $sql in the session; return the peak RssAnon (kB) seen while it ran,
# and the grand total the memory context dump logged mid-statement.
my $pid;
my $mark = 0;
sub run_sampled
{
	my ($sql, $dump_after) = @_;
	$mark++;
	my $offset = -s $node->logfile;
	$in .= "$sql\n\\echo DONE$mark\n";
	my ($peak, $dumped, $start) = (0, 0, time);
	while ($out !~ /DONE$mark\n/)
	{
		$h->pump_nb;
		if ($pid)
		{
			open my $st, '<', "/proc/$pid/status" or die "no backend $pid";
			while (<$st>)
			{
				$peak = $1 if /^RssAnon:\s+(\d+)/ && $1 > $peak;
			}
			close $st;
			if (defined $dump_after && time - $start > $dump_after * ($dumped + 1))
			{
				# a dump of the backend's memory contexts, every $dump_after s
				$node->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($pid)");
				$dumped++;
			}
		}
		die "psql: $err" if $err =~ /ERROR/;
		usleep(5000);
		die 'timed out' if time - $start > 900;
	}
	$out =~ s/.*DONE$mark\n//s;
	my $total;
	if ($dumped)
	{
		# the largest grand total the dumps logged
		my $log = slurp_file($node->logfile, $offset);
		foreach ($log =~ /Grand total: (\d+) bytes/g)
		{
			$total = $_ if !defined $total || $_ > $total;
		}
	}
	return ($peak, $total, time - $start);
}

$in .= "SELECT pg_backend_pid();\n";
$h->pump_nb until $out =~ /^(\d+)\n/;
$pid = $1;
$out = '';

# warm up: caches, plans, the guard's per-relation state
run_sampled("BEGIN; SET LOCAL fencing.token = '1:0'; UPDATE r SET v = v + 1 WHERE id <= 1000; COMMIT;");
run_sampled("UPDATE u SET v = v + 1 WHERE id <= 1000;");
run_sampled("BEGIN; SET LOCAL fencing.token = '1:0'; COPY k (key, v) FROM '$dir/k$small.tsv'; ROLLBACK;");
my ($idle) = run_sampled('SELECT 1;');

my (@results, %growth);
my $token = 1;
foreach my $case (
	[ 'control UPDATE', sub { "UPDATE u SET v = v + 1 WHERE id <= $_[0];" } ],
	[ 'row-scope UPDATE', sub { "UPDATE r SET v = v + 1 WHERE id <= $_[0];" } ],
	[ 'key-scope COPY',   sub { "COPY k (key, v) FROM '$dir/k$_[0].tsv';" } ])
{
	my ($what, $stmt) = @$case;
	my %peak;
	foreach my $n ($small, $big)
	{
		$token++;
		my ($p, $total, $secs) = run_sampled(
			"BEGIN; SET LOCAL fencing.token = '1:$token'; " . $stmt->($n) . " COMMIT;",
			1);
		$peak{$n} = $p;
		note sprintf('%s of %d rows: %.1f s, peak RssAnon %d kB (idle %d kB), memory contexts mid-statement %s bytes',
			$what, $n, $secs, $p, $idle, $total // '?');
		push @results, [ $what, $n, $p - $idle, $total ];
	}
	my $g1 = $peak{$small} - $idle;
	my $g4 = $peak{$big} - $idle;
	my $per_row = ($peak{$big} - $peak{$small}) * 1024 / ($big - $small);
	$growth{$what} = [ $g1, $g4, $per_row ];
	note sprintf('%s: growth %d kB for %d rows, %d kB for %d rows: %.3f bytes per extra row',
		$what, $g1, $small, $g4, $big, $per_row);
}

# PostgreSQL 15 itself keeps ~30 bytes of ExecutorState per row updated
# through any BEFORE ROW UPDATE trigger (the control shows it; a PL/pgSQL
# trigger returning NEW does the same): what the guard adds must not grow.
my ($c1, $c4, $cper) = @{ $growth{'control UPDATE'} };
my ($r1, $r4, $rper) = @{ $growth{'row-scope UPDATE'} };
cmp_ok($r4 - $c4, '<', 2 * ($r1 - $c1) + 1024,
	"row-scope UPDATE: the guard's own memory for $big rows < 2x that for $small rows (+1 MB): "
	  . ($r4 - $c4) . ' kB vs ' . ($r1 - $c1) . ' kB');
cmp_ok($rper - $cper, '<', 2,
	sprintf('row-scope UPDATE: the guard adds < 2 bytes per extra row (%.3f; the control itself %.3f)',
		$rper - $cper, $cper));
my ($k1, $k4, $kper) = @{ $growth{'key-scope COPY'} };
cmp_ok($k4, '<', 2 * $k1 + 1024,
	"key-scope COPY: memory for $big rows < 2x that for $small rows (+1 MB): $k4 kB vs $k1 kB");
cmp_ok($kper, '<', 2, sprintf('key-scope COPY: < 2 bytes per extra row (%.3f)', $kper));

is( $node->safe_psql('postgres',
		"SELECT count(*) FROM r WHERE fence IS NOT NULL"),
	$big, 'every row updated carries the token the guard wrote');
is( $node->safe_psql('postgres',
		"SELECT count(*) || ' ' || fencing.max(fence)::text FROM fencing.scopes WHERE scope_name = 'public.k'"),
	"1000 1:$token", 'every key scope was advanced');

$in .= "\\q\n";
$h->finish;
$node->stop;
done_testing();
