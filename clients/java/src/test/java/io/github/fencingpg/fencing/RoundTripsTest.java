package io.github.fencingpg.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Types;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * No extra round trip: a fenced transaction of one statement costs the same round trips as the
 * same transaction by hand (BEGIN rides with the first statement; the leftover check and
 * set_token go with it). Counted through a TCP proxy that delays every answer of the server by
 * 250 ms: a transaction's time, in whole units of that, is its number of round trips, whatever
 * the machine's load adds (less than a unit) and however the driver splits its writes.
 */
class RoundTripsTest {
    static final long DELAY_MS = 250;

    /** A proxy to PostgreSQL whose answers arrive DELAY_MS late (a long network). */
    static final class Slow implements AutoCloseable {
        final ServerSocket server;

        Slow(String host, int port) throws IOException {
            server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
            Thread t = new Thread(() -> {
                try (Socket client = server.accept(); Socket pg = new Socket(host, port)) {
                    Thread up = new Thread(() -> copy(client, pg, 0));
                    up.setDaemon(true);
                    up.start();
                    copy(pg, client, DELAY_MS);
                } catch (IOException e) {
                    // the connection ended
                }
            });
            t.setDaemon(true);
            t.start();
        }

        /** Copy, each chunk forwarded {@code delay} ms after it arrived. */
        static void copy(Socket from, Socket to, long delay) {
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                byte[] buf = new byte[65536];
                for (int n; (n = in.read(buf)) > 0;) {
                    long due = System.nanoTime() + delay * 1_000_000;
                    for (long left; (left = due - System.nanoTime()) > 0;) {
                        Thread.sleep(left / 1_000_000, (int) (left % 1_000_000));
                    }
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException | InterruptedException e) {
                // the connection ended
            }
        }

        @Override
        public void close() throws IOException {
            server.close();
        }
    }

    /** A DataSource handing out the one connection, whose close() does nothing. */
    static DataSource one(Connection c) {
        return (DataSource) Proxy.newProxyInstance(RoundTripsTest.class.getClassLoader(), new Class<?>[] {DataSource.class},
                (p, m, args) -> {
                    if (!m.getName().equals("getConnection")) {
                        throw new UnsupportedOperationException(m.getName());
                    }
                    return Proxy.newProxyInstance(RoundTripsTest.class.getClassLoader(), new Class<?>[] {Connection.class},
                            (q, cm, cargs) -> cm.getName().equals("close") ? null : invoke(c, cm, cargs));
                });
    }

    static Object invoke(Object target, java.lang.reflect.Method m, Object[] args) throws Throwable {
        try {
            return m.invoke(target, args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause();
        }
    }

    /** Round trips of {@code r}: its time in units of the proxy's delay (the least of three runs). */
    static long roundTrips(ThrowingRunnable r) throws Exception {
        long best = Long.MAX_VALUE;
        for (int i = 0; i < 3; i++) {
            long t0 = System.nanoTime();
            r.run();
            best = Math.min(best, (System.nanoTime() - t0) / 1_000_000);
        }
        return best / DELAY_MS;            // what the server and a loaded machine add only adds
    }

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    @Test
    void aFencedTransactionCostsNoExtraRoundTrip() throws Exception {
        Env.sql(Env.plain(), "CREATE EXTENSION IF NOT EXISTS fencing",
                "CREATE TABLE IF NOT EXISTS rt_rows (id int PRIMARY KEY, v int, fence fencing.fence)",
                "INSERT INTO rt_rows VALUES (1, 0, NULL) ON CONFLICT DO NOTHING",
                "SELECT fencing.protect('rt_rows') "
                        + "WHERE NOT EXISTS (SELECT FROM fencing.protected WHERE relid = 'rt_rows'::regclass)");
        try (Slow proxy = new Slow(Env.env("PGHOST", "127.0.0.1"), Integer.parseInt(Env.env("PGPORT", "5432")));
                Connection c = Env.plain("jdbc:postgresql://127.0.0.1:" + proxy.server.getLocalPort() + "/"
                        + Env.env("PGDATABASE", "postgres") + "?sslmode=disable").getConnection()) {
            DataSource ds = one(c);
            FencedTest.Counter tokens = new FencedTest.Counter(System.currentTimeMillis());
            String update = "UPDATE rt_rows SET v = v + 1 WHERE id = 1";
            Work<Integer> work = conn -> {
                try (PreparedStatement ps = conn.prepareStatement(update)) {
                    return ps.executeUpdate();
                }
            };
            long library = roundTrips(() -> Fenced.run(ds, tokens, work));
            long byHand = roundTrips(() -> {
                c.setAutoCommit(false);
                try (PreparedStatement set = c.prepareStatement("SELECT fencing.set_token(?)");
                        PreparedStatement ps = c.prepareStatement(update)) {
                    set.setObject(1, tokens.nextToken().toString(), Types.OTHER);
                    set.execute();
                    ps.executeUpdate();
                    c.commit();
                }
                c.setAutoCommit(true);
            });
            assertEquals(3, byHand, "by hand: BEGIN with set_token, the UPDATE, COMMIT");
            assertEquals(byHand, library, "the library: no extra round trip");
        }
    }
}
