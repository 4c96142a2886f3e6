package io.github.fencingpg.fencing;

import java.lang.System.Logger.Level;
import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/**
 * What the lock sources share: a grant at a time, the first meter after each grant, renewal from a
 * daemon thread of this process while the lock is held, and the lost signal. A source implements
 * {@link #grant}, {@link #next}, {@link #renew} and {@link #drop}.
 */
public abstract class LockSource implements TokenSource {
    static final System.Logger LOG = System.getLogger("io.github.fencingpg.fencing");

    /** The database the generation is read from and the fences raised in. */
    protected final DataSource db;
    /** A name for messages and the renewal thread. */
    protected final String name;

    private final List<Runnable> lostCallbacks = new CopyOnWriteArrayList<>();
    private volatile List<Scope> fences = List.of();
    private final Object state = new Object();
    private volatile boolean held;
    private volatile Token token;
    private long grantNo;
    private ScheduledExecutorService timer;
    private ScheduledFuture<?> renewal;
    private volatile long renewalFrozenUntil;

    protected LockSource(DataSource db, String name) {
        this.db = db;
        this.name = Objects.requireNonNull(name, "name");
    }

    /**
     * Take the lock, waiting up to {@code wait} (zero: one attempt): the grant's token, or null
     * when it was not taken. Reads the generation right after the lock is taken.
     */
    protected abstract Token grant(Duration wait) throws Exception;

    /** A new token while the lock is held; null when it is not held any more. */
    protected abstract Token next() throws Exception;

    /** Renew (or check) the lock: false once it is lost. Called every {@link #renewEvery()}. */
    protected abstract boolean renew() throws Exception;

    /** How often {@link #renew()} runs. */
    protected abstract Duration renewEvery();

    /**
     * Give the lock up (only this grant's, whose last token was {@code last}); also called after
     * a loss, to clean up.
     */
    protected abstract void drop(Token last) throws Exception;

    @Override
    public final Optional<Token> tryAcquire() {
        return Optional.ofNullable(take(Duration.ZERO));
    }

    @Override
    public final Token acquire(Duration timeout) {
        Token t = take(timeout);
        if (t == null) {
            throw new NotAcquiredException(getClass().getSimpleName() + " " + name + ": the lock was not taken within "
                    + timeout.toMillis() + " ms");
        }
        return t;
    }

    private Token take(Duration wait) {
        if (held) {
            throw new IllegalStateException(getClass().getSimpleName() + " " + name
                    + " holds its lock already: release() it first, or use another source");
        }
        Token t;
        try {
            t = grant(wait.isNegative() ? Duration.ZERO : wait);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new NotAcquiredException("interrupted while taking the lock " + name, e);
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new FencingException("taking the lock " + name + ": " + e, e);
        }
        if (t == null) {
            return null;
        }
        synchronized (state) {
            token = t;
            held = true;
            grantNo++;
            startRenewal();
        }
        try {
            raiseFences(t);
        } catch (RuntimeException e) {
            release();
            throw e;
        }
        return t;
    }

