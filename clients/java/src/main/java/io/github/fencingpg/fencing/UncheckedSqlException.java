package io.github.fencingpg.fencing;

import java.sql.SQLException;

/**
 * An {@link SQLException} that is not the extension's (a unique violation, a broken connection),
 * passed on unchecked by the callbacks of {@link Fenced}; {@link #getCause()} is the driver's.
 */
public class UncheckedSqlException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public UncheckedSqlException(SQLException cause) {
        super(cause.getMessage(), cause);
    }

    @Override
    public synchronized SQLException getCause() {
        return (SQLException) super.getCause();
    }

    public String getSQLState() {
        return getCause().getSQLState();
    }
}
