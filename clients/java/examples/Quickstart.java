// Quickstart: protect a table, take a lease, write three transactions under it.
// Connection settings come from libpq's PGHOST, PGPORT, PGUSER, PGDATABASE.
import com.zaxxer.hikari.HikariDataSource;
import io.github.fencingpg.fencing.Fenced;
import io.github.fencingpg.fencing.LeaseSource;
import io.github.fencingpg.fencing.StaleTokenException;
import io.github.fencingpg.fencing.StaticToken;
import io.github.fencingpg.fencing.Token;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;

public class Quickstart {
    public static void main(String[] args) throws Exception {
        try (HikariDataSource db = new HikariDataSource()) {
            db.setJdbcUrl("jdbc:postgresql://" + System.getenv("PGHOST") + ":" + System.getenv("PGPORT")
                    + "/" + System.getenv("PGDATABASE"));
            db.setUsername(System.getenv("PGUSER"));
            try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
                st.execute("CREATE EXTENSION IF NOT EXISTS fencing");
                st.execute("CREATE TABLE IF NOT EXISTS invoices (id text PRIMARY KEY, status text NOT NULL,"
                        + " fence fencing.fence)");
                st.execute("SELECT fencing.protect('invoices') WHERE NOT EXISTS"
                        + " (SELECT FROM fencing.protected WHERE relid = 'invoices'::regclass)");
            }

            // the extension's own lease; renewed from this process while it runs
            try (LeaseSource lease = new LeaseSource(db, "billing", "worker-a", Duration.ofSeconds(30))) {
                lease.acquire(Duration.ofSeconds(10));
                Token first = null;
                for (String id : List.of("inv-1", "inv-2", "inv-3")) {
                    // BEGIN; a new token of the lease, set for this transaction; the statements; COMMIT
                    Token t = Fenced.run(db, lease, conn -> {
                        try (var ps = conn.prepareStatement("INSERT INTO invoices VALUES (?, 'paid', NULL)"
                                + " ON CONFLICT (id) DO UPDATE SET status = 'paid'")) {
                            ps.setString(1, id);
                            ps.executeUpdate();
                        }
                        return lease.token();
                    });
                    first = first == null ? t : first;
                    System.out.println(id + " paid with token " + t);
                }

                // a holder with an older token (a paused one) is refused, and writes nothing
                Token older = new Token(first.epoch(), first.counter() - 1);
                try {
                    Fenced.run(db, StaticToken.of(older), conn -> {
                        try (var ps = conn.prepareStatement("UPDATE invoices SET status = 'void' WHERE id = 'inv-1'")) {
                            return ps.executeUpdate();
                        }
                    });
                } catch (StaleTokenException e) {
                    System.out.println("older token refused: " + e.getMessage());
                }
            }
        }
    }
}
