package io.github.fencingpg.fencing;

import java.time.Duration;
import java.util.List;
import java.util.UUID;
import javax.sql.DataSource;
import redis.clients.jedis.UnifiedJedis;

/**
 * A Redis lock (one node), with Jedis: {@code lock:{NAME}} holds the holder's random id,
 * {@code fence:{NAME}} the counter. The grant is one script, {@code SET lock:{NAME} id NX PX ttl}
 * and, only when that set it, {@code INCR fence:{NAME}}: a caller that did not get the lock never
 * moves the counter. Each transaction's token is another script: while {@code lock:{NAME}} still
 * holds this holder's id, {@code PEXPIRE} it and {@code INCR} the counter. Tokens are
 * {@code (generation, counter)}, the generation of service {@code redis} read from PostgreSQL right
 * after the grant. Renewal ({@code PEXPIRE} while the id is ours) runs every third of the time to
 * live; release deletes the key only while it holds our id. The same protocol as the other
 * clients, so they exclude each other. Redlock over several nodes has no counter they agree on.
 */
public final class RedisSource extends LockSource {
    static final String ACQUIRE = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
            + "return redis.call('INCR', KEYS[2]) end return false";
    static final String NEXT = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
            + "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return redis.call('INCR', KEYS[2]) end return false";
    static final String RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
            + "return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";
    static final String RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then "
            + "return redis.call('DEL', KEYS[1]) end return 0";

    private final UnifiedJedis redis;
    private final Duration ttl;
    private final List<String> keys;
    private volatile String id;
    private volatile long generation;

    /**
     * @param redis a Jedis client ({@code new JedisPooled(host, port)})
     * @param name the lock's name
     * @param db where the generation is read and the fences raised
     * @param ttl the lock's time to live
     */
    public RedisSource(UnifiedJedis redis, String name, DataSource db, Duration ttl) {
        super(db, name);
        this.redis = redis;
        this.ttl = ttl;
        this.keys = List.of("lock:{" + name + "}", "fence:{" + name + "}");
        if (ttl.toMillis() <= 0) {
            throw new IllegalArgumentException("ttl must be positive: " + ttl);
        }
    }

    private String ttlMs() {
        return Long.toString(ttl.toMillis());
    }

    @Override
    protected Token grant(Duration wait) throws Exception {
        long deadline = System.nanoTime() + wait.toNanos();
        long poll = Math.max(5, Math.min(100, ttl.toMillis() / 20));
        while (true) {
            String mine = UUID.randomUUID().toString();
            Object n = redis.eval(ACQUIRE, keys, List.of(mine, ttlMs()));
            if (n instanceof Long counter) {
                id = mine;
                generation = generation("redis");
                return new Token(generation, counter);
            }
            if (System.nanoTime() >= deadline) {
                return null;
            }
            pause(poll, deadline);
        }
    }

    @Override
    protected Token next() {
        Object n = redis.eval(NEXT, keys, List.of(id, ttlMs()));
        return n instanceof Long counter ? new Token(generation, counter) : null;
    }

    @Override
    protected boolean renew() {
        Object n = redis.eval(RENEW, keys.subList(0, 1), List.of(id, ttlMs()));
        return n instanceof Long r && r == 1;
    }

    @Override
    protected Duration renewEvery() {
        return ttl.dividedBy(3);
    }

    @Override
    protected void drop(Token last) {
        redis.eval(RELEASE, keys.subList(0, 1), List.of(id));
    }
}
