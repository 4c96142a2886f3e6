package io.github.fencingpg.fencing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.util.Objects;
import javax.sql.DataSource;

/**
 * Idempotency keys ({@code fencing.idem_begin} and friends): a request runs once, whoever retries
 * it. Requests and results are JSON text (any JSON value), compared by the server as
 * {@code jsonb}.
 *
 * <pre>{@code
 * String result = Idempotency.runOnce(db, "order:5531", "{\"sku\": \"A-1\", \"qty\": 2}", (conn, claim) -> {
 *     try (var ps = conn.prepareStatement("INSERT INTO orders VALUES (5531, 2)")) {
 *         ps.executeUpdate();
 *     }
 *     return "{\"order_id\": 5531}";          // recorded in the same transaction
 * });
 * }</pre>
 */
public final class Idempotency {
    private Idempotency() {}

    /** A claim on a key: its state ({@code started}, {@code resumed}), token and recovery point. */
    public static final class Claim {
        private final DataSource db;
        private final String key;
        private final String state;
        private final Token token;
        private volatile String recoveryPoint;
        private final Options options;

        Claim(DataSource db, String key, String state, Token token, String recoveryPoint, Options options) {
            this.db = db;
            this.key = key;
            this.state = state;
            this.token = token;
            this.recoveryPoint = recoveryPoint;
            this.options = options;
        }

        public String key() {
            return key;
        }

        /** {@code started} (a new key) or {@code resumed} (the last owner did not finish). */
        public String state() {
            return state;
        }

        /** The claim's token: a fence that only the running claim passes. */
        public Token token() {
            return token;
        }

        /** How far the last owner got ({@link #checkpoint}), or null. */
        public String recoveryPoint() {
            return recoveryPoint;
        }

        /**
         * Record how far this claim got and renew its lease, in a transaction of its own
         * ({@link ClaimTakenOverException} when another owner took the key over).
         */
        public void checkpoint(String point) {
            Fenced.inTransaction(db, new Fenced.Options(), c -> {
                try (PreparedStatement ps = c.prepareStatement(
                        "SELECT fencing.idem_checkpoint(?, ?, ?, ?::interval)")) {
                    ps.setString(1, key);
                    ps.setObject(2, token.toString(), Types.OTHER);
                    ps.setString(3, point);
                    ps.setString(4, options.lease == null ? null : millis(options.lease));
                    ps.execute();
                }
                return null;
            });
            recoveryPoint = point;
        }

        /**
         * The last step: {@code work} and {@code idem_complete} with what it returned, one
         * transaction (the claim's token is its fencing token when the options say
         * {@code fence(true)}). Returns the result recorded.
         */
        public String complete(ClaimWork work) {
            return Fenced.inTransaction(db, new Fenced.Options(), c -> {
                if (options.fence) {
                    Fenced.start(c, token);
                }
                String result = work.run(c, this);
                completeIn(c, key, token, result);
                return result;
            });
        }

        void abandon() {
            try {
                Fenced.inTransaction(db, new Fenced.Options(), c -> {
                    try (PreparedStatement ps = c.prepareStatement("SELECT fencing.idem_abandon(?, ?)")) {
                        ps.setString(1, key);
                        ps.setObject(2, token.toString(), Types.OTHER);
                        ps.execute();
                    }
                    return null;
                });
            } catch (RuntimeException e) {
                Fenced.LOG.log(System.Logger.Level.DEBUG, "abandoning " + key + ": " + e);
            }
        }
    }

    /** The work under a claim: the JSON text of its result. */
    @FunctionalInterface
    public interface ClaimWork {
        String run(Connection conn, Claim claim) throws SQLException;
    }

    /** The steps of a request that spans transactions: the JSON text of its result. */
    @FunctionalInterface
    public interface Steps {
        String run(Claim claim);
    }

    /** Options of {@code idem_begin}: {@code Idempotency.options().lease(Duration.ofMinutes(2))}. */
    public static final class Options {
        private Duration lease;
        private Duration retention;
        private boolean wait = true;
        private boolean fence;

        /** The claim's lease (default the server's, a minute). */
        public Options lease(Duration d) {
            lease = d;
            return this;
        }

