# Idempotency keys across a crash and across pg_dump/restore.
#
# A multi-step request (the refund of the incident) claims its key,
# calls the payment service and checkpoints; the server crashes.  After
# the restart the claim's lease runs out, a new worker resumes from the
# recovery point, the old worker's late completion is refused, and the
# refund is booked exactly once.  Then a dump restored into a new
# database keeps every recorded result: a replay there returns "done"
# with the same result, and no claim token is issued twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('idem');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->start;

$node->safe_psql('postgres', q{
	CREATE EXTENSION fencing;
	CREATE TABLE refunds (id text PRIMARY KEY, psp_ref text NOT NULL);
});

my $request = q{'{"refund": 8842, "amount_cents": 1250}'};

# Run a query; return (exit code, stdout, stderr).
sub run_sql
{
	my ($db, $sql) = @_;
	my ($out, $err) = ('', '');
	my $rc = $node->psql($db, $sql, stdout => \$out, stderr => \$err);
	return ($rc, $out, $err);
}

# Worker A: claim, call the payment service, checkpoint (each committed).
my ($state, $token_a) = split /\|/, $node->safe_psql('postgres',
	"SELECT state, token FROM fencing.idem_begin('refund:8842', $request, lease => '3 seconds')");
is($state, 'started', 'worker A starts the request');
$node->safe_psql('postgres',
	"SELECT fencing.idem_checkpoint('refund:8842', '$token_a', 'psp:re_123')");

# Crash.
$node->stop('immediate');
$node->start;

is( $node->safe_psql('postgres',
		"SELECT state || ' ' || claim || ' ' || recovery_point FROM fencing.idempotency_keys WHERE key = 'refund:8842'"),
	"running $token_a psp:re_123",
	'the claim and its recovery point survive the crash');

# Until the lease runs out, nobody else may take the key.
my ($rc, $out, $err) = run_sql('postgres',
	"SELECT state FROM fencing.idem_begin('refund:8842', $request, wait => false)
	  WHERE clock_timestamp() < (SELECT locked_until FROM fencing.idempotency_keys WHERE key = 'refund:8842')");
ok($rc == 0 || $err =~ /is in progress/,
	'while the lease is live the key is in progress (or the lease already ran out)');

# Wait for the lease to run out.
$node->poll_query_until('postgres',
	"SELECT locked_until < clock_timestamp() FROM fencing.idempotency_keys WHERE key = 'refund:8842'")
  or die 'the lease never ran out';

# Worker B resumes with a higher claim and the recovery point.
my ($state_b, $token_b, $recovery) = split /\|/, $node->safe_psql('postgres',
	"SELECT state, token, recovery_point FROM fencing.idem_begin('refund:8842', $request)");
is($state_b, 'resumed', 'worker B resumes after the lease ran out');
is($recovery, 'psp:re_123', 'worker B learns how far A got');
is( $node->safe_psql('postgres',
		"SELECT '$token_b'::fencing.fence OPERATOR(fencing.>) '$token_a'::fencing.fence"),
	't', 'worker B holds a higher claim');

# A third worker is told the key is in progress.
($rc, $out, $err) = run_sql('postgres',
	"SELECT state FROM fencing.idem_begin('refund:8842', $request, wait => false)");
like($err, qr/idempotency key "refund:8842" is in progress/, 'a third worker gets SF004');

# Worker A wakes up and tries to book the refund and complete: refused,
# and its booking is rolled back with it.
($rc, $out, $err) = run_sql('postgres', qq{
	BEGIN;
	INSERT INTO refunds VALUES ('r-8842', 'psp:re_123');
	SELECT fencing.idem_complete('refund:8842', '$token_a', '{"refund_id": "r-8842", "by": "A"}');
	COMMIT;
});
like($err, qr/stale fence token \Q$token_a\E for idempotency key "refund:8842"/,
	'the old owner cannot complete');

# Worker B books it and completes, in one transaction.
$node->safe_psql('postgres', qq{
	BEGIN;
	INSERT INTO refunds VALUES ('r-8842', 'psp:re_123');
	SELECT fencing.idem_complete('refund:8842', '$token_b', '{"refund_id": "r-8842", "by": "B"}');
	COMMIT;
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM refunds'), '1',
	'the refund is booked exactly once');
is( $node->safe_psql('postgres',
		"SELECT state || ' ' || result::text FROM fencing.idem_begin('refund:8842', $request)"),
	'done {"by": "B", "refund_id": "r-8842"}',
	'a retry replays B\'s result');

# More keys for the dump: one done, one still running, and the epoch
# reached by the sequence.
my ($s2, $token2) = split /\|/, $node->safe_psql('postgres',
	"SELECT state, token FROM fencing.idem_begin('order:1', '{\"sku\": \"A\"}')");
$node->safe_psql('postgres',
	"SELECT fencing.idem_complete('order:1', '$token2', '{\"order_id\": 17}')");
my ($s3, $token3) = split /\|/, $node->safe_psql('postgres',
	"SELECT state, token FROM fencing.idem_begin('order:2', '{\"sku\": \"B\"}', lease => '1 hour')");

# pg_dump and restore into a new database.
my $dump = $node->basedir . '/idem.sql';
command_ok([ 'pg_dump', '-d', $node->connstr('postgres'), '-f', $dump ],
	'pg_dump of the database');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('restored'), '-f', $dump ],
	'restore into a new database');

is( $node->safe_psql('restored',
		"SELECT state || ' ' || result::text FROM fencing.idem_begin('refund:8842', $request)"),
	'done {"by": "B", "refund_id": "r-8842"}',
	'after restore, a replay returns done with the same result');
is( $node->safe_psql('restored',
		"SELECT state || ' ' || result::text FROM fencing.idem_begin('order:1', '{\"sku\": \"A\"}')"),
	'done {"order_id": 17}',
	'after restore, another recorded result replays');
($rc, $out, $err) = run_sql('restored',
	"SELECT state FROM fencing.idem_begin('order:1', '{\"sku\": \"Z\"}')");
like($err, qr/was already used with a different request/,
	'after restore, the fingerprint still guards the key (SF003)');
($rc, $out, $err) = run_sql('restored',
	"SELECT state FROM fencing.idem_begin('order:2', '{\"sku\": \"B\"}', wait => false)");
like($err, qr/is in progress/, 'after restore, a running claim keeps its lease (SF004)');
is( $node->safe_psql('restored',
		"SELECT claim FROM fencing.idempotency_keys WHERE key = 'order:2'"),
	$token3, 'after restore, the running claim is the same');
is( $node->safe_psql('restored', qq{
		SELECT fencing.epoch(token) > fencing.epoch('$token3')
		  FROM fencing.idem_begin('order:3', '{}')}),
	't', 'after restore, new claims continue above every dumped claim');
is( $node->safe_psql('restored', 'SELECT count(*) FROM refunds'), '1',
	'after restore, the refund is still booked once');

$node->stop;
done_testing();
