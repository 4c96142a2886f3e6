# The monitoring folder with the real tools: Prometheus' postgres_exporter
# with monitoring/postgres-exporter-queries.yaml, and promtool.
#
#   FENCING_CLIENT_EXPORTER   the exporter's program (Debian:
#                             /usr/bin/prometheus-postgres-exporter)
#   FENCING_CLIENT_PROMTOOL   promtool (Debian's prometheus package)
#
# Without them the test is skipped (the monitoring suite installs both and
# sets them).  The exporter runs as a child process of this test on a free
# port of 127.0.0.1, against a cluster of its own (fencing preloaded).  A
# scrape; then the refusals an operator must tell apart: a stale write (a
# lost lock), a token used in a second transaction (a programming error),
# a write with a released lease, a claim taken over, a lease renewal that
# fails and an idempotency key found in progress (SF004); a second scrape,
# in which exactly the counters of those moved, by exactly one, and no
# other fencing counter.  Then
# a guard that stops being intact shows as fencing_guard_intact 0.  Then
# promtool: check rules, test rules (the alerts' unit tests) and check
# metrics (the names of the scraped fencing metrics).  Last, the exporter
# is stopped and nothing of it is left.
use strict;
use warnings;
use File::Copy qw(copy);
use HTTP::Tiny;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $exporter = $ENV{FENCING_CLIENT_EXPORTER};
my $promtool = $ENV{FENCING_CLIENT_PROMTOOL};
plan skip_all => 'FENCING_CLIENT_EXPORTER and FENCING_CLIENT_PROMTOOL name no programs '
  . '(prometheus-postgres-exporter, promtool; the monitoring suite sets them)'
  unless $exporter && -x $exporter && $promtool && -x $promtool;

my $monitoring = 'monitoring';    # make prove_installcheck runs in the tree
-f "$monitoring/postgres-exporter-queries.yaml"
  or BAIL_OUT("no $monitoring/postgres-exporter-queries.yaml under " . `pwd`);

