package io.github.fencingpg.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.PreparedStatement;
import java.time.Duration;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The built-in lease's token for each transaction comes from {@code lease_next()} in a statement of
 * its own, before the transaction and before its connection is taken: no transaction holds the
 * lease's row (an UPDATE of it inside the transaction would keep it locked until the transaction
 * ends, and the next holder's {@code lease_acquire()} waiting on it), and a pool whose connections
 * are all in transactions never waits for itself.
 */
class LeaseTest {
    static HikariDataSource db;

    @BeforeAll
    static void setUp() {
        db = Env.pool(4);
        Env.sql(db, Env.EXTENSION);
    }

    @AfterAll
    static void tearDown() {
        db.close();
    }

    static String table(String lease) {
        String t = SourcesTest.unique("lease_t").replace('-', '_');
        Env.sql(db, "CREATE TABLE " + t + " (k text PRIMARY KEY, v int NOT NULL, fence fencing.fence)",
                "INSERT INTO " + t + " VALUES ('a', 0, NULL), ('b', 0, NULL)",
                "SELECT fencing.protect('" + t + "', lease => '" + lease + "')");
        return t;
    }

    /**
     * A, frozen between two statements of its open fenced transaction on a table protected with the
     * lease, past the lease's time to live: B takes the lease while A is still frozen (its
     * lease_acquire waits on no row lock: with a lock_timeout, a wait would fail it) and writes; A,
     * thawed, is refused at its next statement, and nothing of its transaction is written.
     */
    @Test
    void holderFrozenBetweenTwoStatementsKeepsNobodyFromTheLease() throws Exception {
        String name = SourcesTest.unique("lease-frozen");
        String t = table(name);
        try (Env.WorkerProcess a = new Env.WorkerProcess("lease", name, "1000", t, "a")) {
            String acquired = a.ask("acquire");
            assertTrue(acquired.startsWith("acquired "), acquired);
            Token ta = Token.parse(acquired.substring(9));
            String begun = a.ask("begin");
            assertTrue(begun.startsWith("begun "), begun);
            assertEquals("ok", a.ask("step 5"), "A's first statement in its transaction");
            a.freeze();
            long t0 = System.nanoTime();
            PGSimpleDataSource waitsNot = (PGSimpleDataSource) Env.plain();
            waitsNot.setOptions("-c lock_timeout=20s");
            LeaseSource b = new LeaseSource(waitsNot, name, "B", Duration.ofSeconds(30));
            Token tb = b.acquire(Duration.ofSeconds(60));
            long waited = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(tb.isNewerThan(ta), tb + " after " + ta);
            assertEquals("B", Env.one(db, "SELECT holder FROM fencing.lease_status WHERE name = '" + name + "'"));
            assertEquals(1, (int) Fenced.run(db, b, c -> {
                try (PreparedStatement ps = c.prepareStatement("UPDATE " + t + " SET v = 1 WHERE k = 'b'")) {
                    return ps.executeUpdate();
                }
            }), "B writes while A is frozen");
            a.thaw();
            assertEquals("refused StaleTokenException stale_token", a.ask("write 6"),
                    "A's second statement, after B took the lease " + waited + " ms after A froze");
            assertEquals("a=0 b=1", Env.one(db, "SELECT string_agg(k || '=' || v, ' ' ORDER BY k) FROM " + t),
                    "nothing of A's transaction is written");
            Env.until("A's lost signal", 30, () -> {
                try {
                    return a.ask("lost?").equals("lost yes");
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            assertEquals("refused LockLostException -", a.ask("run 7"));
            b.release();
            System.out.printf("A frozen in its transaction (grant %s); B took the lease %d ms later (%s)%n", ta,
                    waited, tb);
        }
    }

    /** A lease and its transactions on one pool of one connection. */
    @Test
    void leaseOnAPoolOfOneConnection() {
        String name = SourcesTest.unique("lease-one");
        String t = table(name);
        HikariConfig c = new HikariConfig();
        c.setJdbcUrl(Env.jdbcUrl());
        c.setUsername(Env.user());
        c.setMaximumPoolSize(1);
        c.setConnectionTimeout(5000);
        try (HikariDataSource one = new HikariDataSource(c)) {
            DataSource ds = one;
            LeaseSource src = new LeaseSource(ds, name, "one", Duration.ofSeconds(10));
            src.acquire(Duration.ofSeconds(10));
            for (int i = 1; i <= 3; i++) {
                int v = i;
                assertEquals(1, (int) Fenced.run(ds, src, conn -> {
                    try (PreparedStatement ps = conn.prepareStatement("UPDATE " + t + " SET v = ? WHERE k = 'a'")) {
                        ps.setInt(1, v);
                        return ps.executeUpdate();
                    }
                }), "transaction " + i + " under the lease on a pool of one connection");
            }
            src.release();
        }
        assertEquals("3", Env.one(db, "SELECT v FROM " + t + " WHERE k = 'a'"));
    }
}
