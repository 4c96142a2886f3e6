// Pay a refund with the token of a lock (JDBC, pgjdbc).
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;

import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

public class PayRefund {
    /** SF001: the token was refused. Never retry with the same token. */
    static class Refused extends Exception {
        final String reason;

        Refused(SQLException cause) {
            super(cause.getMessage(), cause);
            // why, in the error's constraint name field (never the text); a
            // server without it only says: a newer token was accepted
            ServerErrorMessage m = cause instanceof PSQLException
                ? ((PSQLException) cause).getServerErrorMessage() : null;
            String r = m == null ? null : m.getConstraint();
            reason = r == null || r.isEmpty() ? "stale_token" : r;
        }
    }

    static void payRefund(Connection conn, String token, String refundId)
            throws SQLException, Refused {
        conn.setAutoCommit(false);
        for (int attempt = 1; ; attempt++) {
            try (PreparedStatement setToken = conn.prepareStatement(
                     "SELECT fencing.set_token(?::fencing.fence)");
                 PreparedStatement pay = conn.prepareStatement(
                     "UPDATE refunds SET state = 'paid' WHERE id = ?")) {
                setToken.setString(1, token);
                setToken.execute();
                pay.setString(1, refundId);
                pay.executeUpdate();
                conn.commit();
                return;
            } catch (SQLException e) {
                conn.rollback();
                if ("SF001".equals(e.getSQLState())) throw new Refused(e);
                if ("40001".equals(e.getSQLState()) && attempt < 5) {
                    System.out.println("40001: serialization failure, retrying");
                    continue;
                }
                throw e;
            }
        }
    }

    public static void main(String[] args) throws SQLException {
        String url = args[0], token = args[1], refundId = args[2];
        try (Connection conn = DriverManager.getConnection(url)) {
            payRefund(conn, token, refundId);
            System.out.println("committed with token " + token);
        } catch (Refused e) {
            if (e.reason.equals("token_already_used")) {
                // not a lost lock: this token wrote in another transaction
                // already: take a new one from the lock for each transaction
                System.out.println("SF001 " + e.reason + ": " + e.getMessage() + ": stopping");
                System.exit(4);
            }
            // stale_token, lease_expired (claim_taken_over: the same for a
            // claim): the lock is gone; re-acquire it before any new work
            System.out.println("SF001: " + e.getMessage() + ": the lock is gone (" + e.reason + "), stopping");
            System.exit(3);
        }
    }
}
