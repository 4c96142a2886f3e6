package io.github.fencingpg.fencing;

import io.github.fencingpg.fencing.shedlock.FencedLockProvider;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.time.Instant;
import javax.sql.DataSource;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;

/**
 * A scheduled job in a process of its own, run by ShedLock with a {@link FencedLockProvider}:
 * {@code ShedLockWorker LOCK TTL_MS KEY}. It runs the job once: a fenced transaction with the
 * job's source (begun TOKEN), then waits for a line {@code write} on stdin and writes
 * {@code UPDATE shed_report SET v = v + 1 WHERE k = KEY} (ok, or refused CLASS REASON). Frozen
 * between the two (SIGSTOP past TTL_MS), its write comes late.
 */
public final class ShedLockWorker {
    private ShedLockWorker() {}

    public static void main(String[] args) throws Throwable {
        String lock = args[0];
        Duration ttl = Duration.ofMillis(Long.parseLong(args[1]));
        String key = args[2];
        DataSource db = Env.plain();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        LockingTaskExecutor executor = new DefaultLockingTaskExecutor(FencedLockProvider.leases(db, "worker"));
        var result = executor.executeWithLock(() -> {
            try (Connection c = db.getConnection()) {
                Token t = Fenced.begin(c, FencedLockProvider.currentSource());
                say("begun " + t);
                in.readLine();
                try (PreparedStatement ps = c.prepareStatement("UPDATE shed_report SET v = v + 1 WHERE k = ?")) {
                    ps.setString(1, key);
                    ps.executeUpdate();
                    c.commit();
                    say("ok");
                } catch (java.sql.SQLException e) {
                    c.rollback();
                    throw Errors.unchecked(e);
                }
            } catch (FencedOutException e) {
                say("refused " + e.getClass().getSimpleName() + " " + e.reason());
            }
            return null;
        }, new LockConfiguration(Instant.now(), lock, ttl, Duration.ZERO));
        if (!result.wasExecuted()) {
            say("skipped");
        }
        in.readLine();
    }

    private static void say(String s) {
        System.out.println(s);
        System.out.flush();
    }
}
