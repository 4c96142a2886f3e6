package io.github.fencingpg.fencing;

import java.time.Duration;
import java.util.Optional;

/**
 * A lock that hands out fencing tokens: the built-in lease ({@link LeaseSource}), etcd
 * ({@link EtcdSource}), ZooKeeper ({@link ZooKeeperSource}), Redis ({@link RedisSource},
 * {@link RedissonSource}), or a token you already have ({@link StaticToken}).
 *
 * <p>While the lock is held the source renews it from a thread of this process (so a frozen
 * process stops renewing and loses the lock after its time to live) and calls the
 * {@link #onLost(Runnable)} callbacks once it learns the lock is lost. Each transaction of the
 * holder takes a new token with {@link #nextToken()} ({@link Fenced#run} does it), which also
 * proves the lock is still held; a strict table then accepts every transaction of the holder and
 * refuses every write of an older holder.
 *
 * <p>A source holds one grant at a time and is safe to use from several threads.
 * {@link #close()} releases it, so try-with-resources gives the lock up.
 */
public interface TokenSource extends AutoCloseable {

    /** Take the lock, or give up at once: the grant's token, or empty while another holds it. */
    Optional<Token> tryAcquire();

    /**
     * Take the lock, waiting up to {@code timeout}: the grant's token.
     *
     * @throws NotAcquiredException when it was not taken in time
     */
    Token acquire(Duration timeout);

    /**
     * A new token of the lock still held: greater than the grant's and every token given before,
     * less than the next holder's.
     *
     * @throws LockLostException when the lock is not held (lost, released, or never taken)
     */
    Token nextToken();

    /** The last token given (the grant's, or the latest {@link #nextToken()}); null when not held. */
    Token token();

    /** True while the lock is held, as far as this process knows. */
    boolean isHeld();

    /** Call {@code callback} (once per grant, from a thread of the source) when the lock is lost. */
    TokenSource onLost(Runnable callback);

    /**
     * The scopes whose fences are raised to the grant's token right after each grant, in one
     * transaction ({@code fencing.raise_fence}): the first meter. An older holder that wakes up
     * before this holder's first write is then refused.
     */
    TokenSource fences(Scope... scopes);

    /** Give the lock up (only this grant's: never another holder's). Nothing when not held. */
    void release();

    /** {@link #release()}. */
    @Override
    default void close() {
        release();
    }
}
