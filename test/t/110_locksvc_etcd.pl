# Real lock services fencing PostgreSQL: etcd (one member, a child of this
# test on free ports, test/perl/FencingLockSvc.pm), and worker processes
# that take its locks as applications do (test/locksvc/clients: `etcdctl
# lock`, Go's concurrency.Mutex: one protocol, etcd's mutex) and write
# with a new token per transaction, the revision of a put on the holder's
# own lock key (docs/lock-services.md).  A worker is frozen with SIGSTOP,
# tokens in hand, past its lock's TTL while another takes the lock and
# raises its fences; thawed, its writes must get SF001; the new holder
# writes 100 transactions under its one lock.  Then the two workers on one
# lock and one fence, with two revision kinds mixed (the mistake) and with
# put revisions, and a snapshot restore, which lowers revisions, with the
# generation raised and not.  Every step waits for a state etcd reports (a lock key gone), never
# for a fixed time; each scenario prints its timeline as TAP comments.
#
# First, the check that everything the locksvc tests (110-114) use is
# installed.  Needs FENCING_LOCKSVC_PYTHON, FENCING_LOCKSVC_GO_BIN and
# FENCING_LOCKSVC_NODE_MODULES (test/suites/locksvc.sh sets them;
# test/perl/FencingLockSvcTest.pm); FENCING_LOCKSVC_BREAK=guard runs every
# scenario with the guard off: every scenario must then fail.
use strict;
use warnings;
use JSON::PP;
use List::Util qw(max);
use FencingLockSvc;
use FencingLockSvcTest;
use Test::More;

need_env(qw(FENCING_LOCKSVC_PYTHON FENCING_LOCKSVC_GO_BIN FENCING_LOCKSVC_NODE_MODULES));

# ---------------------------------------------------------------- installed
sub out { my ($ok, $out) = FencingLockSvc::run([@_]); chomp $out; return $out; }
my @missing = FencingLockSvc::missing(qw(etcd zookeeper redis pgbouncer go node java));
for my $f ("$ENV{FENCING_LOCKSVC_GO_BIN}/etcdmutex", "$ENV{FENCING_LOCKSVC_GO_BIN}/snippet")
{
	push @missing, "no $f" unless -x $f;
}
push @missing, "no node-postgres in $ENV{FENCING_LOCKSVC_NODE_MODULES}"
  unless -f "$ENV{FENCING_LOCKSVC_NODE_MODULES}/pg/package.json";
