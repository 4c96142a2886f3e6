package io.github.fencingpg.fencing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;

/**
 * The generation of each lock service, kept in PostgreSQL: table
 * {@code fencing_lock_generations (service text PRIMARY KEY, generation bigint NOT NULL)}, rows
 * {@code etcd}, {@code zookeeper}, {@code redis}. A token of a lock service is
 * {@code (generation, number)}; the generation is read right after the lock is taken and kept for
 * the whole grant. Raise it ({@link #raise}) after a lock service lost its data, so that every new
 * token beats every token of before.
 */
public final class Generations {
    /** The table's name. */
    public static final String TABLE = "fencing_lock_generations";

    private Generations() {}

    /** Create the table when missing, and a row (generation 0) for each service missing. */
    public static void ensure(DataSource db, String... services) {
        try (Connection c = db.getConnection(); Statement st = c.createStatement()) {
            st.execute("CREATE TABLE IF NOT EXISTS " + TABLE
                    + " (service text PRIMARY KEY, generation bigint NOT NULL)");
            try (PreparedStatement ps = c.prepareStatement(
                    "INSERT INTO " + TABLE + " VALUES (?, 0) ON CONFLICT (service) DO NOTHING")) {
                for (String s : services) {
                    ps.setString(1, s);
                    ps.executeUpdate();
                }
            }
            if (!c.getAutoCommit()) {
                c.commit();
            }
        } catch (SQLException e) {
            throw Errors.unchecked(e);
        }
    }

    /** The service's generation (a row of 0 is made when it has none). */
    public static long read(DataSource db, String service) {
        try (Connection c = db.getConnection()) {
            return read(c, service);
        } catch (SQLException e) {
            if ("42P01".equals(e.getSQLState())) {
                throw new FencingException("no table " + TABLE + ": create it with Generations.ensure(dataSource, \""
                        + service + "\") or docs/lock-services.md's CREATE TABLE", e);
            }
            throw Errors.unchecked(e);
        }
    }

    static long read(Connection c, String service) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement("SELECT generation FROM " + TABLE + " WHERE service = ?")) {
            ps.setString(1, service);
            try (ResultSet rs = ps.executeQuery()) {
                if (rs.next()) {
                    return rs.getLong(1);
                }
            }
        }
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO " + TABLE + " VALUES (?, 0) ON CONFLICT (service) DO UPDATE SET generation = "
                        + TABLE + ".generation RETURNING generation")) {
            ps.setString(1, service);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                long g = rs.getLong(1);
                if (!c.getAutoCommit()) {
                    c.commit();
                }
                return g;
            }
        }
    }

    /** Raise the service's generation by one: its new value. */
    public static long raise(DataSource db, String service) {
        try (Connection c = db.getConnection();
                PreparedStatement ps = c.prepareStatement("INSERT INTO " + TABLE + " VALUES (?, 1) "
                        + "ON CONFLICT (service) DO UPDATE SET generation = " + TABLE + ".generation + 1 "
                        + "RETURNING generation")) {
            ps.setString(1, service);
            try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                long g = rs.getLong(1);
                if (!c.getAutoCommit()) {
                    c.commit();
                }
                return g;
            }
        } catch (SQLException e) {
            throw Errors.unchecked(e);
        }
    }
}
