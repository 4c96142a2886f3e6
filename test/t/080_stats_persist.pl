# The counters across restarts: saved at a clean shutdown, loaded at start,
# dropped after a crash, and a bad file ignored with a WARNING.
#
# fencing.stats, fencing.idempotency_stats and fencing.lease_stats survive
# `pg_ctl restart -m fast` (and a stop and start) unchanged, including the
# memory of which lease grants' ends were counted; they are zero after
# `pg_ctl stop -m immediate` (which runs the postmaster's exit hooks with
# status 0 as a clean stop does) and after a crash even when an old file
# is put back.  A corrupt, truncated, empty, foreign or newer-format file
# is ignored with a WARNING naming why, the server starts and counts from
# zero; a file with a valid checksum but absurd contents (fuzzed) never
# crashes it, and a counter past bigint's maximum shows the maximum with a
# warning rather than a wrapped value.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('persist');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->start;

my $file = $node->data_dir . '/pg_stat/fencing.stat';

$node->safe_psql('postgres', q{
	CREATE EXTENSION fencing;
	CREATE TABLE accounts (id int PRIMARY KEY, fence fencing.fence);
	INSERT INTO accounts VALUES (1, NULL), (2, NULL);
	SELECT fencing.protect('accounts');
	CREATE TABLE doomed (id int PRIMARY KEY, fence fencing.fence);
	SELECT fencing.protect('doomed');
	INSERT INTO doomed VALUES (1, '1:1');
});

# Some of everything: accepted, stale and missing writes, idempotency
# outcomes, lease calls and an expiry.
sub activity
{
	my ($n) = @_;
	$node->psql('postgres', qq{
		UPDATE accounts SET fence = '$n:1' WHERE id = 1;
		UPDATE accounts SET fence = '0:1' WHERE id = 1;
		UPDATE accounts SET id = id WHERE id = 2;
	}, on_error_stop => 0);
	$node->psql('postgres', qq{
		SELECT * FROM fencing.idem_begin('k$n', '{"n": $n}');
		SELECT * FROM fencing.idem_begin('k$n', '{"n": $n}', wait => false);
		SELECT * FROM fencing.idem_begin('k$n', '{"other": $n}');
	}, on_error_stop => 0);
	$node->safe_psql('postgres', qq{
		SELECT fencing.lease_acquire('l$n', 'a', '1 hour');
		SELECT fencing.lease_acquire('l$n', 'b', '1 hour');
		SELECT fencing.lease_acquire('short$n', 'a', '10 milliseconds');
		SELECT pg_sleep(0.05);
		SELECT fencing.lease_renew('short$n', '0:1', '1 hour');
	});
}

my $q_all = q{
	SELECT (SELECT string_agg(format('%s:%s/%s/%s/%s', relid, accepted, rejected_stale,
	                                 rejected_missing, bypassed), ' ' ORDER BY relid::text)
	          FROM fencing.stats)
	    || ' | ' || (SELECT format('%s/%s/%s/%s/%s', started, replayed, resumed,
	                               reused_rejected, in_progress_rejected)
	                   FROM fencing.idempotency_stats)
	    || ' | ' || (SELECT format('%s/%s/%s/%s/%s/%s/%s/%s/%s/%s/%s', acquired,
	                               acquire_refused, renewed, renew_failed, released,
	                               release_failed, expired, rejected, hold_count,
	                               round(hold_seconds_sum::numeric, 6),
	                               round(hold_seconds_max::numeric, 6))
	                   FROM fencing.lease_stats)};
my $q_zero = q{
	SELECT (SELECT count(*) FROM fencing.stats)
	    || ' ' || (SELECT started + replayed + resumed + reused_rejected
	                      + in_progress_rejected FROM fencing.idempotency_stats)
	    || ' ' || (SELECT acquired + acquire_refused + renewed + renew_failed
	                      + released + release_failed + expired + rejected
	                      + hold_count FROM fencing.lease_stats)};

sub pg_ctl
{
	my (@args) = @_;
	PostgreSQL::Test::Utils::system_or_bail('pg_ctl', '-w', '-D',
		$node->data_dir, '-l', $node->logfile, @args);
}

# The server log written since $offset.
sub log_since
{
	my ($offset) = @_;
	return substr(slurp_file($node->logfile), $offset);
}

