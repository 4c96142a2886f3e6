package io.github.fencingpg.fencing;

import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Types;
import java.util.Arrays;

/**
 * The benchmark: the same transaction (BEGIN, the token bound to {@code fencing.set_token}, an
 * UPDATE of a protected row, COMMIT) through {@link Fenced#run} and by hand with pgjdbc,
 * interleaved transaction by transaction on one pooled connection, tokens from a counter of the process (no lock
 * service: what is measured is the library). Prints the median time per transaction of each and
 * their ratio. {@code Bench [transactions per side, default 2000]}.
 */
public final class Bench {
    private Bench() {}

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
        int rounds = 20;        // blocks
        int per = Math.max(1, n / rounds);
        try (HikariDataSource db = Env.pool(1)) {
            Env.sql(db, Env.EXTENSION,
                    "DROP TABLE IF EXISTS bench_rows",
                    "CREATE TABLE bench_rows (id int PRIMARY KEY, v int NOT NULL, fence fencing.fence)",
                    "INSERT INTO bench_rows VALUES (1, 0, NULL)",
                    "SELECT fencing.protect('bench_rows')");
            FencedTest.Counter tokens = new FencedTest.Counter(System.currentTimeMillis());
            String update = "UPDATE bench_rows SET v = v + 1 WHERE id = 1";
            Work<Integer> work = c -> {
                try (PreparedStatement ps = c.prepareStatement(update)) {
                    return ps.executeUpdate();
                }
            };
            for (int warm = 0; warm < 200; warm++) {
                Fenced.run(db, tokens, work);
                byHand(db, tokens.nextToken(), update);
            }
            // interleaved transaction by transaction (the first side alternating), so that a burst
            // of load on the machine falls on both sides alike; the median of 20 blocks of each
            double[] lib = new double[rounds];
            double[] hand = new double[rounds];
            for (int r = 0; r < rounds; r++) {
                long tl = 0;
                long th = 0;
                for (int i = 0; i < per; i++) {
                    for (int side = 0; side < 2; side++) {
                        boolean isLib = (side == 0) == (i % 2 == 0);
                        long t0 = System.nanoTime();
                        if (isLib) {
                            Fenced.run(db, tokens, work);
                        } else {
                            byHand(db, tokens.nextToken(), update);
                        }
                        long dt = System.nanoTime() - t0;
                        if (isLib) {
                            tl += dt;
                        } else {
                            th += dt;
                        }
                    }
                }
                lib[r] = tl / 1e3 / per;
                hand[r] = th / 1e3 / per;
            }
            double ml = median(lib);
            double mh = median(hand);
            System.out.printf("bench: %d transactions per side in %d blocks, interleaved one by one, one pooled connection%n",
                    rounds * per, rounds);
            System.out.printf("| library (Fenced.run) | by hand (pgjdbc) | library / by hand |%n");
            System.out.printf("| %.0f us | %.0f us | %.3f |%n", ml, mh, ml / mh);
        }
    }

    static void byHand(HikariDataSource db, Token t, String update) throws Exception {
        try (Connection c = db.getConnection()) {
            c.setAutoCommit(false);
            try (PreparedStatement set = c.prepareStatement("SELECT fencing.set_token(?)");
                    PreparedStatement ps = c.prepareStatement(update)) {
                set.setObject(1, t.toString(), Types.OTHER);
                set.execute();
                ps.executeUpdate();
                c.commit();
            } finally {
                c.setAutoCommit(true);
            }
        }
    }

    static double median(double[] xs) {
        double[] s = xs.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }
}
