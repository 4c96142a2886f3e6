package io.github.fencingpg.fencing;

import java.sql.SQLException;

/** {@code SF004}: another owner runs the idempotency key. Try again later. */
public class KeyInProgressException extends FencingException {
    private static final long serialVersionUID = 1L;

    public KeyInProgressException(String message, SQLException cause) {
        super(message, cause);
    }
}
