package io.github.fencingpg.fencing;

import io.etcd.jetcd.Client;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.apache.curator.framework.CuratorFramework;
import org.redisson.api.RedissonClient;
import redis.clients.jedis.JedisPooled;

/** Token sources of each kind, for the tests and the worker; {@link #close()} closes their clients. */
final class Kinds implements AutoCloseable {
    static final List<String> ALL = List.of("lease", "etcd", "zookeeper", "redis", "redisson");

    private final DataSource db;
    private final List<AutoCloseable> clients = new ArrayList<>();
    private Client etcd;
    private CuratorFramework zk;
    private JedisPooled redis;
    private RedissonClient redisson;
    private final long ttlMs;

    Kinds(DataSource db, long ttlMs) {
        this.db = db;
        this.ttlMs = ttlMs;
    }

    /** The shortest pause that loses a lock of this kind (its time to live, etcd's whole seconds). */
    static long ttlOf(String kind, long ttlMs) {
        return kind.equals("etcd") ? Math.max(2000, ttlMs) : ttlMs;
    }

    LockSource make(String kind, String name, String holder) {
        switch (kind) {
            case "lease":
                return new LeaseSource(db, name, holder, Duration.ofMillis(ttlMs));
            case "etcd":
                if (etcd == null) {
                    etcd = Env.etcd();
                    clients.add(etcd);
                }
                return new EtcdSource(etcd, name, db, Duration.ofMillis(ttlOf(kind, ttlMs)));
            case "zookeeper":
                if (zk == null) {
                    zk = Env.zk((int) Math.max(1000, ttlMs));
                    clients.add(zk);
                }
                return new ZooKeeperSource(zk, "/fencing-test/" + name, db);
            case "redis":
                if (redis == null) {
                    redis = Env.redis();
                    clients.add(redis);
                }
                return new RedisSource(redis, name, db, Duration.ofMillis(ttlMs));
            case "redisson":
                if (redisson == null) {
                    redisson = Env.redisson(ttlMs);
                    clients.add(redisson::shutdown);
                }
                return new RedissonSource(redisson, name, db);
            default:
                throw new IllegalArgumentException(kind);
        }
    }

    @Override
    public void close() {
        for (AutoCloseable c : clients) {
            try {
                c.close();
            } catch (Exception e) {
                // closing anyway
            }
        }
        clients.clear();
    }
}
