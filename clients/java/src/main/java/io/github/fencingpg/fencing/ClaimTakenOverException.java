package io.github.fencingpg.fencing;

import java.sql.SQLException;

/** {@code SF001 claim_taken_over}: an idempotency claim was taken over by another owner. Record nothing; running the key again learns its state. */
public class ClaimTakenOverException extends FencedOutException {
    private static final long serialVersionUID = 1L;

    public ClaimTakenOverException(String message, SQLException cause) {
        super(message, cause, "claim_taken_over");
    }
}
