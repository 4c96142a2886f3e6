package io.github.fencingpg.fencing;

import java.util.List;
import java.util.Objects;

/**
 * A key or table scope whose fence a lock source raises when it takes the lock (the first meter):
 * {@code Scope.of("ledger", "acct-1")} is the key scope of {@code acct-1} in a key-scope table,
 * {@code Scope.of("refunds")} the table scope. The key values are text, in the order of the
 * table's key columns; the server converts them to the columns' types.
 */
public record Scope(String table, List<String> key) {

    public Scope {
        Objects.requireNonNull(table, "table");
        key = List.copyOf(key);
    }

    public static Scope of(String table, String... key) {
        return new Scope(table, List.of(key));
    }

    @Override
    public String toString() {
        return key.isEmpty() ? table : table + key;
    }
}
