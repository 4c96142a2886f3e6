package io.github.fencingpg.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.zaxxer.hikari.HikariDataSource;
import io.github.fencingpg.fencing.shedlock.FencedLockProvider;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.atomic.AtomicInteger;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * ShedLock with fencing: a scheduled job gets a token with its lock, and its writes go through a
 * fenced transaction, so a job paused past its lock (another instance ran the job meanwhile) is
 * refused by the database when it wakes.
 */
class ShedLockTest {
    static HikariDataSource db;
    static final String RUN = "s" + Long.toHexString(System.nanoTime());

    @BeforeAll
    static void setUp() {
        db = Env.pool(2);
        Env.sql(db, Env.EXTENSION,
                "CREATE TABLE IF NOT EXISTS shed_report (k text PRIMARY KEY, v int NOT NULL, fence fencing.fence)",
                "SELECT fencing.protect('shed_report', key_columns => '{k}') "
                        + "WHERE NOT EXISTS (SELECT FROM fencing.protected WHERE relid = 'shed_report'::regclass)",
                "INSERT INTO shed_report VALUES ('" + RUN + "-nightly', 0, '0:0'::text::fencing.fence), ('" + RUN + "-report', 0, '0:0'::text::fencing.fence)");
    }

    @AfterAll
    static void tearDown() {
        db.close();
    }

    static Runnable job(AtomicInteger runs, String key) {
        return () -> Fenced.run(db, FencedLockProvider.currentSource(), c -> {
            runs.incrementAndGet();
            try (PreparedStatement ps = c.prepareStatement("UPDATE shed_report SET v = v + 1 WHERE k = ?")) {
                ps.setString(1, key);
                return ps.executeUpdate();
            }
        });
    }

    @Test
    void aJobWritesUnderItsLockAndAnotherInstanceSkips() {
        LockingTaskExecutor a = new DefaultLockingTaskExecutor(FencedLockProvider.leases(db, "a"));
        LockingTaskExecutor b = new DefaultLockingTaskExecutor(FencedLockProvider.leases(db, "b"));
        AtomicInteger runs = new AtomicInteger();
        String lock = RUN + "-nightly";
        LockConfiguration cfg = new LockConfiguration(Instant.now(), lock, Duration.ofSeconds(10), Duration.ZERO);
        a.executeWithLock((Runnable) () -> {
            job(runs, lock).run();
            job(runs, lock).run();        // two transactions under one lock, strict: both accepted
            Thread other = new Thread(() -> b.executeWithLock(job(runs, lock), cfg));  // another instance
            other.start();
            try {
                other.join();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }, cfg);
        assertEquals(2, runs.get(), "the other instance skipped its run while the lock was held");
        assertThrows(IllegalStateException.class, FencedLockProvider::currentSource, "no lock outside a job");
        b.executeWithLock(job(runs, lock), cfg);
        assertEquals(3, runs.get(), "released when the job ended");
    }

    @Test
    void aPausedJobsLateWriteIsRefused() throws Exception {
        String lock = RUN + "-report";
        try (Env.WorkerProcess w = new Env.WorkerProcessOf("io.github.fencingpg.fencing.ShedLockWorker", lock, "3000", lock)) {
            String begun = w.read(Duration.ofSeconds(60));
            assertTrue(begun.startsWith("begun "), begun);
            w.freeze();
            LockingTaskExecutor other = new DefaultLockingTaskExecutor(FencedLockProvider.leases(db, "other"));
            AtomicInteger runs = new AtomicInteger();
            LockConfiguration cfg = new LockConfiguration(Instant.now(), lock, Duration.ofSeconds(10), Duration.ZERO);
            Env.until("the other instance runs the job once the paused one's lock ran out", 60, () -> {
                other.executeWithLock(job(runs, lock), cfg);
                return runs.get() == 1;
            });
            w.thaw();
            assertEquals("refused StaleTokenException stale_token", w.ask("write"),
                    "the paused job's late write is refused");
            assertEquals("1", Env.one(db, "SELECT v FROM shed_report WHERE k = '" + lock + "'"));
            assertFalse(Env.one(db, "SELECT fence::text FROM shed_report WHERE k = '" + lock + "'").equals("0:0"));
        }
    }
}
