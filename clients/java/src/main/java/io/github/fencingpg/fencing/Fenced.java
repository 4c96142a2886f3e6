package io.github.fencingpg.fencing;

import java.lang.System.Logger.Level;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Types;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import javax.sql.DataSource;
import org.postgresql.PGConnection;

/**
 * Fenced transactions: {@code BEGIN}, a token, your statements, {@code COMMIT}.
 *
 * <pre>{@code
 * Fenced.run(dataSource, source, conn -> {
 *     try (var ps = conn.prepareStatement("UPDATE refunds SET state = 'paid' WHERE id = ?")) {
 *         ps.setString(1, "r-1");
 *         return ps.executeUpdate();
 *     }
 * });
 * }</pre>
 *
 * <p>Each transaction takes {@link TokenSource#nextToken()} from the source (a new token of the
 * lock still held; a {@link StaticToken} gives its one token) and sets it with
 * {@code fencing.set_token($1)}, the token bound as a parameter, sent with {@code BEGIN} in one
 * round trip. The token is transaction-local: it ends with the transaction and never stays on a
 * pooled connection. The same statement reads {@code current_setting('fencing.token', true)}
 * first ({@code SELECT pg_catalog.current_setting('fencing.token', true),
 * fencing.set_token($1)}): a value there is a session-level token left on
 * the connection by someone's {@code SET fencing.token}; it is reset inside the transaction
 * ({@code RESET fencing.token}, kept when it commits), the token set again, and a warning logged
 * with the backend's pid (logger {@code io.github.fencingpg.fencing}).
 *
 * <p>Errors of the extension come as the typed exceptions of {@link Errors#translate}; any other
 * {@link SQLException} as {@link UncheckedSqlException}; both keep the driver's exception as their
 * cause. Only serialization failures ({@code 40001}) and deadlocks ({@code 40P01}) are retried,
 * and only with {@link #attempts(int)} above 1, each time on a fresh connection from the
 * {@code DataSource} and with a fresh token; {@code SF00x} never. A retry can repeat a transaction
 * that committed when the connection broke during {@code COMMIT}: use an idempotency key
 * ({@link Idempotency}) where that matters.
 */
public final class Fenced {
    static final System.Logger LOG = LockSource.LOG;

    private Fenced() {}

    /** Options of a fenced transaction: {@code Fenced.attempts(3).timeout(Duration.ofSeconds(5))}. */
    public static final class Options {
        private int attempts = 1;
        private Duration timeout = Duration.ofSeconds(10);

        /** How many times to try (only {@code 40001} and {@code 40P01} are retried); default 1. */
        public Options attempts(int n) {
            if (n < 1) {
                throw new IllegalArgumentException("attempts must be at least 1: " + n);
            }
            attempts = n;
            return this;
        }

        /** How long {@link Fenced#runLocked} waits for the lock; default 10 seconds. */
        public Options timeout(Duration t) {
            timeout = Objects.requireNonNull(t);
            return this;
        }
    }

    /** Options with {@code n} attempts. */
    public static Options attempts(int n) {
        return new Options().attempts(n);
    }

    /** Default options (one attempt; {@code runLocked} waits 10 seconds for the lock). */
    public static Options options() {
        return new Options();
    }

    /** {@code fn} in a fenced transaction on a connection of {@code db}, with a new token of {@code source}. */
    public static <T> T run(DataSource db, TokenSource source, Work<T> fn) {
        return run(db, source, new Options(), fn);
    }

    /** The same, with options ({@link #attempts(int)}). */
    public static <T> T run(DataSource db, TokenSource source, Options options, Work<T> fn) {
        Objects.requireNonNull(source, "source");
        return inTransaction(db, options, c -> {
            Token t = source.nextToken();
            start(c, t);
            return fn.run(c);
        });
    }

    /**
     * Take the lock (waiting up to the options' timeout), run {@code fn} in a fenced transaction,
     * release the lock (also when {@code fn} failed).
     *
     * @throws NotAcquiredException when the lock was not taken in time
     */
    public static <T> T runLocked(DataSource db, TokenSource source, Work<T> fn) {
        return runLocked(db, source, new Options(), fn);
    }

    /** The same, with options. */
    public static <T> T runLocked(DataSource db, TokenSource source, Options options, Work<T> fn) {
        source.acquire(options.timeout);
        try {
            return run(db, source, options, fn);
        } finally {
            source.release();
        }
    }

    /**
     * One transaction under several locks: a new token of each source, by key, given to
     * {@code fn}, which writes each into the fence column of the rows under that lock
     * ({@code INSERT INTO ledger (acct, amount, fence) VALUES (?, ?, ?)}). No session token is
     * set: the guard judges each row by its own token, so a stale token on any row aborts the
     * whole transaction.
     */
    public static <T> T runMany(DataSource db, Map<String, ? extends TokenSource> sources, ManyWork<T> fn) {
        return runMany(db, sources, new Options(), fn);
    }

