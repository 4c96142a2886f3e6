# Real lock services fencing PostgreSQL: a three-server ZooKeeper ensemble
# (children of this test on free ports, test/perl/FencingLockSvc.pm) and
# workers taking the lock recipe with Curator's node names (kazoo), a new
# token per transaction: fence_from_zxid(mzxid of a setData on the
# holder's lock node, generation) (docs/lock-services.md).  A worker frozen
# with SIGSTOP, tokens in hand, past its session's timeout is refused when
# it wakes, the new holder having raised its fences; a leader change raises
# the zxid's epoch and lowers its counter (a mapping by the counter alone
# refuses the rightful holder); a data loss starts the zxids again, so the
# generation must be raised.  Every step waits for a state ZooKeeper
# reports (a node deleted, a new leader), never for a fixed time.
# Needs FENCING_LOCKSVC_PYTHON (test/suites/locksvc.sh sets it);
# FENCING_LOCKSVC_BREAK=guard: every scenario must fail.
use strict;
use warnings;
use FencingLockSvc;
use FencingLockSvcTest;
use Test::More;

need_env(qw(FENCING_LOCKSVC_PYTHON));
setup();
my $zk_tool = "$ROOT/test/locksvc/clients/zk_tool.py";

note '--- ZooKeeper: a three-server ensemble ---';
my $zk = eval { FencingLockSvc::ZooKeeper->start(servers => 3) };
if (!$zk)
{
	fail('ZooKeeper ensemble of three starts');
	diag $@;
	finish();
	exit;
}
pass('ZooKeeper ensemble serves ' . $zk->hosts . ' (leader: server ' . $zk->leader . ')');
my $gone = sub {
	(FencingLockSvc::run([ $PY, $zk_tool, 'wait-gone', $zk->hosts, $_[0], 5 ]))[0];
};
pause_scenario('ZooKeeper', 'zk-pause', sub { start_zk($zk, $_[0], '/locks/zk-pause') },
	$gone, 'lock recipe /locks/zk-pause, session timeout 2 s');

sub epoch { return ($_[0] // 0) >> 32; }
sub counter { return ($_[0] // 0) & 0xffffffff; }

# A leader change: the zxid epoch goes up, its counter down.  A's tokens
# are late in an epoch (the counter raised first); the leader is stopped;
# B's in the next epoch have a lower counter.  Mapped with
# fence_from_zxid() B wins; mapped by the counter alone, the rightful
# holder B is refused.
note '--- ZooKeeper: leader change (zk-leader) ---';
new_rows('zk-leader', 'zk-leader-counter');
FencingLockSvc::run([ $PY, $zk_tool, 'bump', $zk->hosts, 30 ]);
my $wa = start_zk($zk, 'A', '/locks/zk-leader');
my $a_zxid = (locked($wa, 'lock recipe /locks/zk-leader') // {})->{zxid};
write_as($wa, 'refund', 'zk-leader');
write_as($wa, 'refund', 'zk-leader-counter', 'counter');
take_next($wa);
freeze($wa);
my $leader = $zk->leader;
$zk->server_stop($leader);
event('zookeeper', "leader (server $leader) stopped");
$zk->wait_quorum;
event('zookeeper', 'server ' . $zk->leader . ' leads now');
my $wb = start_zk($zk, 'B', '/locks/zk-leader');
my $b_zxid = (locked($wb, 'lock recipe /locks/zk-leader') // {})->{zxid};
ok( epoch($b_zxid) > epoch($a_zxid) && counter($b_zxid) < counter($a_zxid),
	'zk leader change: the epoch went up ('
	  . epoch($a_zxid) . ' -> '
	  . epoch($b_zxid)
	  . ') and the counter down ('
	  . counter($a_zxid) . ' -> '
	  . counter($b_zxid) . ')');
is(write_as($wb, 'refund', 'zk-leader')->{result},
	'ok', 'zk leader change: B, fenced with fence_from_zxid(mzxid), writes');
is(write_as($wb, 'refund', 'zk-leader-counter', 'counter')->{result},
	'SF001',
	"zk leader change: fenced by the zxid's counter alone, the rightful holder B is refused (SF001)");
unlock($wb);
thaw($wa);
is(write_as($wa, 'refund', 'zk-leader')->{result}, 'SF001', 'zk leader change: A, thawed, gets SF001');
$wa->stop;
$zk->server_start($leader);    # back to three, while the next steps run

# Data loss: every server's data gone, zxids start again in epoch 1.
note '--- ZooKeeper: data loss (zk-loss) ---';
new_rows('zk-loss');
$zk->wait_quorum;
$wa = start_zk($zk, 'A', '/locks/zk-loss');
$a_zxid = (locked($wa, 'lock recipe /locks/zk-loss') // {})->{zxid} // 0;
write_as($wa, 'refund', 'zk-loss');
take_next($wa);
freeze($wa);
$zk->stop;
$zk->wipe;
event('zookeeper', 'all three servers stopped, their data removed (myid kept)');
$zk->start_all;
event('zookeeper', 'started empty: server ' . $zk->leader . ' leads');
$wb = start_zk($zk, 'B', '/locks/zk-loss');
$b_zxid = (locked($wb, 'lock recipe /locks/zk-loss') // {})->{zxid} // 0;
ok($b_zxid < $a_zxid, "zk data loss: B's zxid $b_zxid is below A's $a_zxid");
is(write_as($wb, 'refund', 'zk-loss')->{result},
	'SF001', 'zk data loss, generation not raised: the rightful holder B is refused (SF001)');
unlock($wb);
raise_generation('zookeeper');
my $wc = start_zk($zk, 'C', '/locks/zk-loss');
locked($wc, 'lock recipe /locks/zk-loss');
is(write_as($wc, 'refund', 'zk-loss')->{result},
	'ok', 'zk data loss, generation raised: the new holder C writes (fence_from_zxid(mzxid, 1))');
unlock($wc);
thaw($wa);
is(write_as($wa, 'refund', 'zk-loss')->{result}, 'SF001', 'zk data loss: A, thawed, gets SF001');
$wa->stop;
$zk->stop;

finish();
