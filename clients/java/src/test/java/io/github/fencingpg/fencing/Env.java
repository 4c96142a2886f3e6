package io.github.fencingpg.fencing;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.etcd.jetcd.Client;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.retry.RetryOneTime;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;
import org.postgresql.ds.PGSimpleDataSource;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import redis.clients.jedis.JedisPooled;

/**
 * The servers of the tests, from the environment: PostgreSQL from libpq's PGHOST, PGPORT, PGUSER,
 * PGDATABASE; FENCING_JAVA_ETCD (a URL), FENCING_JAVA_ZK (a connect string), FENCING_JAVA_REDIS
 * (host:port), FENCING_JAVA_PGBOUNCER (a port of PgBouncer in front of the same database). A
 * service not given skips its tests, or fails them with FENCING_JAVA_REQUIRE=1.
 */
final class Env {
    private Env() {}

    static String env(String name, String dflt) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? dflt : v;
    }

    static String service(String var) {
        String v = System.getenv(var);
        if (v == null || v.isEmpty()) {
            if ("1".equals(System.getenv("FENCING_JAVA_REQUIRE"))) {
                Assertions.fail(var + " is not set (test/t/124_client_java.pl sets it)");
            }
            Assumptions.abort(var + " is not set: the service's tests are skipped");
        }
        return v;
    }

    static String jdbcUrl() {
        return "jdbc:postgresql://" + env("PGHOST", "127.0.0.1") + ":" + env("PGPORT", "5432") + "/"
                + env("PGDATABASE", "postgres");
    }

    static String user() {
        return env("PGUSER", "postgres");
    }

    /** A pool (HikariCP) of the test database. */
    static HikariDataSource pool(int size) {
        HikariConfig c = new HikariConfig();
        c.setJdbcUrl(jdbcUrl());
        c.setUsername(user());
        c.setMaximumPoolSize(size);
        c.setMinimumIdle(0);
        return new HikariDataSource(c);
    }

    /** A data source without a pool (a connection per call). */
    static DataSource plain() {
        return plain(jdbcUrl());
    }

    static DataSource plain(String url) {
        PGSimpleDataSource ds = new PGSimpleDataSource();
        ds.setUrl(url);
        ds.setUser(user());
        return ds;
    }

    /** PgBouncer's data source (transaction pooling: no server-side prepared statements). */
    static DataSource pgbouncer() {
        String port = service("FENCING_JAVA_PGBOUNCER");
        return plain("jdbc:postgresql://127.0.0.1:" + port + "/" + env("PGDATABASE", "postgres") + "?prepareThreshold=0");
    }

    /**
     * The C edition, unless the database has an edition already (the edition for managed
     * PostgreSQL is installed by the DBA, never beside the C edition).
     */
    static final String EXTENSION = "DO $$ BEGIN IF pg_catalog.to_regnamespace('fencing') IS NULL THEN "
            + "CREATE EXTENSION fencing; END IF; END $$";

    /**
     * Does the DDL guard (SF005) watch the table? The edition for managed PostgreSQL installed by
     * a role that may not create event triggers has none and says so in {@code
     * fencing.protected_tables.ddl_guarded} (managed/README.md, "the DDL guard (SF005)"); the C
     * edition has no such column: always guarded.
     */
    static boolean ddlGuarded(DataSource db, String table) {
        try (Connection c = db.getConnection(); Statement st = c.createStatement();
                ResultSet rs = st.executeQuery("SELECT coalesce((to_jsonb(p) ->> 'ddl_guarded')::boolean, true)"
                        + " FROM fencing.protected_tables p WHERE p.relid = '" + table + "'::regclass")) {
            return rs.next() && rs.getBoolean(1);
        } catch (SQLException e) {
            throw new AssertionError(e);
        }
    }

    static void sql(DataSource db, String... statements) {
        try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
            for (String s : statements) {
                st.execute(s);
            }
        } catch (SQLException e) {
            throw new AssertionError(e);
        }
    }

    static String one(DataSource db, String query) {
        try (Connection c = db.getConnection(); Statement st = c.createStatement();
                ResultSet rs = st.executeQuery(query)) {
            return rs.next() ? rs.getString(1) : null;
        } catch (SQLException e) {
            throw new AssertionError(e);
        }
    }

    static Client etcd() {
        return Client.builder().endpoints(service("FENCING_JAVA_ETCD")).build();
    }

    static CuratorFramework zk(int sessionMs) {
        CuratorFramework c = CuratorFrameworkFactory.builder().connectString(service("FENCING_JAVA_ZK"))
                .sessionTimeoutMs(sessionMs).connectionTimeoutMs(5000).retryPolicy(new RetryOneTime(100)).build();
        c.start();
        try {
            Assertions.assertTrue(c.blockUntilConnected(30, TimeUnit.SECONDS), "ZooKeeper connects");
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
        return c;
    }

    static JedisPooled redis() {
        String[] hp = service("FENCING_JAVA_REDIS").split(":");
        return new JedisPooled(hp[0], Integer.parseInt(hp[1]));
    }

    static RedissonClient redisson(long watchdogMs) {
        Config c = new Config();
        c.setLockWatchdogTimeout(watchdogMs);
        c.setThreads(2);
        c.setNettyThreads(4);
        c.useSingleServer().setAddress("redis://" + service("FENCING_JAVA_REDIS")).setConnectionMinimumIdleSize(1)
                .setConnectionPoolSize(4).setSubscriptionConnectionMinimumIdleSize(1)
                .setSubscriptionConnectionPoolSize(2);
        return Redisson.create(c);
    }

    /** A worker JVM (io.github.fencingpg.fencing.Worker) talking by lines on stdin and stdout. */
    static class WorkerProcess implements AutoCloseable {
        final Process p;
        final PrintWriter in;
        final BufferedReader out;

        WorkerProcess(String... args) throws IOException {
            this(true, "io.github.fencingpg.fencing.Worker", args);
        }

        WorkerProcess(boolean unused, String main, String... args) throws IOException {
            String cp = System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
            List<String> cmd = new ArrayList<>(List.of(
                    System.getProperty("java.home") + File.separator + "bin" + File.separator + "java",
                    "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
                    "-cp", cp, main));
            cmd.addAll(List.of(args));
            ProcessBuilder pb = new ProcessBuilder(cmd);
            pb.redirectError(ProcessBuilder.Redirect.INHERIT);
            p = pb.start();
            in = new PrintWriter(p.outputWriter(StandardCharsets.UTF_8), true);
            out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        }

        /** Send a command, read its answer line (within 60 s). */
        String ask(String line) throws IOException {
            in.println(line);
            return read(Duration.ofSeconds(60));
        }

        String read(Duration within) throws IOException {
            long end = System.nanoTime() + within.toNanos();
            while (!out.ready()) {
                if (!p.isAlive() && !out.ready()) {
                    return "exited " + p.exitValue();
                }
                if (System.nanoTime() > end) {
                    return "no answer";
                }
                try {
                    Thread.sleep(10);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return "interrupted";
                }
            }
            return out.readLine();
        }

        void signal(String sig) throws IOException, InterruptedException {
            Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(p.pid())).inheritIO().start();
            Assertions.assertEquals(0, k.waitFor(), "kill -" + sig);
        }

        void freeze() throws IOException, InterruptedException {
            signal("STOP");
        }

        void thaw() throws IOException, InterruptedException {
            signal("CONT");
        }

        @Override
        public void close() {
            try {
                signal("CONT");
                in.println("quit");
                if (!p.waitFor(10, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    p.waitFor(10, TimeUnit.SECONDS);
                }
            } catch (AssertionError | IOException | InterruptedException e) {
                p.destroyForcibly();
            }
        }
    }

    /** A worker JVM of another main class. */
    static final class WorkerProcessOf extends WorkerProcess {
        WorkerProcessOf(String main, String... args) throws IOException {
            super(true, main, args);
        }
    }

    /** Poll until cond holds (every 20 ms), failing after {@code secs}. */
    static void until(String what, int secs, java.util.function.BooleanSupplier cond) {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(secs);
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                Assertions.fail("timed out after " + secs + " s waiting for: " + what);
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
    }
}
