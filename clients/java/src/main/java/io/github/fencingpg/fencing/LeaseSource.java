package io.github.fencingpg.fencing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import javax.sql.DataSource;

/**
 * The extension's own lease: {@code fencing.lease_acquire(name, holder, ttl)} grants it,
 * {@code fencing.lease_next(name, token, ttl)} gives each transaction a new token while it is
 * live (and renews it), {@code fencing.lease_renew} renews it every third of its time to live
 * from a daemon thread of this process, {@code fencing.lease_release} gives it up. Times are the
 * server's clock. A table protected with {@code fencing.protect(..., lease => name)} also refuses
 * the writes of an expired lease ({@link LeaseExpiredException}) before anyone else writes.
 */
public final class LeaseSource extends LockSource {
    private final String holder;
    private final Duration ttl;
    private final Object calls = new Object();

    /**
     * @param db where the lease lives (each call is one short autocommit statement)
     * @param name the lease's name
     * @param holder who holds it (shown in {@code fencing.lease_status})
     * @param ttl its time to live
     */
    public LeaseSource(DataSource db, String name, String holder, Duration ttl) {
        super(db, name);
        this.holder = holder;
        this.ttl = ttl;
        if (ttl.toMillis() <= 0) {
            throw new IllegalArgumentException("ttl must be positive: " + ttl);
        }
    }

    private String interval() {
        return ttl.toMillis() + " milliseconds";
    }

    private Token call(String sql, String... args) throws SQLException {
        try (Connection c = db.getConnection(); PreparedStatement ps = c.prepareStatement(sql)) {
            for (int i = 0; i < args.length; i++) {
                ps.setString(i + 1, args[i]);
            }
            String t;
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                t = rs.getString(1);
            }
            if (!c.getAutoCommit()) {
                c.commit();
            }
            return t == null ? null : Token.parse(t);
        }
    }

    private static final String ACQUIRE = "SELECT fencing.lease_acquire(?::text, ?::text, ?::interval)::text";

    @Override
    protected Token grant(Duration wait) throws Exception {
        long deadline = System.nanoTime() + wait.toNanos();
        long poll = Math.max(10, Math.min(200, ttl.toMillis() / 20));
        while (true) {
            Token t;
            try {
                t = call(ACQUIRE, name, holder, interval());
            } catch (SQLException e) {
                throw Errors.unchecked(e);
            }
            if (t != null || System.nanoTime() >= deadline) {
                return t;
            }
            pause(poll, deadline);
        }
    }

    @Override
    protected Token next() throws SQLException {
        synchronized (calls) {
            Token cur = token();
            if (cur == null) {
                return null;
            }
            try {
                return call("SELECT fencing.lease_next(?::text, ?::text::fencing.fence, ?::interval)::text",
                        name, cur.toString(), interval());
            } catch (SQLException e) {
                throw Errors.unchecked(e);
            }
        }
    }

    @Override
    protected boolean renew() throws SQLException {
        synchronized (calls) {
            Token cur = token();
            if (cur == null) {
                return true;
            }
            try (Connection c = db.getConnection(); PreparedStatement ps = c.prepareStatement(
                    "SELECT fencing.lease_renew(?::text, ?::text::fencing.fence, ?::interval)")) {
                ps.setString(1, name);
                ps.setString(2, cur.toString());
                ps.setString(3, interval());
                try (ResultSet rs = ps.executeQuery()) {
                    rs.next();
                    boolean ok = rs.getBoolean(1);
                    if (!c.getAutoCommit()) {
                        c.commit();
                    }
                    return ok;
                }
            }
        }
    }

    @Override
    protected Duration renewEvery() {
        return ttl.dividedBy(3);
    }

    @Override
    protected void drop(Token t) throws SQLException {
        try (Connection c = db.getConnection(); PreparedStatement ps = c.prepareStatement(
                "SELECT fencing.lease_release(?::text, ?::text::fencing.fence)")) {
            ps.setString(1, name);
            ps.setString(2, t.toString());
            ps.executeQuery().close();
            if (!c.getAutoCommit()) {
                c.commit();
            }
        }
    }

    /** The lease's name. */
    public String name() {
        return name;
    }
}
