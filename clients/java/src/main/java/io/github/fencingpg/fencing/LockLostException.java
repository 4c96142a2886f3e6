package io.github.fencingpg.fencing;

/**
 * The lock was lost while held (it expired, was taken over or released): no new token is given
 * for it. Take the lock again.
 */
public class LockLostException extends FencingException {
    private static final long serialVersionUID = 1L;

    public LockLostException(String message) {
        super(message, null);
    }

    public LockLostException(String message, Throwable cause) {
        super(message, cause);
    }
}