        /** How long the result is kept (default the server's, a day). */
        public Options retention(Duration d) {
            retention = d;
            return this;
        }

        /** false: {@link KeyInProgressException} at once while another transaction holds the key. */
        public Options waitForOthers(boolean w) {
            wait = w;
            return this;
        }

        /** true: the claim's token is also the transaction's fencing token. */
        public Options fence(boolean f) {
            fence = f;
            return this;
        }
    }

    public static Options options() {
        return new Options();
    }

    static String millis(Duration d) {
        return d.toMillis() + " milliseconds";
    }

    private static final String BEGIN = "SELECT state, token::text, result::text, recovery_point "
            + "FROM fencing.idem_begin(?, ?::jsonb, COALESCE(?::interval, '1 minute'), "
            + "COALESCE(?::interval, '24 hours'), ?)";

    private record Begun(String state, Token token, String result, String recoveryPoint) {}

    private static Begun begin(Connection c, String key, String request, Options o) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(BEGIN)) {
            ps.setString(1, key);
            ps.setString(2, request);
            ps.setString(3, o.lease == null ? null : millis(o.lease));
            ps.setString(4, o.retention == null ? null : millis(o.retention));
            ps.setBoolean(5, o.wait);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                String t = rs.getString(2);
                return new Begun(rs.getString(1), t == null ? null : Token.parse(t), rs.getString(3), rs.getString(4));
            }
        }
    }

    static void completeIn(Connection c, String key, Token token, String result) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT fencing.idem_complete(?, ?, ?::jsonb)")) {
            ps.setString(1, key);
            ps.setObject(2, token.toString(), Types.OTHER);
            ps.setString(3, result == null ? "null" : result);
            ps.execute();
        }
    }

    /** {@link #runOnce(DataSource, String, String, Options, ClaimWork)} with default options. */
    public static String runOnce(DataSource db, String key, String request, ClaimWork work) {
        return runOnce(db, key, request, new Options(), work);
    }

    /**
     * The request in one transaction: {@code idem_begin}, {@code work}, {@code idem_complete}
     * with what it returned, {@code COMMIT}. A key {@code done} returns its recorded result
     * without calling {@code work}; {@link KeyInProgressException} while another owner runs it,
     * {@link KeyReusedException} for the same key with another request.
     */
    public static String runOnce(DataSource db, String key, String request, Options options, ClaimWork work) {
        Objects.requireNonNull(work);
        return Fenced.inTransaction(db, new Fenced.Options(), c -> {
            Begun b;
            try {
                b = begin(c, key, request, options);
            } catch (SQLException e) {
                throw Errors.unchecked(e);
            }
            if ("done".equals(b.state)) {
                return b.result;
            }
            if (options.fence) {
                Fenced.start(c, b.token);
            }
            Claim claim = new Claim(db, key, b.state, b.token, b.recoveryPoint, options);
            String result = work.run(c, claim);
            completeIn(c, key, b.token, result);
            return result;
        });
    }

    /** {@link #runOnceSteps(DataSource, String, String, Options, Steps)} with default options. */
    public static String runOnceSteps(DataSource db, String key, String request, Steps steps) {
        return runOnceSteps(db, key, request, new Options(), steps);
    }

    /**
     * A request that spans transactions and calls outside: the claim is committed first with its
     * lease; {@code steps} records progress with {@link Claim#checkpoint} and ends with
     * {@link Claim#complete}. A key {@code done} returns its result without calling {@code steps}.
     * When {@code steps} throws, the claim is abandoned so that the next caller resumes at once.
     */
    public static String runOnceSteps(DataSource db, String key, String request, Options options, Steps steps) {
        Begun b = Fenced.inTransaction(db, new Fenced.Options(), c -> begin(c, key, request, options));
        if ("done".equals(b.state)) {
            return b.result;
        }
        Claim claim = new Claim(db, key, b.state, b.token, b.recoveryPoint, options);
        try {
            return steps.run(claim);
        } catch (RuntimeException | Error e) {
            if (!(e instanceof ClaimTakenOverException)) {
                claim.abandon();
            }
            throw e;
        }
    }
}