push @missing, 'no pgjdbc' unless -f '/usr/share/java/postgresql.jar';
my $psycopg = out($PY, '-c', 'import kazoo, psycopg; print(psycopg.__version__)');
push @missing, "$PY cannot import kazoo and psycopg" unless $psycopg;
my ($etcd_v) = out('etcd', '--version') =~ /^etcd Version: (\S+)/m;
my $redis_v = join ' ', (split / /, out('redis-server', '--version'))[ 0 .. 2 ];
my $dpkg = sub { out('dpkg-query', '-W', '-f=${Version}', $_[0]) };
my $go_v = (split / /, out('go', 'version'))[2] // '';
ok(!@missing,
	    "etcd " . ($etcd_v // '?') . ", ZooKeeper " . $dpkg->('zookeeper')
	  . ", $redis_v, PgBouncer " . $dpkg->('pgbouncer')
	  . ", kazoo, psycopg $psycopg, $go_v with pgx v4 and etcd's clientv3, pgjdbc, node-postgres are installed"
);
diag "missing: $_" for @missing;

setup();

# ---------------------------------------------------------------- etcd
my $etcd = eval { FencingLockSvc::Etcd->start };
if (!$etcd)
{
	fail('etcd starts');
	diag $@;
	finish();
	exit;
}
pass('etcd serves ' . $etcd->url . ' (one member)');
my $snapshot = FencingLockSvc::dir() . '/etcd/early.db';
$etcd->snapshot_save($snapshot);
my $snapshot_rev = $etcd->revision;
ok(-s $snapshot, "an early snapshot of etcd is saved (revision $snapshot_rev)");

my $gone = sub { $etcd->key_gone($_[0]) };
pause_scenario(
	'etcd (etcdctl lock, put revisions)', 'etcd-pause',
	sub { start_etcdctl($etcd, $_[0], 'refunds/etcd-pause') }, $gone,
	'etcdctl lock --ttl=2 refunds/etcd-pause');
pause_scenario(
	'etcd (Go concurrency.Mutex, put revisions)', 'etcd-mutex',
	sub { start_etcdmutex($etcd, $_[0], 'refunds/etcd-mutex-pause') }, $gone,
	'concurrency.Mutex(session TTL 2 s).Lock refunds/etcd-mutex-pause');

# One lock, one number kind per fence.  C holds the lock; A (etcdctl lock)
# and then B (concurrency.Mutex) queue behind it: one queue, the two
# exclude each other.  Fenced with the grant's numbers of two kinds (A the
# grant's Header.Revision, ETCD_LOCK_REV; B its key's CreateRevision), the
# rightful next holder B is refused: A's grant came when C's key went, so
# its header revision is above B's create revision.  Fenced with put
# revisions, as both workers do by default, B writes after A.
note '--- etcd: one lock, two workers, one fence (etcd-mixed) ---';
new_rows('etcd-mixed', 'etcd-mixed-put');
my $keys = sub {
	scalar grep { /\S/ } split /\n/,
	  $etcd->ctl('get', '--prefix', '--keys-only', 'refunds/etcd-mixed');
};
my $kvs = sub { decode_json($etcd->ctl('get', @_, '-w', 'json'))->{kvs} // [] };
my $wc = start_etcdctl($etcd, 'C', 'refunds/etcd-mixed');
locked($wc, 'etcdctl lock refunds/etcd-mixed');
my $wa = start_etcdctl($etcd, 'A', 'refunds/etcd-mixed');
event('etcd', "A's key is queued behind C's")
  if wait_until('A queued', 30, sub { $keys->() == 2 });
my $wb = start_etcdmutex($etcd, 'B', 'refunds/etcd-mixed');
event('etcd', "B's key is queued behind A's")
  if wait_until('B queued', 30, sub { $keys->() == 3 });
# B's key's create revision, read now: the revision its Lock() waits with
my $b_create = max(0, map { $_->{create_revision} } @{ $kvs->('--prefix', 'refunds/etcd-mixed') });
unlock($wc);
my $ga = locked($wa, 'etcdctl lock refunds/etcd-mixed (after C)') // {};
my $a_header = $ga->{lock_rev} // 0;
my $a_create = $ga->{create_revision} // 0;
write_as($wa, 'refund', 'etcd-mixed', 'lockrev');
write_as($wa, 'refund', 'etcd-mixed-put');
unlock($wa);
my $gb = locked($wb, 'concurrency.Mutex.Lock refunds/etcd-mixed (after A)') // {};
my $b_header = $gb->{header_revision} // 0;
my $r = write_as($wb, 'refund', 'etcd-mixed', 'create');
ok($a_header > $b_create,
	"etcd mixed: A's Header.Revision $a_header > B's CreateRevision $b_create although B's grant came after A's"
);
is($r->{result}, 'SF001',
	'etcd mixed: the rightful next holder B, fenced with the other revision kind, is refused (SF001)');
ok($b_create > $a_create && $b_header > $a_header,
	"etcd mixed: with one kind per fence B would win: create $b_create > $a_create, header $b_header > $a_header"
);
$r = write_as($wb, 'refund', 'etcd-mixed-put');
is($r->{result}, 'ok',
	'etcd mixed: fenced with put revisions, as both workers do by default, B writes after A (the hand-written and the Go worker share the fence)'
);
unlock($wb);

# A snapshot restore lowers revisions.  A writes, takes its next token and
# is frozen; etcd is restored from the early snapshot; B's revisions are
# below A's: with the same generation B is refused, after the generation
# is raised (and read at lock time) the new holder C writes and A, thawed,
# is refused with the token it holds.
note '--- etcd: a snapshot restore lowers revisions (etcd-restore) ---';
new_rows('etcd-restore');
$etcd->ctl('put', 'locksvc/bump', $_) for 1 .. 20;
$wa = start_etcdctl($etcd, 'A', 'refunds/etcd-restore');
my $a_rev = (locked($wa, 'etcdctl lock refunds/etcd-restore') // {})->{revision} // 0;
write_as($wa, 'refund', 'etcd-restore');
take_next($wa);
freeze($wa);
$etcd->restore($snapshot);
event('etcd', "stopped, restored from the early snapshot (revision $snapshot_rev), started: revision now "
	  . $etcd->revision);
$wb = start_etcdctl($etcd, 'B', 'refunds/etcd-restore');
my $b_rev = (locked($wb, 'etcdctl lock refunds/etcd-restore') // {})->{revision} // 0;
ok($b_rev < $a_rev, "etcd restore: B's revision $b_rev is below A's $a_rev");
is(write_as($wb, 'refund', 'etcd-restore')->{result},
	'SF001', 'etcd restore, generation not raised: the rightful holder B is refused (SF001)');
unlock($wb);
raise_generation('etcd');
$wc = start_etcdctl($etcd, 'C', 'refunds/etcd-restore');
locked($wc, 'etcdctl lock refunds/etcd-restore');
is(write_as($wc, 'refund', 'etcd-restore')->{result},
	'ok', 'etcd restore, generation raised: the new holder C writes');
unlock($wc);
thaw($wa);
is(write_as($wa, 'refund', 'etcd-restore')->{result},
	'SF001', 'etcd restore: A, thawed with the generation it read at lock time, gets SF001');
my $rows = rows_of('etcd-restore');
is(join(' ', (split / /, $rows)[ 0, 1 ]),
	'C 2', "etcd restore: the row was written by A before the restore, then by C only ($rows)");
$wa->stop;
$etcd->stop;

finish();
