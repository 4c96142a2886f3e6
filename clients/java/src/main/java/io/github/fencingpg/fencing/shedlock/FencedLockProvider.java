package io.github.fencingpg.fencing.shedlock;

import io.github.fencingpg.fencing.LeaseSource;
import io.github.fencingpg.fencing.Token;
import io.github.fencingpg.fencing.TokenSource;
import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import javax.sql.DataSource;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A ShedLock {@link LockProvider} whose locks carry fencing tokens: each lock is a
 * {@link TokenSource} (a built-in lease, etcd, ZooKeeper, Redis...), taken with
 * {@link TokenSource#tryAcquire()} when ShedLock asks for it, renewed while the job runs, and
 * released when it ends. The running job finds its source with {@link #currentSource()} and writes
 * through {@link io.github.fencingpg.fencing.Fenced#run}: a new token per transaction, so a job
 * that was paused past its lock while another instance took over is refused by the database
 * ({@code SF001}) or, once it knows, by the source ({@code LockLostException}).
 *
 * <pre>{@code
 * LockProvider provider = FencedLockProvider.leases(dataSource, "host-a");
 * LockingTaskExecutor executor = new DefaultLockingTaskExecutor(provider);
 * executor.executeWithLock((Runnable) () ->
 *         Fenced.run(dataSource, FencedLockProvider.currentSource(), conn -> ...),
 *     new LockConfiguration(Instant.now(), "nightly-report", Duration.ofSeconds(30), Duration.ZERO));
 * }</pre>
 *
 * <p>{@code lockAtMostFor} is the time to live given to the source factory: the lock is renewed
 * while the job's process lives, and lost that long after it froze or died. {@code lockAtLeastFor}
 * is kept by releasing the lock no earlier than that after it was taken.
 */
public final class FencedLockProvider implements LockProvider {
    private static final ThreadLocal<TokenSource> CURRENT = new ThreadLocal<>();
    private static final ScheduledExecutorService LATER = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "fencing-shedlock-release");
        t.setDaemon(true);
        return t;
    });

    private final Function<LockConfiguration, TokenSource> sources;

    /** Locks from {@code sources}: a new, not yet acquired source for each lock configuration. */
    public FencedLockProvider(Function<LockConfiguration, TokenSource> sources) {
        this.sources = Objects.requireNonNull(sources);
    }

    /** Locks that are built-in leases named as the ShedLock lock, time to live {@code lockAtMostFor}. */
    public static FencedLockProvider leases(DataSource db, String holder) {
        return new FencedLockProvider(cfg -> new LeaseSource(db, cfg.getName(), holder, cfg.getLockAtMostFor()));
    }

    /** The source of the job that runs in this thread under a lock of this provider. */
    public static TokenSource currentSource() {
        TokenSource s = CURRENT.get();
        if (s == null) {
            throw new IllegalStateException("no fenced ShedLock lock is held by this thread: run the job through "
                    + "a LockingTaskExecutor (or @SchedulerLock) with a FencedLockProvider");
        }
        return s;
    }

    /** The grant's token of the job that runs in this thread (its transactions take newer ones). */
    public static Token currentToken() {
        return currentSource().token();
    }

    @Override
    public Optional<SimpleLock> lock(LockConfiguration cfg) {
        TokenSource source = sources.apply(cfg);
        Optional<Token> t = source.tryAcquire();
        if (t.isEmpty()) {
            return Optional.empty();
        }
        TokenSource outer = CURRENT.get();
        CURRENT.set(source);
        Instant taken = Instant.now();
        return Optional.of(new SimpleLock() {
            private boolean done;

            @Override
            public void unlock() {
                if (done) {
                    return;
                }
                done = true;
                if (outer == null) {
                    CURRENT.remove();
                } else {
                    CURRENT.set(outer);
                }
                Duration left = Duration.between(Instant.now(), taken.plus(cfg.getLockAtLeastFor()));
                if (left.isNegative() || left.isZero()) {
                    source.release();
                } else {
                    LATER.schedule(source::release, left.toMillis(), TimeUnit.MILLISECONDS);
                }
            }
        });
    }
}