    private void raiseFences(Token t) {
        List<Scope> scopes = fences;
        if (scopes.isEmpty()) {
            return;
        }
        try (Connection c = db.getConnection()) {
            boolean ac = c.getAutoCommit();
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement(
                    "SELECT fencing.raise_fence(?::regclass, ?, VARIADIC ?::text[])")) {
                for (Scope s : scopes) {
                    ps.setString(1, s.table());
                    ps.setObject(2, t.toString(), Types.OTHER);
                    Array key = c.createArrayOf("text", s.key().toArray());
                    ps.setArray(3, key);
                    ps.execute();
                }
                c.commit();
            } catch (SQLException | RuntimeException e) {
                try {
                    c.rollback();
                } catch (SQLException ignored) {
                    // the connection is broken: nothing was committed
                }
                throw e;
            } finally {
                c.setAutoCommit(ac);
            }
        } catch (SQLException e) {
            throw Errors.unchecked(e);
        }
    }

    @Override
    public final Token nextToken() {
        if (!held) {
            throw new LockLostException(getClass().getSimpleName() + " " + name + ": the lock is not held");
        }
        Token t;
        try {
            t = next();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new FencingException("interrupted while taking a new token of " + name, e);
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new FencingException("a new token of " + name + ": " + e, e);
        }
        if (t == null) {
            lost("no new token: the lock is not held any more");
            throw new LockLostException(getClass().getSimpleName() + " " + name + ": the lock was lost");
        }
        token = t;
        return t;
    }

    @Override
    public final Token token() {
        return held ? token : null;
    }

    /** The generation of {@code service}, read now (right after the lock was taken). */
    protected final long generation(String service) {
        return Generations.read(db, service);
    }

    @Override
    public final boolean isHeld() {
        return held;
    }

    @Override
    public LockSource onLost(Runnable callback) {
        lostCallbacks.add(Objects.requireNonNull(callback));
        return this;
    }

    @Override
    public LockSource fences(Scope... scopes) {
        fences = List.of(scopes);
        return this;
    }

    @Override
    public final void release() {
        Token last;
        synchronized (state) {
            if (!held) {
                return;
            }
            held = false;
            last = token;
            stopRenewal();
        }
        try {
            drop(last);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            throw e;
        } catch (Exception e) {
            throw new FencingException("releasing the lock " + name + ": " + e, e);
        }
    }

    /** The lock is lost: stop renewing, clean up, call the callbacks (once per grant). */
    protected final void lost(String why) {
        Token last;
        synchronized (state) {
            if (!held) {
                return;
            }
            held = false;
            last = token;
            stopRenewal();
        }
        LOG.log(Level.WARNING, "{0} {1}: lock lost ({2})", getClass().getSimpleName(), name, why);
        try {
            drop(last);
        } catch (Exception e) {
            LOG.log(Level.DEBUG, "cleaning up the lost lock " + name, e);
        }
        for (Runnable r : lostCallbacks) {
            try {
                r.run();
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "an onLost callback of " + name + " failed", e);
            }
        }
    }

    /** The lost signal from another thread of the client (a lock service's own callback). */
    protected final void lostAsync(String why) {
        long g;
        synchronized (state) {
            g = grantNo;
        }
        Thread t = new Thread(() -> {
            synchronized (state) {
                if (grantNo != g) {
                    return;
                }
            }
            lost(why);
        }, "fencing-lost-" + name);
        t.setDaemon(true);
        t.start();
    }

    private void startRenewal() {
        if (timer == null) {
            timer = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "fencing-renew-" + name);
                t.setDaemon(true);
                return t;
            });
        }
        long every = Math.max(10, renewEvery().toMillis());
        long g = grantNo;
        renewal = timer.scheduleWithFixedDelay(() -> {
            if (!held || grantNo != g || System.nanoTime() - renewalFrozenUntil < 0) {
                return;
            }
            boolean ok;
            try {
                ok = renew();
            } catch (Exception e) {
                // the service did not answer: the lock may still be held; its time to live decides
                LOG.log(Level.DEBUG, "renewing " + name + ": " + e);
                return;
            }
            if (!ok) {
                lost("renewal refused");
            }
        }, every, every, TimeUnit.MILLISECONDS);
    }

    private void stopRenewal() {
        if (renewal != null) {
            renewal.cancel(false);
            renewal = null;
        }
        if (timer != null) {
            timer.shutdown();       // its thread ends; the next grant starts another
            timer = null;
        }
    }

    /**
     * No renewal for {@code d}, as in a process that is paused (the tests' stand-in for a whole
     * process frozen, where only one thread of it can be paused).
     */
    void freezeRenewal(Duration d) {
        renewalFrozenUntil = System.nanoTime() + d.toNanos();
    }

    /** Sleep up to {@code ms}, not past {@code deadline} (System.nanoTime()). */
    static void pause(long ms, long deadline) throws InterruptedException {
        long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
        Thread.sleep(Math.max(1, Math.min(ms, left)));
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(" + name + (held ? ", held, token " + token : "") + ")";
    }
}
