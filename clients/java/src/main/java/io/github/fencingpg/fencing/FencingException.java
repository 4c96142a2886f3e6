package io.github.fencingpg.fencing;

import java.sql.SQLException;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * Every error of the fencing extension (SQLSTATE {@code SF001} to {@code SF005}) and of this
 * library. Unchecked; the driver's {@link SQLException} is kept as the cause, so its SQLSTATE,
 * DETAIL, HINT and table stay at hand ({@link #getSQLState()}, {@link #getDetail()},
 * {@link #getHint()}, {@link #getTable()}).
 */
public class FencingException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public FencingException(String message, Throwable cause) {
        super(message, cause);
    }

    /** The driver's exception, or null for an error of this library itself. */
    public SQLException getSQLException() {
        return getCause() instanceof SQLException e ? e : null;
    }

    /** The SQLSTATE, or null for an error of this library itself. */
    public String getSQLState() {
        SQLException e = getSQLException();
        return e == null ? null : e.getSQLState();
    }

    private ServerErrorMessage server() {
        return getCause() instanceof PSQLException p ? p.getServerErrorMessage() : null;
    }

    /** The server's DETAIL, or null. */
    public String getDetail() {
        ServerErrorMessage m = server();
        return m == null ? null : m.getDetail();
    }

    /** The server's HINT, or null. */
    public String getHint() {
        ServerErrorMessage m = server();
        return m == null ? null : m.getHint();
    }

    /** The table the server named, or null. */
    public String getTable() {
        ServerErrorMessage m = server();
        return m == null ? null : m.getTable();
    }
}
