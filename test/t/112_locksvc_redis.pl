# Real lock services fencing PostgreSQL: Redis without persistence (a
# child of this test on a free port, test/perl/FencingLockSvc.pm) and
# workers taking the lock lock:{NAME} with SET NX PX and INCR fence:{NAME}
# in one script, and a new token per transaction with INCR in a script
# that checks the lock, as a shell script with redis-cli would
# (docs/lock-services.md).  A worker frozen with SIGSTOP, tokens in hand,
# past the lock's TTL is refused when it wakes, the new holder having
# raised its fences; a restart without persistence starts the counter
# again, so the generation must be raised and read when the lock is taken
# (read at write time, a stale write gets in: the mistake the docs warn
# of); then one token in two transactions, on a strict table and on one
# with strict => false.  Every step waits for a state Redis reports (a
# key's PTTL -2).
# Needs FENCING_LOCKSVC_PYTHON (test/suites/locksvc.sh sets it);
# FENCING_LOCKSVC_BREAK=guard: every scenario must fail.
use strict;
use warnings;
use FencingLockSvc;
use FencingLockSvcTest;
use Test::More;

need_env(qw(FENCING_LOCKSVC_PYTHON));
setup();

note '--- Redis ---';
my $redis = eval { FencingLockSvc::Redis->start };
if (!$redis)
{
	fail('Redis starts');
	diag $@;
	finish();
	exit;
}
pass('Redis serves port ' . $redis->port . ' (no persistence)');
pause_scenario(
	'Redis', 'redis-pause',
	sub { start_redis($redis, $_[0], 'lock:{redis-pause}', 'fence:{redis-pause}') },
	sub { $redis->cli('PTTL', $_[0]) eq '-2' },
	'SET lock:{redis-pause} NX PX 2000; INCR fence:{redis-pause}');

# A restart without persistence: the counter starts again.  The generation
# is raised; B's token wins.  A, thawed, must use the generation it read
# when it took the lock: read at write time it would get the new one and
# its stale write would be accepted.
note '--- Redis: restart without persistence (redis-restart) ---';
new_rows(qw(redis-restart redis-restart-atwrite redis-restart-nogen));
$redis->cli('INCR', 'fence:{redis-restart}') for 1 .. 4;
my $how = 'SET lock:{redis-restart} NX PX 2000; INCR fence:{redis-restart}';
my $wa = start_redis($redis, 'A', 'lock:{redis-restart}', 'fence:{redis-restart}');
locked($wa, $how);
write_as($wa, 'refund', 'redis-restart');
write_as($wa, 'refund', 'redis-restart-atwrite');
write_as($wa, 'refund', 'redis-restart-nogen', 'nogen');
take_next($wa) for 1 .. 2;
freeze($wa);
$redis->restart_empty;
event('redis', 'restarted without persistence: every key is gone');
my $wb = start_redis($redis, 'B', 'lock:{redis-restart}', 'fence:{redis-restart}');
locked($wb, $how);
is(write_as($wb, 'refund', 'redis-restart-nogen', 'nogen')->{result},
	'SF001', 'redis restart, generation not raised: the rightful holder B is refused (SF001)');
unlock($wb);
raise_generation('redis');
my $wc = start_redis($redis, 'C', 'lock:{redis-restart}', 'fence:{redis-restart}');
locked($wc, $how);
my $r = join '/', map { write_as($wc, 'refund', $_)->{result} } qw(redis-restart redis-restart-atwrite);
is($r, 'ok/ok', "redis restart, generation raised: the new holder C writes ($r)");
unlock($wc);
thaw($wa);
is(write_as($wa, 'refund', 'redis-restart')->{result},
	'SF001', 'redis restart: A, thawed, with the generation read at lock time, gets SF001');
is(write_as($wa, 'refund', 'redis-restart-atwrite', 'gen-at-write')->{result},
	'ok',
	'redis restart: the same A reading the generation at write time is accepted: the mistake the docs warn of'
);
$wa->stop;

# One token in two transactions (the grant's, where each transaction
# should take its own): strict tables refuse the second with the reason
# token_already_used, a programming error and no lost lock; strict =>
# false accepts it.
note '--- one token in two transactions (redis-twice) ---';
new_rows('redis-twice');
$wa = start_redis($redis, 'A', 'lock:{redis-twice}', 'fence:{redis-twice}');
locked($wa, 'SET lock:{redis-twice} NX PX 2000; INCR fence:{redis-twice}');
write_as($wa, 'refund', 'redis-twice', 'grant');
$r = write_as($wa, 'refund', 'redis-twice', 'grant');
is($r->{result}, 'SF001', 'one token twice, strict: the second transaction gets SF001');
is($r->{reason} // '', 'token_already_used',
	'... with the reason token_already_used (' . ($r->{message} // '') . ')');
$r = join '/', map { write_as($wa, 'job', 'redis-twice', 'grant')->{result} } 1 .. 2;
is($r, 'ok/ok', "one token twice, strict => false: both transactions write ($r)");
$r = join '/', map { write_as($wa, 'refund', 'redis-twice')->{result} } 1 .. 2;
is($r, 'ok/ok', "a new token per transaction, strict: both transactions write ($r)");
unlock($wa);
$redis->stop;

finish();