# the output of a command (stdout and stderr together), and whether it
# succeeded
sub run_out
{
	my ($cmd, %opt) = @_;
	my $out = '';
	my $ok = IPC::Run::run($cmd, '<', \($opt{stdin} // ''), '>&', \$out,
		$opt{init} ? (init => $opt{init}) : ());
	return ($ok, $out);
}

my ($v_exporter) = (run_out([ $exporter, '--version' ]))[1] =~ /version (\S+)/;
my ($v_promtool) = (run_out([ $promtool, '--version' ]))[1] =~ /^(\S+ \S+ \S+)/;
ok($v_exporter && $v_promtool,
	"prometheus-postgres-exporter " . ($v_exporter // '?')
	  . " and " . ($v_promtool // '?') . " are installed");

my $node = PostgreSQL::Test::Cluster->new('monitoring');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE shop');
my ($ret) = $node->psql('shop', q{
CREATE EXTENSION fencing;
CREATE TABLE ledger (id bigserial PRIMARY KEY, account text NOT NULL,
                     amount int NOT NULL, fence fencing.fence);
SELECT fencing.protect('ledger', key_columns => '{account}');
CREATE TABLE refunds (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES ('r-1', 'pending', NULL);
SELECT fencing.protect('refunds');
CREATE TABLE settlements (id text PRIMARY KEY, state text, fence fencing.fence);
SELECT fencing.protect('settlements', lease => 'settlements');
-- some history before the first scrape
BEGIN;
SET LOCAL fencing.token = '1:5';
INSERT INTO ledger (account, amount) VALUES ('acct-1', 100);
UPDATE refunds SET state = 'paid' WHERE id = 'r-1';
COMMIT;
SELECT fencing.lease_acquire('payouts', 'worker-a', '1 hour') IS NOT NULL;
SELECT state FROM fencing.idem_begin('refund:r-2', '{"amount": 40}', lease => '1 hour');
-- a lease given up, and a claim given up: their tokens are used below
SELECT fencing.lease_acquire('settlements', 'worker-s', '1 hour') AS settlements \gset
BEGIN;
SET LOCAL fencing.token = :'settlements';
INSERT INTO settlements VALUES ('s-0', 'sent', NULL);
COMMIT;
SELECT fencing.lease_release('settlements', :'settlements');
SELECT token AS claim FROM fencing.idem_begin('refund:r-3', '{"amount": 7}') \gset
SELECT fencing.idem_abandon('refund:r-3', :'claim');
});
is($ret, 0, 'a shop with three protected tables, leases and idempotency keys');

# the exporter, a child of this test, on a free port; its query file in a
# directory of its own, which names this run's exporter
my $dir = PostgreSQL::Test::Utils::tempdir('exporter');
copy("$monitoring/postgres-exporter-queries.yaml", "$dir/queries.yaml") or die "copy: $!";
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $url = "http://127.0.0.1:$port/metrics";
my $user = $ENV{PGUSER} // scalar getpwuid($>);
my $dsn = sprintf('host=%s port=%d user=%s dbname=shop sslmode=disable',
	$node->host, $node->port, $user);
my $h = IPC::Run::start(
	[
		$exporter, "--web.listen-address=127.0.0.1:$port",
		"--extend.query-path=$dir/queries.yaml",
		'--disable-settings-metrics', '--log.level=warn'
	],
	'<', \undef, '>&', "$dir/exporter.log",
	init => sub { $ENV{DATA_SOURCE_NAME} = $dsn });
END { $h->kill_kill if $h && $h->pumpable; }
my $pid = $h->{KIDS}[0]{PID};
my $http = HTTP::Tiny->new(timeout => 30);

sub scrape { my $r = $http->get($url); return $r->{success} ? $r->{content} : undef; }

my $up = 0;
for (1 .. 600)    # up to 2 minutes on a loaded machine
{
	last if $up = defined scrape();
	last unless $h->pumpable;
	usleep(200_000);
}
ok($up, "the exporter serves $url")
  or BAIL_OUT("the exporter did not start:\n" . slurp_file("$dir/exporter.log"));

# the fencing_ lines of one scrape (# HELP, # TYPE and samples)
sub fencing_lines { return join '', grep { /^(# (HELP|TYPE) )?fencing_/ } split /^/m, scrape() // ''; }
# its samples, "name{labels}" => value
sub series
{
	my %s = map { /^(.+) (\S+)$/ ? ($1 => $2) : () } grep { !/^#/ } split /\n/, fencing_lines();
	return \%s;
}
my $before = series();
note "before: $_ $before->{$_}" for sort keys %$before;

# every counter of the views is exported as a Prometheus counter
my $types = fencing_lines();
for my $m (qw(accepted rejected_stale rejected_missing bypassed
	rejected_already_used rejected_lease_expired
	idempotency_started idempotency_replayed idempotency_resumed
	idempotency_reused_rejected idempotency_in_progress_rejected
	idempotency_claim_taken_over
	lease_acquired lease_acquire_refused lease_renewed lease_renew_failed
	lease_released lease_release_failed lease_expired lease_rejected
	lease_holds lease_hold_seconds))
{
	like($types, qr/^# TYPE fencing_${m}_total counter$/m,
		"fencing_${m}_total is exported as a counter");
}
ok((grep { /^fencing_rejected_stale_total\{.*table="public\.ledger"/ } keys %$before),
	'fencing_rejected_stale_total has the table as a label');
like($types, qr/^# TYPE fencing_lease_remaining_seconds gauge$/m,
	'fencing_lease_remaining_seconds is a gauge of the live lease');
my ($remaining) = map { $before->{$_} }
  grep { /^fencing_lease_remaining_seconds\{.*lease="payouts"/ } keys %$before;
ok(defined $remaining && $remaining > 0 && $remaining <= 3600,
	'the live lease has 0 < remaining <= 3600 s (got ' . ($remaining // 'none') . ')');
is(scalar(grep { /^fencing_guard_intact\{/ && $before->{$_} eq '1' } keys %$before),
	3, 'fencing_guard_intact is 1 for the three tables');

# the incident: a stale write (a lost lock), a token used in a second
# transaction (a programming error), a write with a released lease, a
# claim given up and then completed, a renewal that fails, a key in progress
my ($st, $out, $err) = $node->psql('shop', q{
BEGIN;
SET LOCAL fencing.token = '1:3';
INSERT INTO ledger (account, amount) VALUES ('acct-1', 666);
COMMIT;
BEGIN;
SET LOCAL fencing.token = '1:5';
UPDATE refunds SET state = 'paid twice' WHERE id = 'r-1';
COMMIT;
SELECT token AS settlements FROM fencing.leases WHERE name = 'settlements' \gset
BEGIN;
SET LOCAL fencing.token = :'settlements';
INSERT INTO settlements VALUES ('s-1', 'sent', NULL);
COMMIT;
SELECT claim FROM fencing.idempotency_keys WHERE key = 'refund:r-3' \gset
SELECT fencing.idem_complete('refund:r-3', :'claim', '{}');
SELECT fencing.lease_renew('payouts', '0:1', '1 hour');
SELECT * FROM fencing.idem_begin('refund:r-2', '{"amount": 40}', wait => false);
}, on_error_stop => 0, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
# each refusal with its SQLSTATE and reason, in order
my @refused;
for my $error (split /^(?=psql:\S+ ERROR:)/m, $err)
{
	next unless $error =~ /^psql:\S+ ERROR:  (\w{5}):/;
	my $code = $1;
	my ($reason) = $error =~ /^CONSTRAINT NAME:  (\w+)$/m;
	push @refused, "$code/" . ($reason // '');
}
note $err;
is(join(' ', @refused),
	'SF001/stale_token SF001/token_already_used SF001/lease_expired SF001/claim_taken_over SF004/',
	'the incident raised stale_token, token_already_used, lease_expired, claim_taken_over and SF004');
my $after = series();
note "after: $_ $after->{$_}" for sort keys %$after;

# compare the counters (the *_total series) of the two scrapes
my %moved;
for my $k (grep { /_total(\{|$)/ } keys %{ { %$before, %$after } })
{
	my ($was, $now) = ($before->{$k} // 'MISSING', $after->{$k} // 'MISSING');
	$moved{$k} = "$was -> $now" if $was ne $now;
}
note "moved: $_ $moved{$_}" for sort keys %moved;
sub moved_once
{
	my ($re) = @_;
	return grep { /$re/ && $moved{$_} eq '0 -> 1' } keys %moved;
}
ok(moved_once(qr/^fencing_rejected_stale_total\{.*table="public\.ledger"/),
	'fencing_rejected_stale_total of public.ledger moved by exactly 1 (the stale write)');
ok(moved_once(qr/^fencing_rejected_already_used_total\{.*table="public\.refunds"/),
	'fencing_rejected_already_used_total of public.refunds moved by exactly 1 (the token used twice)');
ok(!grep({ /^fencing_rejected_stale_total\{.*table="public\.refunds"/ } keys %moved),
	'... and fencing_rejected_stale_total of public.refunds did not: a programming error is no lost lock');
ok(moved_once(qr/^fencing_rejected_lease_expired_total\{.*table="public\.settlements"/),
	'fencing_rejected_lease_expired_total of public.settlements moved by exactly 1 (the released lease)');
ok(moved_once(qr/^fencing_idempotency_claim_taken_over_total(\{|$)/),
	'fencing_idempotency_claim_taken_over_total moved by exactly 1');
ok(moved_once(qr/^fencing_lease_renew_failed_total(\{|$)/),
	'fencing_lease_renew_failed_total moved by exactly 1');
ok(moved_once(qr/^fencing_idempotency_in_progress_rejected_total(\{|$)/),
	'fencing_idempotency_in_progress_rejected_total moved by exactly 1');
ok(moved_once(qr/^fencing_lease_rejected_total(\{|$)/),
	'fencing_lease_rejected_total moved by exactly 1 (the released lease, in the lease statistics)');
is(scalar(keys %moved), 7, 'no other fencing counter moved (7 moved)');

# the guard's health: an event trigger of the DDL guard not ENABLE ALWAYS
$node->safe_psql('shop', 'ALTER EVENT TRIGGER fencing_ddl_guard_start ENABLE REPLICA');
my $broken = series();
is(scalar(grep { /^fencing_guard_intact\{/ && $broken->{$_} eq '0' } keys %$broken),
	3, 'a guard that is not intact shows as fencing_guard_intact 0');
$node->safe_psql('shop', 'ALTER EVENT TRIGGER fencing_ddl_guard_start ENABLE ALWAYS');

# promtool
my ($ok, $out) = run_out([ $promtool, 'check', 'rules', "$monitoring/fencing-alerts.yml" ]);
note $out;
ok($ok, 'promtool check rules monitoring/fencing-alerts.yml');
($ok, $out) = run_out([ $promtool, 'test', 'rules', 'fencing-alerts.test.yml' ],
	init => sub { chdir $monitoring or die "chdir $monitoring: $!" });
note $out;
ok($ok, 'promtool test rules monitoring/fencing-alerts.test.yml');
($ok, $out) = run_out([ $promtool, 'check', 'metrics' ], stdin => fencing_lines());
note $out if $out ne '';
ok($ok && $out eq '', 'promtool check metrics finds nothing to say about the fencing metrics');

# the test leaves no exporter behind: stopped by its pid, nothing left
# listening on its port, no exporter of this run's directory alive
$h->kill_kill(grace => 10);    # SIGTERM, SIGKILL after 10 s; reaped
ok($pid && !-e "/proc/$pid", "the exporter (pid $pid) is stopped and gone");
ok(!defined scrape(), 'nothing answers on its port any more');
my @left = grep {
	my $c = eval { slurp_file("$_/cmdline") } // '';
	$c =~ /extend\.query-path=\Q$dir\E\//
} glob('/proc/[0-9]*');
is(scalar(@left), 0, 'no exporter of this run is left');

$node->stop;
done_testing();
