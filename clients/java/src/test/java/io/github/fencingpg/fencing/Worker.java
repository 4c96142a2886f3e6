package io.github.fencingpg.fencing;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;

/**
 * A holder in a process of its own, to be frozen with SIGSTOP: {@code Worker KIND NAME TTL_MS
 * TABLE KEY}. Commands on stdin, one answer line each on stdout:
 * {@code acquire} (acquired TOKEN), {@code begin} (a fenced transaction left open: begun TOKEN),
 * {@code write V} (in that transaction: UPDATE TABLE SET v = V WHERE k = KEY, COMMIT: ok, or
 * refused CLASS REASON), {@code run V} (the same in a new fenced transaction), {@code lost?}
 * (lost yes/no: the lost signal came), {@code quit}.
 */
public final class Worker {
    private Worker() {}

    public static void main(String[] args) throws Exception {
        String kind = args[0];
        String name = args[1];
        long ttl = Long.parseLong(args[2]);
        String table = args[3];
        String key = args[4];
        DataSource db = Env.plain();
        AtomicBoolean lost = new AtomicBoolean();
        try (Kinds kinds = new Kinds(db, ttl)) {
            LockSource source = kinds.make(kind, name, "worker-" + ProcessHandle.current().pid());
            source.onLost(() -> lost.set(true));
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            Connection open = null;
            String update = "UPDATE " + table + " SET v = ? WHERE k = ?";
            for (String line; (line = in.readLine()) != null;) {
                String[] w = line.trim().split(" ");
                try {
                    switch (w[0]) {
                        case "acquire" -> say("acquired " + source.acquire(Duration.ofSeconds(30)));
                        case "begin" -> {
                            open = db.getConnection();
                            say("begun " + Fenced.begin(open, source));
                        }
                        case "write" -> {
                            Connection c = open;
                            open = null;
                            try (c; PreparedStatement ps = c.prepareStatement(update)) {
                                ps.setInt(1, Integer.parseInt(w[1]));
                                ps.setString(2, key);
                                ps.executeUpdate();
                                c.commit();
                            } catch (java.sql.SQLException e) {
                                throw Errors.unchecked(e);
                            }
                            say("ok");
                        }
                        case "run" -> {
                            Token t = Fenced.run(db, source, c -> {
                                try (PreparedStatement ps = c.prepareStatement(update)) {
                                    ps.setInt(1, Integer.parseInt(w[1]));
                                    ps.setString(2, key);
                                    ps.executeUpdate();
                                }
                                return source.token();
                            });
                            say("ok " + t);
                        }
                        case "lost?" -> say("lost " + (lost.get() ? "yes" : "no"));
                        case "quit" -> {
                            source.release();
                            return;
                        }
                        default -> say("unknown " + line);
                    }
                } catch (FencedOutException e) {
                    say("refused " + e.getClass().getSimpleName() + " " + e.reason());
                } catch (FencingException e) {
                    say("refused " + e.getClass().getSimpleName() + " -");
                } catch (RuntimeException e) {
                    say("error " + e);
                }
            }
        }
        System.exit(0);
    }

    private static void say(String s) {
        System.out.println(s);
        System.out.flush();
    }
}
