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
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

/**
 * No extra round trip: a fenced transaction of one statement costs the same round trips as the
 * same transaction by hand (BEGIN rides with the first statement; the leftover check and
 * set_token go with it). Counted by a TCP proxy between the driver and the server: every time the
 * driver sends after the server has answered is one round trip (the driver waited for that
 * answer), whatever the machine's load and however the driver or the kernel split their writes.
 */
class RoundTripsTest {
    /** A proxy to PostgreSQL that counts the driver's turns to speak. */
    static final class Counting implements AutoCloseable {
        final ServerSocket server;
        /** the server answered since the driver last sent */
        final AtomicBoolean answered = new AtomicBoolean(true);
        final AtomicLong turns = new AtomicLong();

        Counting(String host, int port) throws IOException {
            server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
            Thread t = new Thread(() -> {
                try (Socket client = server.accept(); Socket pg = new Socket(host, port)) {
                    Thread up = new Thread(() -> copy(client, pg, true));
                    up.setDaemon(true);
                    up.start();
                    copy(pg, client, false);
                } catch (IOException e) {
                    // the connection ended
                }
            });
            t.setDaemon(true);
            t.start();
        }

        /** Copy one direction; the driver's chunks after an answer count a turn. */
        void copy(Socket from, Socket to, boolean fromDriver) {
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                byte[] buf = new byte[65536];
                for (int n; (n = in.read(buf)) > 0;) {
                    if (fromDriver) {
                        if (answered.getAndSet(false)) {
                            turns.incrementAndGet();
                        }
                    } else {
                        answered.set(true);     // before the driver can read it and speak again
                    }
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException e) {
                // the connection ended
            }
        }

        /** The round trips of {@code r}: the least of three runs, after one (the driver warms up). */
        long roundTrips(ThrowingRunnable r) throws Exception {
            r.run();
            long least = Long.MAX_VALUE;
            for (int i = 0; i < 3; i++) {
                long before = turns.get();
                r.run();
                least = Math.min(least, turns.get() - before);
            }
            return least;
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

    interface ThrowingRunnable {
        void run() throws Exception;
    }

    @Test
    void aFencedTransactionCostsNoExtraRoundTrip() throws Exception {
        Env.sql(Env.plain(), Env.EXTENSION,
                "CREATE TABLE IF NOT EXISTS rt_rows (id int PRIMARY KEY, v int, fence fencing.fence)",
                "INSERT INTO rt_rows VALUES (1, 0, NULL) ON CONFLICT DO NOTHING",
                "SELECT fencing.protect('rt_rows') "
                        + "WHERE NOT EXISTS (SELECT FROM fencing.protected WHERE relid = 'rt_rows'::regclass)");
        try (Counting proxy = new Counting(Env.env("PGHOST", "127.0.0.1"), Integer.parseInt(Env.env("PGPORT", "5432")));
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
            long library = proxy.roundTrips(() -> Fenced.run(ds, tokens, work));
            long byHand = proxy.roundTrips(() -> {
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