    /** The same, with options. */
    public static <T> T runMany(DataSource db, Map<String, ? extends TokenSource> sources, Options options,
            ManyWork<T> fn) {
        return inTransaction(db, options, c -> {
            Map<String, Token> tokens = new LinkedHashMap<>();
            for (Map.Entry<String, ? extends TokenSource> e : sources.entrySet()) {
                tokens.put(e.getKey(), e.getValue().nextToken());
            }
            start(c, null);
            return fn.run(c, java.util.Collections.unmodifiableMap(tokens));
        });
    }

    /**
     * Plain JDBC: start a fenced transaction on a connection you manage. Turns autocommit off,
     * takes a new token of {@code source} and sets it (with the leftover check above); you run
     * your statements and commit or roll back. Returns the token.
     */
    public static Token begin(Connection conn, TokenSource source) throws SQLException {
        Token t = source.nextToken();
        conn.setAutoCommit(false);
        start(conn, t);
        return t;
    }

    /** Plain JDBC, with a token you have. */
    public static Token begin(Connection conn, Token token) throws SQLException {
        conn.setAutoCommit(false);
        start(conn, Objects.requireNonNull(token, "token"));
        return token;
    }

    private static final String CHECK = "SELECT pg_catalog.current_setting('fencing.token', true)";
    /** The check, then the token: one statement (a call by name), its columns evaluated in order. */
    private static final String CHECK_AND_SET = CHECK + ", fencing.set_token(?)";
    private static final String SET = "SELECT fencing.set_token(?)";

    /** The first statement of the transaction (autocommit off): the leftover check and the token. */
    static void start(Connection c, Token t) throws SQLException {
        String left;
        try (PreparedStatement ps = c.prepareStatement(t == null ? CHECK : CHECK_AND_SET)) {
            if (t != null) {
                ps.setObject(1, t.toString(), Types.OTHER);
            }
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                left = rs.getString(1);
            }
        } catch (SQLException e) {
            throw translated(e);
        }
        if (left == null || left.isEmpty()) {
            return;
        }
        int pid = -1;
        try {
            pid = c.unwrap(PGConnection.class).getBackendPID();
        } catch (SQLException ignored) {
            // not pgjdbc's connection: the pid is not known
        }
        LOG.log(Level.WARNING, "the pooled connection of backend pid {0} carried a session-level fencing.token "
                + "({1}, from a SET fencing.token of earlier code): reset it (RESET fencing.token) "
                + "in this transaction", pid, left);
        try (Statement st = c.createStatement()) {
            st.execute("RESET fencing.token");
        }
        if (t != null) {
            try (PreparedStatement ps = c.prepareStatement(SET)) {
                ps.setObject(1, t.toString(), Types.OTHER);
                ps.execute();
            } catch (SQLException e) {
                throw translated(e);
            }
        }
    }

    private static SQLException translated(SQLException e) {
        FencingException f = Errors.translate(e);
        if (f != null) {
            throw f;
        }
        return e;
    }

    /** {@code fn} in a transaction on a connection of {@code db}, retried as the options say. */
    static <T> T inTransaction(DataSource db, Options options, Work<T> fn) {
        for (int attempt = 1;; attempt++) {
            try (Connection c = db.getConnection()) {
                boolean autoCommit = c.getAutoCommit();
                if (autoCommit) {
                    c.setAutoCommit(false);
                }
                try {
                    T result = fn.run(c);
                    c.commit();
                    return result;
                } catch (SQLException e) {
                    rollback(c);
                    if (Errors.retryable(e) && attempt < options.attempts) {
                        LOG.log(Level.DEBUG, "retrying after {0} (attempt {1} of {2})", e.getSQLState(), attempt,
                                options.attempts);
                        continue;
                    }
                    throw Errors.unchecked(e);
                } catch (RuntimeException | Error e) {
                    rollback(c);
                    throw e;
                } finally {
                    if (autoCommit && !c.isClosed()) {
                        try {
                            c.setAutoCommit(true);
                        } catch (SQLException ignored) {
                            // a broken connection: the pool drops it
                        }
                    }
                }
            } catch (SQLException e) {
                // getConnection, or closing it
                if (Errors.retryable(e) && attempt < options.attempts) {
                    continue;
                }
                throw Errors.unchecked(e);
            }
        }
    }

    private static void rollback(Connection c) {
        try {
            if (!c.isClosed()) {
                c.rollback();
            }
        } catch (SQLException ignored) {
            // a broken connection: the server rolled back
        }
    }
}