activity(1);
$node->safe_psql('postgres', 'DROP TABLE doomed');
my $before = $node->safe_psql('postgres', $q_all);
like($before, qr/^accounts:1\/1\/1\/0 \| 1\/0\/0\/1\/1 \| 2\/1\/0\/1\/0\/0\/1\/0\/1\/0\.010000\/0\.010000$/,
	'the counters before the restart: a dropped table has no row') or diag $before;
ok(!-e $file, 'while the server runs, no statistics file is in the data directory');

# 1. pg_ctl restart -m fast
my $log_offset = -s $node->logfile;
pg_ctl('-m', 'fast', 'restart');
$node->_update_pid(1);
is($node->safe_psql('postgres', $q_all), $before,
	'pg_ctl restart -m fast: every counter is back, unchanged');
ok(!-e $file, '... and the file was removed once loaded');
unlike(log_since($log_offset), qr/WARNING/, '... without a warning');

# the memory of counted grant ends came back too: the expired lease's end
# is not counted again
$node->safe_psql('postgres', q{SELECT fencing.lease_check('short1', '0:1')});
like($node->safe_psql('postgres', 'SELECT expired FROM fencing.lease_stats'),
	qr/^1$/, 'an expiry counted before the restart is not counted again after it');

# 2. stop and start: the file exists while the server is down
activity(2);
$before = $node->safe_psql('postgres', $q_all);
$node->stop('fast');
ok(-s $file, 'after a clean stop, pg_stat/fencing.stat holds the counters');
ok(!-e "$file.tmp", '... and no temporary file is left');
$node->start;
is($node->safe_psql('postgres', $q_all), $before,
	'stop -m fast and start: every counter is back');

# 3. immediate shutdown: the counters are dropped
$node->stop('immediate');
ok(!-e $file, 'after an immediate shutdown no statistics file is written');
$node->start;
is($node->safe_psql('postgres', $q_zero), '0 0 0',
	'after pg_ctl stop -m immediate every counter is zero');

# 4. a crash with an old file put back: still dropped (the control file
# says the server did not shut down cleanly since it was written)
activity(3);
$node->stop('fast');
my $good = slurp_file($file);
$node->start;
$node->stop('immediate');
write_file($file, $good);
$log_offset = -s $node->logfile;
$node->start;
is($node->safe_psql('postgres', $q_zero), '0 0 0',
	'a file left from before a crash is not loaded');
like(log_since($log_offset), qr/discarding the fencing statistics file .*did not shut down cleanly/,
	'... and the log says why');
ok(!-e $file, '... and it is removed');

# 5. bad files: ignored with a WARNING that names the reason, the server up
activity(4);
$node->stop('fast');
$good = slurp_file($file);
my $len = length($good);
ok($len > 100, "a saved file for the bad-file cases ($len bytes)");

my @bad = (
	[ 'a flipped byte', flip($good, int($len / 2)), qr/Its checksum does not match its contents/ ],
	[ 'a file cut in half', substr($good, 0, int($len / 2)), qr/is not that of a fencing statistics file|truncated or damaged/ ],
	[ 'a file missing its last 10 bytes', substr($good, 0, $len - 10), qr/It has \d+ bytes where its header announces \d+: it is truncated or damaged/ ],
	[ 'a file cut after the header', substr($good, 0, 30), qr/is not that of a fencing statistics file|truncated or damaged/ ],
	[ 'an empty file', '', qr/Its size, 0 bytes, is not that of a fencing statistics file/ ],
	[ 'a foreign file', 'PGDMP' . ("\0" x 200), qr/Its header is not that of a fencing statistics file/ ],
	[ 'a file of another format', put_u32($good, 4, 99), qr/It is in format 99; this version of fencing reads formats 1 and 2/ ],
	[ 'a file with a trailing byte', $good . "\0", qr/truncated or damaged/ ],
	[ 'a header announcing 4 billion tables', put_u32($good, 8, 0xFFFFFFFF), qr/truncated or damaged/ ],
);
my $k = 0;
foreach my $case (@bad)
{
	my ($label, $content, $reason) = @$case;
	write_file($file, $content);
	$log_offset = -s $node->logfile;
	$node->start;
	my $log = log_since($log_offset);
	like($log, qr/WARNING:  ignoring the fencing statistics file "pg_stat\/fencing\.stat"/,
		"$label: ignored with a WARNING");
	like($log, $reason, "$label: ... which says why");
	is($node->safe_psql('postgres', $q_zero), '0 0 0', "$label: the counters start from zero");
	$node->safe_psql('postgres', "UPDATE accounts SET fence = fencing.fence(9, @{[++$k]}) WHERE id = 1");
	is($node->safe_psql('postgres', 'SELECT accepted FROM fencing.stats'), '1',
		"$label: ... and count again");
	ok(!-e $file, "$label: the bad file is removed");
	$node->stop('fast');
}

