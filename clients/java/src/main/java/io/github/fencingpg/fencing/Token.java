package io.github.fencingpg.fencing;

import java.util.Objects;

/**
 * A fencing token: a {@code fencing.fence}, {@code (epoch, counter)}, written {@code "E:C"}.
 * Tokens are ordered as the server orders fences: epoch first, then counter.
 */
public record Token(long epoch, long counter) implements Comparable<Token> {

    public Token {
        if (epoch < 0 || counter < 0) {
            throw new IllegalArgumentException("a token's parts are not negative: " + epoch + ":" + counter);
        }
    }

    /** {@code "E:C"}, or a bare {@code "C"} (epoch 0), as the server's input function reads it. */
    public static Token parse(String text) {
        Objects.requireNonNull(text, "token text");
        String s = text.strip();
        int colon = s.indexOf(':');
        try {
            if (colon < 0) {
                return new Token(0, parsePart(s));
            }
            return new Token(parsePart(s.substring(0, colon)), parsePart(s.substring(colon + 1)));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("invalid token \"" + text + "\": expected \"epoch:counter\"", e);
        }
    }

    private static long parsePart(String p) {
        if (p.isEmpty() || !p.chars().allMatch(Character::isDigit)) {
            throw new NumberFormatException(p);
        }
        return Long.parseLong(p);
    }

    /**
     * The token of a ZooKeeper zxid under a generation, as {@code fencing.fence_from_zxid(zxid,
     * generation)} computes it: {@code ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff)}.
     */
    public static Token fromZxid(long zxid, long generation) {
        if (generation < 0 || generation > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("generation out of range: " + generation);
        }
        return new Token((generation << 32) | (zxid >>> 32), zxid & 0xffffffffL);
    }

    @Override
    public int compareTo(Token o) {
        int c = Long.compare(epoch, o.epoch);
        return c != 0 ? c : Long.compare(counter, o.counter);
    }

    /** Newer than {@code o}: what a strict table needs to accept a write after {@code o}. */
    public boolean isNewerThan(Token o) {
        return compareTo(o) > 0;
    }

    /** The text the server reads: {@code "E:C"}. */
    @Override
    public String toString() {
        return epoch + ":" + counter;
    }
}
