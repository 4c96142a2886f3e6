package io.github.fencingpg.fencing;

import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.redisson.RedissonFencedLock;
import org.redisson.api.RFencedLock;
import org.redisson.api.RedissonClient;

/**
 * Redisson's fenced lock ({@link RFencedLock}): the token Redisson hands out at each lock, checked
 * by the database at last. The grant is {@code tryLockAndGetToken}; each transaction's token is a
 * re-entrant {@code tryLockAndGetToken} while the lock is held (Redisson raises its token at each
 * lock, re-entrant ones too) followed by one {@code unlock} of that re-entry. Redisson's watchdog
 * renews the lock from this process (its time to live is the client's
 * {@code lockWatchdogTimeout}); the source checks every third of it that the lock is still this
 * grant's, and signals the loss. Tokens are {@code (generation, token)}, the generation of service
 * {@code redis}. Redisson's lock keys are its own ({@code NAME} and
 * {@code redisson_lock_token:{NAME}}): a {@code RedissonSource} and a {@link RedisSource} of the
 * same name do not exclude each other.
 *
 * <p>The lock belongs to this source, not to a thread: a grant gets an owner id of its own, so
 * any thread may take new tokens or release it.
 */
public final class RedissonSource extends LockSource {
    private final RedissonFencedLock lock;
    private final Duration ttl;
    private volatile long owner;
    private volatile long generation;

    /**
     * @param redisson a Redisson client (its {@code lockWatchdogTimeout} is the lock's time to live)
     * @param name the lock's name
     * @param db where the generation is read and the fences raised
     */
    public RedissonSource(RedissonClient redisson, String name, DataSource db) {
        super(db, name);
        RFencedLock l = redisson.getFencedLock(name);
        if (!(l instanceof RedissonFencedLock r)) {
            throw new IllegalArgumentException("not Redisson's own RFencedLock: " + l.getClass().getName());
        }
        this.lock = r;
        this.ttl = Duration.ofMillis(redisson.getConfig().getLockWatchdogTimeout());
    }

    @Override
    protected Token grant(Duration wait) throws Exception {
        long me = ThreadLocalRandom.current().nextLong(1L << 40, Long.MAX_VALUE);
        Long t = lock.tryLockAndGetTokenAsync(wait.toMillis(), -1L, TimeUnit.MILLISECONDS, me).get();
        if (t == null || t < 0) {
            return null;
        }
        owner = me;
        generation = generation("redis");
        return new Token(generation, t);
    }

    @Override
    protected Token next() throws Exception {
        long me = owner;
        if (!lock.isHeldByThread(me)) {
            return null;
        }
        Long t = lock.tryLockAndGetTokenAsync(0L, -1L, TimeUnit.MILLISECONDS, me).get();
        if (t == null || t < 0) {
            return null;
        }
        lock.unlockAsync(me).get();      // the re-entry only: the grant's hold stays
        return new Token(generation, t);
    }

    @Override
    protected boolean renew() {
        return lock.isHeldByThread(owner);
    }

    @Override
    protected Duration renewEvery() {
        return ttl.dividedBy(3);
    }

    @Override
    protected void drop(Token last) throws Exception {
        long me = owner;
        while (lock.isHeldByThread(me)) {
            try {
                lock.unlockAsync(me).get();
            } catch (java.util.concurrent.ExecutionException e) {
                return;         // not ours any more
            }
        }
    }
}
