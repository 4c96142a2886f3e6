// Pay a refund with the token of a lock (JDBC, pgjdbc).
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;

public class PayRefund {
    /** SF001: the lock that issued the token is gone. Stop; never retry. */
    static class LockLost extends Exception {
        LockLost(SQLException cause) { super(cause.getMessage(), cause); }
    }

    static void payRefund(Connection conn, String token, String refundId)
            throws SQLException, LockLost {
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
                if ("SF001".equals(e.getSQLState())) throw new LockLost(e);
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
        } catch (LockLost e) {
            System.out.println("SF001: " + e.getMessage() + ": the lock is gone, stopping");
            System.exit(3);
        }
    }
}
