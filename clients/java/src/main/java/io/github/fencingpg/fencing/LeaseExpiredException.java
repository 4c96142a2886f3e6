package io.github.fencingpg.fencing;

import java.sql.SQLException;

/** {@code SF001 lease_expired}: the built-in lease of the table ran out or was released. Take it again. */
public class LeaseExpiredException extends FencedOutException {
    private static final long serialVersionUID = 1L;

    public LeaseExpiredException(String message, SQLException cause) {
        super(message, cause, "lease_expired");
    }
}
