package io.github.fencingpg.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every token source against its real service: try and blocking acquire, 100 transactions under
 * one lock in strict mode, the pause story (a worker JVM frozen with SIGSTOP past its lock's time to
 * live is refused when it wakes, and learns it lost the lock), and the first meter.
 */
class SourcesTest {
    static HikariDataSource db;

    @BeforeAll
    static void setUp() {
        db = Env.pool(4);
        Env.sql(db, Env.EXTENSION,
                "CREATE TABLE IF NOT EXISTS src_ledger (k text PRIMARY KEY, v int, fence fencing.fence)",
                "SELECT fencing.protect('src_ledger', key_columns => '{k}') "
                        + "WHERE NOT EXISTS (SELECT FROM fencing.protected WHERE relid = 'src_ledger'::regclass)");
        Generations.ensure(db, "etcd", "zookeeper", "redis");
    }

    @AfterAll
    static void tearDown() {
        db.close();
    }

    static String unique(String what) {
        return what + "-" + Long.toHexString(ThreadLocalRandom.current().nextLong() >>> 16);
    }

    static void insert(String key) {
        Env.sql(db, "INSERT INTO src_ledger VALUES ('" + key + "', 0, '0:0'::text::fencing.fence) ON CONFLICT DO NOTHING");
    }

    static int update(TokenSource s, String key, int v) {
        return Fenced.run(db, s, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE src_ledger SET v = ? WHERE k = ?")) {
                ps.setInt(1, v);
                ps.setString(2, key);
                return ps.executeUpdate();
            }
        });
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"lease", "etcd", "zookeeper", "redis", "redisson"})
    void tryAcquireAndAcquireWithTimeout(String kind) {
        try (Kinds ks = new Kinds(db, 5000)) {
            String name = unique("acq-" + kind);
            LockSource a = ks.make(kind, name, "a");
            LockSource b = ks.make(kind, name, "b");
            Token ta = a.tryAcquire().orElseThrow();
            assertTrue(a.isHeld());
            assertTrue(b.tryAcquire().isEmpty(), "a second holder does not get the lock");
            long t0 = System.nanoTime();
            assertThrows(NotAcquiredException.class, () -> b.acquire(Duration.ofMillis(300)));
            assertTrue(System.nanoTime() - t0 >= 250_000_000L, "acquire waited for its timeout");
            Token n1 = a.nextToken();
            Token n2 = a.nextToken();
            assertTrue(n1.isNewerThan(ta) && n2.isNewerThan(n1), "new tokens while held: " + ta + " " + n1 + " " + n2);
            a.release();
            assertFalse(a.isHeld());
            assertNull(a.token());
            assertThrows(LockLostException.class, a::nextToken);
            Token tb = b.acquire(Duration.ofSeconds(10));
            assertTrue(tb.isNewerThan(n2), "the next holder's token is newer: " + tb + " > " + n2);
            assertThrows(IllegalStateException.class, b::tryAcquire, "one grant at a time");
            b.release();
            try (LockSource c = ks.make(kind, name, "c")) {
                assertTrue(c.tryAcquire().isPresent(), "free again after release");
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"lease", "etcd", "zookeeper", "redis", "redisson"})
    void hundredTransactionsUnderOneLockStrict(String kind) {
        try (Kinds ks = new Kinds(db, 10000)) {
            String name = unique("hundred-" + kind);
            String key = name;
            insert(key);
            LockSource old = ks.make(kind, name, "old");
            old.acquire(Duration.ofSeconds(10));
            Token oldToken = old.nextToken();
            old.release();
            StaticToken frozen = StaticToken.of(oldToken);
            try (LockSource s = ks.make(kind, name, "worker")) {
                s.acquire(Duration.ofSeconds(10));
                int refusedOld = 0;
                for (int i = 1; i <= 100; i++) {
                    assertEquals(1, update(s, key, i));
                    if (i % 10 == 0) {
                        try {
                            update(frozen, key, -i);
                        } catch (StaleTokenException e) {
                            refusedOld++;
                        }
                    }
                }
                assertEquals(10, refusedOld, "every write of the older grant is refused");
                assertEquals("100 " + s.token(), Env.one(db, "SELECT v || ' ' || fence FROM src_ledger WHERE k = '" + key + "'"));
            }
        }
    }

    /** The pause story, and with {@code firstMeter} the new holder raises its fence and never writes. */
    void story(String kind, boolean firstMeter) throws Exception {
        long ttl = Kinds.ttlOf(kind, 3000);    // a cold JVM on a loaded machine renews late
        String name = unique((firstMeter ? "meter-" : "pause-") + kind);
        String key = name;
        insert(key);
        try (Kinds ks = new Kinds(db, ttl);
                Env.WorkerProcess w = new Env.WorkerProcess(kind, name, Long.toString(ttl), "src_ledger", key)) {
            String acquired = w.ask("acquire");
            assertTrue(acquired.startsWith("acquired "), acquired);
            String begun = w.ask("begin");
            assertTrue(begun.startsWith("begun "), begun);
            Token a = Token.parse(begun.substring(6));
            w.freeze();
            long t0 = System.nanoTime();
            LockSource b = ks.make(kind, name, "b");
            if (firstMeter) {
                b.fences(Scope.of("src_ledger", key));
            }
            Token tb = b.acquire(Duration.ofSeconds(60));
            long waited = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(tb.isNewerThan(a), "B's token " + tb + " is newer than A's " + a);
            if (!firstMeter) {
                assertEquals(1, update(b, key, 1));
            }
            w.thaw();
            assertEquals("refused StaleTokenException stale_token", w.ask("write 99"),
                    "A, frozen " + waited + " ms past its lock, is refused when it wakes");
            String again = w.ask("run 98");
            assertTrue(again.equals("refused LockLostException -") || again.startsWith("refused StaleTokenException"),
                    "and every later write of A: " + again);
            Env.until("A's lost signal", 30, () -> {
                try {
                    return w.ask("lost?").equals("lost yes");
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            });
            assertEquals(1, update(b, key, 2), "B writes on");
            assertEquals("2 " + b.token(), Env.one(db, "SELECT v || ' ' || fence FROM src_ledger WHERE k = '" + key + "'"));
            b.release();
        }
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"lease", "etcd", "zookeeper", "redis", "redisson"})
    void pausedHolderIsRefused(String kind) throws Exception {
        story(kind, false);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"lease", "etcd", "zookeeper", "redis", "redisson"})
    void firstMeterRefusesAHolderPausedBeforeTheNewHoldersFirstWrite(String kind) throws Exception {
        story(kind, true);
    }

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"lease", "etcd", "zookeeper", "redis", "redisson"})
    void lostSignalAndRunLocked(String kind) {
        try (Kinds ks = new Kinds(db, 5000)) {
            String name = unique("locked-" + kind);
            insert(name);
            LockSource s = ks.make(kind, name, "once");
            assertEquals(1, (int) Fenced.runLocked(db, s, c -> {
                try (PreparedStatement ps = c.prepareStatement("UPDATE src_ledger SET v = 7 WHERE k = ?")) {
                    ps.setString(1, name);
                    return ps.executeUpdate();
                }
            }));
            assertFalse(s.isHeld(), "runLocked released the lock");
            AtomicInteger calls = new AtomicInteger();
            LockSource t = ks.make(kind, name, "held");
            t.onLost(calls::incrementAndGet);
            t.acquire(Duration.ofSeconds(10));
            t.release();
            assertEquals(0, calls.get(), "a release is not a loss");
        }
    }
}
