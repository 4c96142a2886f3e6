package io.github.fencingpg.fencing;

import java.sql.SQLException;

/** {@code SF003}: an idempotency key reused for another request. A bug of the caller. */
public class KeyReusedException extends FencingException {
    private static final long serialVersionUID = 1L;

    public KeyReusedException(String message, SQLException cause) {
        super(message, cause);
    }
}
