package io.github.fencingpg.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The storm (FENCING_JAVA_STORM=1): 16 workers share 3 resources, each under its lock with a time
 * to live of 300 ms, and write 1 to 3 fenced transactions per grant through one HikariCP pool; one
 * transaction in ten pauses 450 ms after its token was set (past the lock's time to live) before
 * it writes (its lock's renewal paused too, as in a process that is paused). Every accepted write logs the fence it replaced and the one it wrote, in its own
 * transaction. The checker: 0 accepted writes whose token was not newer than the fence before
 * (0 stale writes accepted), the counters equal the accepted writes, and no pooled connection
 * carries a token afterwards.
 */
class StormTest {
    static final int WORKERS = 16;
    static final int RESOURCES = 3;
    static final int GRANTS = 25;

    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"lease", "redis"})
    void storm(String kind) throws Exception {
        Assumptions.assumeTrue("1".equals(System.getenv("FENCING_JAVA_STORM")),
                "the storm runs with FENCING_JAVA_STORM=1");
        String run = "st" + Long.toHexString(System.nanoTime()) + "-" + kind + "-";
        long deadline = Long.parseLong(Env.env("FENCING_JAVA_STORM_DEADLINE", "900"));
        try (HikariDataSource db = Env.pool(WORKERS); Kinds kinds = new Kinds(db, 300)) {
            Env.sql(db, Env.EXTENSION,
                    "CREATE TABLE IF NOT EXISTS storm_res (id text PRIMARY KEY, v int NOT NULL, fence fencing.fence)",
                    "SELECT fencing.protect('storm_res', key_columns => '{id}') "
                            + "WHERE NOT EXISTS (SELECT FROM fencing.protected WHERE relid = 'storm_res'::regclass)",
                    "CREATE TABLE IF NOT EXISTS storm_log (id text, old fencing.fence, new fencing.fence)");
            for (int r = 0; r < RESOURCES; r++) {
                Env.sql(db, "INSERT INTO storm_res VALUES ('" + run + r + "', 0, '0:0'::text::fencing.fence)");
            }
            Generations.ensure(db, "redis");
            AtomicInteger accepted = new AtomicInteger();
            AtomicInteger refused = new AtomicInteger();
            AtomicInteger notTaken = new AtomicInteger();
            AtomicInteger paused = new AtomicInteger();
            ExecutorService pool = Executors.newFixedThreadPool(WORKERS);
            List<Future<?>> fs = new ArrayList<>();
            long t0 = System.nanoTime();
            for (int w = 0; w < WORKERS; w++) {
                int me = w;
                fs.add(pool.submit(() -> {
                    ThreadLocalRandom rnd = ThreadLocalRandom.current();
                    for (int g = 0; g < GRANTS; g++) {
                        String res = run + rnd.nextInt(RESOURCES);
                        LockSource s = kinds.make(kind, res, "w" + me);
                        try {
                            s.acquire(Duration.ofSeconds(5));
                        } catch (NotAcquiredException e) {
                            notTaken.incrementAndGet();
                            continue;
                        }
                        try {
                            int n = 1 + rnd.nextInt(3);
                            for (int i = 0; i < n; i++) {
                                boolean pause = rnd.nextInt(10) == 0;
                                Fenced.run(db, s, c -> {
                                    if (pause) {
                                        paused.incrementAndGet();
                                        s.freezeRenewal(Duration.ofMillis(450));    // the whole holder pauses
                                        try {
                                            Thread.sleep(450);
                                        } catch (InterruptedException e) {
                                            throw new IllegalStateException(e);
                                        }
                                    }
                                    try (PreparedStatement ps = c.prepareStatement(
                                            "WITH old AS (SELECT fence FROM storm_res WHERE id = ? FOR UPDATE) "
                                                    + "UPDATE storm_res r SET v = v + 1 FROM old WHERE r.id = ? "
                                                    + "RETURNING old.fence::text, r.fence::text")) {
                                        ps.setString(1, res);
                                        ps.setString(2, res);
                                        try (ResultSet rs = ps.executeQuery()) {
                                            rs.next();
                                            try (PreparedStatement log = c.prepareStatement(
                                                    "INSERT INTO storm_log VALUES (?, ?::text::fencing.fence, ?::text::fencing.fence)")) {
                                                log.setString(1, res);
                                                log.setString(2, rs.getString(1));
                                                log.setString(3, rs.getString(2));
                                                log.executeUpdate();
                                            }
                                        }
                                    }
                                    return null;
                                });
                                accepted.incrementAndGet();
                            }
                        } catch (FencedOutException | LockLostException e) {
                            refused.incrementAndGet();
                        } finally {
                            s.release();
                        }
                    }
                    return null;
                }));
            }
            pool.shutdown();
            assertTrue(pool.awaitTermination(deadline, TimeUnit.SECONDS), "the storm ends within " + deadline + " s");
            for (Future<?> f : fs) {
                f.get();
            }
            double secs = (System.nanoTime() - t0) / 1e9;
            String where = "id LIKE '" + run + "%'";
            int stale = Integer.parseInt(Env.one(db, "SELECT count(*) FROM storm_log WHERE " + where
                    + " AND NOT (new OPERATOR(fencing.>) old)"));
            int logged = Integer.parseInt(Env.one(db, "SELECT count(*) FROM storm_log WHERE " + where));
            int counted = Integer.parseInt(Env.one(db, "SELECT sum(v) FROM storm_res WHERE " + where));
            int withToken = 0;
            List<Connection> all = new ArrayList<>();
            try {
                for (int i = 0; i < WORKERS; i++) {
                    all.add(db.getConnection());
                }
                for (Connection c : all) {
                    try (Statement st = c.createStatement();
                            ResultSet rs = st.executeQuery("SELECT coalesce(current_setting('fencing.token', true), '')")) {
                        rs.next();
                        if (!rs.getString(1).isEmpty()) {
                            withToken++;
                        }
                    }
                }
            } finally {
                for (Connection c : all) {
                    c.close();
                }
            }
            System.out.printf("STORM: %s: %d workers, %.1f s: %d transactions accepted, %d refused (SF001 or lock lost), "
                    + "%d paused past the TTL, %d grants not taken in 5 s; %d stale writes accepted, "
                    + "%d pooled connections with a token%n", kind, WORKERS, secs, accepted.get(), refused.get(),
                    paused.get(), notTaken.get(), stale, withToken);
            assertEquals(0, stale, "0 stale writes accepted");
            assertEquals(accepted.get(), logged, "every accepted transaction logged, none else");
            assertEquals(logged, counted, "the counters equal the accepted writes");
            assertEquals(0, withToken, "0 pooled connections left with a token");
            assertTrue(accepted.get() > 0 && refused.get() > 0, "the storm had both outcomes");
        }
    }
}
