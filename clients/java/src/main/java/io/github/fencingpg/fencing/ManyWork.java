package io.github.fencingpg.fencing;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.Map;

/**
 * The statements of a transaction under several locks: {@code tokens} has a token per key of the
 * sources given to {@link Fenced#runMany}; write each into the fence column of its rows.
 */
@FunctionalInterface
public interface ManyWork<T> {
    T run(Connection conn, Map<String, Token> tokens) throws SQLException;
}
