package io.github.fencingpg.fencing;

import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

/**
 * A token you already have. {@link #nextToken()} gives the same token every time, so a second
 * transaction with it on a strict table is refused with {@link TokenAlreadyUsedException}: use a
 * lock's source for a holder that writes several transactions.
 */
public final class StaticToken implements TokenSource {
    private final Token token;

    public StaticToken(Token token) {
        this.token = Objects.requireNonNull(token, "token");
    }

    public static StaticToken of(String text) {
        return new StaticToken(Token.parse(text));
    }

    public static StaticToken of(Token token) {
        return new StaticToken(token);
    }

    @Override
    public Optional<Token> tryAcquire() {
        return Optional.of(token);
    }

    @Override
    public Token acquire(Duration timeout) {
        return token;
    }

    @Override
    public Token nextToken() {
        return token;
    }

    @Override
    public Token token() {
        return token;
    }

    @Override
    public boolean isHeld() {
        return true;
    }

    /** Never called: a static token is never lost. */
    @Override
    public StaticToken onLost(Runnable callback) {
        return this;
    }

    /** Not supported: raise fences with {@code fencing.raise_fence} yourself. */
    @Override
    public StaticToken fences(Scope... scopes) {
        throw new UnsupportedOperationException("a StaticToken takes no lock: call fencing.raise_fence yourself");
    }

    @Override
    public void release() {}

    @Override
    public String toString() {
        return "StaticToken(" + token + ")";
    }
}
