package io.github.fencingpg.fencing;

import java.sql.SQLException;

/** {@code SF001 token_already_used}: a strict table refused a token another transaction used already. A programming error, not a lost lock: take a new token per transaction ({@link TokenSource#nextToken()}, what {@link Fenced#run} does with a lock). */
public class TokenAlreadyUsedException extends FencedOutException {
    private static final long serialVersionUID = 1L;

    public TokenAlreadyUsedException(String message, SQLException cause) {
        super(message, cause, "token_already_used");
    }
}
