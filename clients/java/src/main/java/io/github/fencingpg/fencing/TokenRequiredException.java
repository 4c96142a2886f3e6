package io.github.fencingpg.fencing;

import java.sql.SQLException;

/** {@code SF002}: a write without a token, or with two that differ. A bug of the caller. */
public class TokenRequiredException extends FencingException {
    private static final long serialVersionUID = 1L;

    public TokenRequiredException(String message, SQLException cause) {
        super(message, cause);
    }
}
