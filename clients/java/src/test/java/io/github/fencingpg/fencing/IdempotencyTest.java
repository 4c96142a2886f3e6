package io.github.fencingpg.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.PreparedStatement;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** Idempotency keys: once, replayed, fenced by the claim, resumed after a failure. */
class IdempotencyTest {
    static HikariDataSource db;
    static final String RUN = "i" + Long.toHexString(System.nanoTime()) + "-";

    @BeforeAll
    static void setUp() {
        db = Env.pool(2);
        Env.sql(db, Env.EXTENSION,
                "CREATE TABLE IF NOT EXISTS idem_orders (id text PRIMARY KEY, qty int, fence fencing.fence)",
                "SELECT fencing.protect('idem_orders', key_columns => '{id}') "
                        + "WHERE NOT EXISTS (SELECT FROM fencing.protected WHERE relid = 'idem_orders'::regclass)");
    }

    @AfterAll
    static void tearDown() {
        db.close();
    }

    @Test
    void runOnceRunsOnceAndReplays() {
        String key = RUN + "order";
        AtomicInteger calls = new AtomicInteger();
        Idempotency.ClaimWork place = (c, claim) -> {
            calls.incrementAndGet();
            assertEquals("started", claim.state());
            try (PreparedStatement ps = c.prepareStatement("INSERT INTO idem_orders VALUES (?, 2)")) {
                ps.setString(1, key);
                ps.executeUpdate();
            }
            return "{\"order_id\": \"" + key + "\"}";
        };
        Idempotency.Options fenced = Idempotency.options().fence(true);
        String first = Idempotency.runOnce(db, key, "{\"sku\": \"A-1\", \"qty\": 2}", fenced, place);
        String again = Idempotency.runOnce(db, key, "{\"qty\": 2, \"sku\": \"A-1\"}", fenced, place);
        assertEquals(first, again, "replayed: the recorded result");
        assertEquals(1, calls.get(), "the work ran once");
        assertEquals(Env.one(db, "SELECT claim::text FROM fencing.idempotency_keys WHERE key = '" + key + "'"),
                Env.one(db, "SELECT fence::text FROM idem_orders WHERE id = '" + key + "'"),
                "fence(true): the claim's token fenced the write");
    }

    @Test
    void stepsResumeAfterAFailure() {
        String key = RUN + "refund";
        assertThrows(IllegalStateException.class, () -> Idempotency.runOnceSteps(db, key, "{\"cents\": 1250}", claim -> {
            assertNull(claim.recoveryPoint());
            claim.checkpoint("psp:ref-1");
            throw new IllegalStateException("the worker fails after the provider's call");
        }));
        String r = Idempotency.runOnceSteps(db, key, "{\"cents\": 1250}", claim -> {
            assertEquals("resumed", claim.state(), "abandoned: the next caller resumes at once");
            assertEquals("psp:ref-1", claim.recoveryPoint());
            return claim.complete((c, cl) -> "{\"psp\": \"" + cl.recoveryPoint().substring(4) + "\"}");
        });
        assertEquals("{\"psp\": \"ref-1\"}", r);
        assertEquals(r, Idempotency.runOnceSteps(db, key, "{\"cents\": 1250}", claim -> {
            throw new AssertionError("done: not called");
        }));
    }
}
