package io.github.fencingpg.fencing;

import java.sql.SQLException;

/** {@code SF001 stale_token}: a newer token was accepted, the lock was lost. Stop; take the lock again. */
public class StaleTokenException extends FencedOutException {
    private static final long serialVersionUID = 1L;

    public StaleTokenException(String message, SQLException cause) {
        super(message, cause, "stale_token");
    }
}
