package io.github.fencingpg.fencing;

import java.sql.SQLException;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/** The typed exception of an {@link SQLException} from the server. */
public final class Errors {
    private Errors() {}

    /** SQLSTATEs this library retries, with a fresh connection and a fresh token. */
    public static boolean retryable(SQLException e) {
        String s = e.getSQLState();
        return "40001".equals(s) || "40P01".equals(s);
    }

    /**
     * The {@link FencingException} for an error of the extension ({@code SF001}..{@code SF005}),
     * keeping {@code e} as its cause; null for any other error.
     */
    public static FencingException translate(SQLException e) {
        String state = e.getSQLState();
        if (state == null || !state.startsWith("SF")) {
            return null;
        }
        String msg = e.getMessage();
        switch (state) {
            case "SF001": {
                String reason = null;
                if (e instanceof PSQLException p) {
                    ServerErrorMessage m = p.getServerErrorMessage();
                    reason = m == null ? null : m.getConstraint();
                }
                if (reason == null || reason.equals("stale_token")) {
                    return new StaleTokenException(msg, e);
                }
                return switch (reason) {
                    case "token_already_used" -> new TokenAlreadyUsedException(msg, e);
                    case "lease_expired" -> new LeaseExpiredException(msg, e);
                    case "claim_taken_over" -> new ClaimTakenOverException(msg, e);
                    default -> new FencedOutException(msg, e, reason);
                };
            }
            case "SF002":
                return new TokenRequiredException(msg, e);
            case "SF003":
                return new KeyReusedException(msg, e);
            case "SF004":
                return new KeyInProgressException(msg, e);
            case "SF005":
                return new GuardAlteredException(msg, e);
            default:
                return new FencingException(msg, e);
        }
    }

    /** The typed exception when there is one, else {@code e} wrapped as it is (unchecked). */
    static RuntimeException unchecked(SQLException e) {
        FencingException f = translate(e);
        return f != null ? f : new UncheckedSqlException(e);
    }
}
