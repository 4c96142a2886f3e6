package io.github.fencingpg.fencing;

import java.sql.Connection;
import java.sql.SQLException;

/**
 * The statements of a fenced transaction, in the shape of Spring's {@code TransactionCallback}:
 * they run on {@code conn} inside the transaction; what they return is returned once it commits.
 */
@FunctionalInterface
public interface Work<T> {
    T run(Connection conn) throws SQLException;
}
