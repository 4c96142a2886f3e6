package io.github.fencingpg.fencing;

import java.sql.SQLException;

/**
 * {@code SF001}: the write's token lost to a newer one. {@link #reason()} is the server's
 * machine-readable reason (the error's constraint-name field): {@code stale_token},
 * {@code token_already_used}, {@code lease_expired} or {@code claim_taken_over}; each has its own
 * subclass. Never retried by this library.
 */
public class FencedOutException extends FencingException {
    private static final long serialVersionUID = 1L;
    private final String reason;

    public FencedOutException(String message, SQLException cause) {
        this(message, cause, "stale_token");
    }

    public FencedOutException(String message, SQLException cause, String reason) {
        super(message, cause);
        this.reason = reason;
    }

    public String reason() {
        return reason;
    }
}
