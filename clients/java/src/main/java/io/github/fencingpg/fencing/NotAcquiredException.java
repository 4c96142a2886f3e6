package io.github.fencingpg.fencing;

/** The lock was not taken in time ({@link TokenSource#acquire(java.time.Duration)}). */
public class NotAcquiredException extends FencingException {
    private static final long serialVersionUID = 1L;

    public NotAcquiredException(String message) {
        super(message, null);
    }

    public NotAcquiredException(String message, Throwable cause) {
        super(message, cause);
    }
}
