package io.github.fencingpg.fencing;

import java.sql.SQLException;

/** {@code SF005}: DDL that would break a protected table's guard. */
public class GuardAlteredException extends FencingException {
    private static final long serialVersionUID = 1L;

    public GuardAlteredException(String message, SQLException cause) {
        super(message, cause);
    }
}