# 6. a valid checksum over absurd contents: never a crash.  The counters
# are whatever the file says; one past bigint's maximum shows the maximum.
write_file($file, with_crc(put_u64(strip_crc($good), 20, '18446744073709551615')));
$log_offset = -s $node->logfile;
$node->start;
my ($ret, $stdout, $stderr) = $node->psql('postgres', 'SELECT started FROM fencing.idempotency_stats');
is($stdout, '9223372036854775807', 'a counter past bigint\'s maximum shows the maximum');
like($stderr, qr/WARNING:  fencing counter "started" passed the maximum of bigint/,
	'... with a warning, never a negative number');
$node->stop('fast');

srand(42);
my $header = 20;
for my $round (1 .. 5)
{
	# random records, the header and checksum right
	my $body = strip_crc(slurp_file($file));
	my $random = join('', map { chr(int(rand(256))) } 1 .. (length($body) - $header));
	write_file($file, with_crc(substr($body, 0, $header) . $random));
	$node->start;
	($ret, $stdout, $stderr) = $node->psql('postgres', $q_all);
	is($ret, 0, "fuzzed file $round: the server is up and the views answer")
	  or diag $stderr;
	$node->safe_psql('postgres', "SELECT fencing.lease_acquire('fuzz$round', 'a', '1 hour'); SELECT fencing.lease_check('short1', '0:1')");
	$node->stop('fast');
}
unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC|server process .* was terminated/,
	'no server process crashed on any of the files');

# 7. a stale temporary file (a shutdown that died while writing) is
# harmless: the real file is loaded, the leftover overwritten next time
$node->start;
$node->safe_psql('postgres', 'SELECT fencing.stats_reset()');
activity(5);
$before = $node->safe_psql('postgres', $q_all);
$node->stop('fast');
write_file("$file.tmp", 'garbage');
$node->start;
is($node->safe_psql('postgres', $q_all), $before,
	'a leftover temporary file does not stop the saved counters from loading');
$node->stop('fast');
ok(!-e "$file.tmp", '... and the next shutdown leaves none');

done_testing();

# ---------------------------------------------------------------------
# file surgery

sub write_file
{
	my ($path, $content) = @_;
	open(my $fh, '>', $path) or die "could not write $path: $!";
	binmode $fh;
	print $fh $content;
	close $fh;
}

sub flip
{
	my ($s, $at) = @_;
	substr($s, $at, 1) = chr(ord(substr($s, $at, 1)) ^ 0xFF);
	return $s;
}

sub put_u32
{
	my ($s, $at, $v) = @_;
	substr($s, $at, 4) = pack('L', $v);
	return $s;
}

# put a 64-bit value given as a decimal string (native byte order)
sub put_u64
{
	my ($s, $at, $v) = @_;
	substr($s, $at, 8) = pack('Q', $v);
	return $s;
}

sub strip_crc
{
	my ($s) = @_;
	return substr($s, 0, length($s) - 4);
}

# CRC-32C (Castagnoli), as PostgreSQL's pg_crc32c computes it
my @crc_table;

sub crc32c
{
	my ($data) = @_;
	if (!@crc_table)
	{
		for my $i (0 .. 255)
		{
			my $c = $i;
			$c = ($c & 1) ? (0x82F63B78 ^ ($c >> 1)) : ($c >> 1) for 1 .. 8;
			$crc_table[$i] = $c;
		}
	}
	my $crc = 0xFFFFFFFF;
	$crc = $crc_table[($crc ^ $_) & 0xFF] ^ ($crc >> 8) for unpack('C*', $data);
	return $crc ^ 0xFFFFFFFF;
}

sub with_crc
{
	my ($s) = @_;
	return $s . pack('L', crc32c($s));
}
