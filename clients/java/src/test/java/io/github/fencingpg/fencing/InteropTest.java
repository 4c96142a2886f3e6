package io.github.fencingpg.fencing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.zaxxer.hikari.HikariDataSource;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.kv.GetResponse;
import io.etcd.jetcd.kv.TxnResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.GetOption;
import io.etcd.jetcd.options.PutOption;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.curator.framework.CuratorFramework;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.postgresql.util.PSQLException;
import redis.clients.jedis.JedisPooled;

/**
 * The sources take the same locks as every other client of the lock services, and their tokens
 * share one fence with them. For each service, a reference holder written from
 * docs/lock-services.md, not from this library: {@code etcdctl lock NAME} (its numbers the header
 * revisions of a transaction that puts its own key while the key's create revision is still its
 * own); the docs' ZooKeeper recipe with kazoo, its {@code Lock} with the common node names
 * {@code <id>-lock-NNNNNNNNNN} (the locksvc suite's worker, {@code FENCING_JAVA_ZK_REFERENCE}: the
 * command that runs it; its numbers the mzxid of a {@code setData} on its node, its tokens
 * {@code fencing.fence_from_zxid}); the docs' three Redis scripts on {@code lock:{NAME}} and
 * {@code fence:{NAME}}. The source and the reference holder exclude each other both ways, and one
 * row's fence takes the tokens of both in lock order: the reference holder's token after the
 * source's grant beats the source's older token, and the source's token after the reference
 * holder's grant beats the reference holder's older one.
 */
class InteropTest {
    static HikariDataSource db;

    @BeforeAll
    static void setUp() {
        db = Env.pool(4);
        Env.sql(db, Env.EXTENSION);
        Generations.ensure(db, "etcd", "zookeeper", "redis");
    }

    @AfterAll
    static void tearDown() {
        db.close();
    }

    /** A holder of the docs' protocol. */
    interface Reference extends AutoCloseable {
        /** Begin taking the lock (it waits while another holds it). */
        void start() throws Exception;

        /** Whether it holds the lock, waiting up to {@code d}. */
        boolean locked(Duration d) throws Exception;

        /** A new token (E:C) of the lock held. */
        String next() throws Exception;

        void release() throws Exception;

        @Override
        void close();
    }

    static long generation(String service) {
        return Long.parseLong(Env.one(db, "SELECT generation FROM fencing_lock_generations WHERE service = '"
                + service + "'"));
    }

    /** A fenced transaction as the docs write one: null, or the SF001 reason. */
    static String byHand(String table, String token) throws SQLException {
        try (Connection c = db.getConnection()) {
            c.setAutoCommit(false);
            try (PreparedStatement set = c.prepareStatement("SELECT fencing.set_token(?::text::fencing.fence)");
                    PreparedStatement up = c.prepareStatement("UPDATE " + table + " SET v = v + 1 WHERE k = 'a'")) {
                set.setString(1, token);
                set.execute();
                up.executeUpdate();
                c.commit();
                return null;
            } catch (PSQLException e) {
                c.rollback();
                if (!"SF001".equals(e.getSQLState())) {
                    throw e;
                }
                return e.getServerErrorMessage().getConstraint();
            }
        }
    }

    static String table() {
        String t = "interop_" + Long.toHexString(UUID.randomUUID().getMostSignificantBits() >>> 8);
        Env.sql(db, "CREATE TABLE " + t + " (k text PRIMARY KEY, v int NOT NULL, fence fencing.fence)",
                "INSERT INTO " + t + " VALUES ('a', 0, NULL)", "SELECT fencing.protect('" + t + "')");
        return t;
    }

    static void write(String table, TokenSource s) {
        Fenced.run(db, s, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE " + table + " SET v = v + 1 WHERE k = 'a'")) {
                return ps.executeUpdate();
            }
        });
    }

    /**
     * The source and ref on one lock, one row's fence; {@code holds.accept(waiting, grant)} checks
     * what the source has in the lock service, right after its grant and while it waits behind ref.
     */
    static void interop(LockSource src, Reference ref, BiConsumer<Boolean, Token> holds) throws Exception {
        String table = table();
        try (ref) {
            // the source holds; the reference holder waits
            Token grant = src.acquire(Duration.ofSeconds(30));
            holds.accept(false, grant);
            write(table, src);
            ref.start();
            assertFalse(ref.locked(Duration.ofMillis(1500)), "the reference holder took the lock the source holds");
            Token inHand = src.nextToken();     // taken, never written: as a holder that froze
            src.release();

            // the reference holder holds; the source waits
            assertTrue(ref.locked(Duration.ofSeconds(30)), "the reference holder got the lock the source released");
            String r1 = ref.next();
            assertNull(byHand(table, r1), "the reference holder's write with " + r1);
            assertTrue(Token.parse(r1).isNewerThan(inHand), r1 + " after the source's " + inHand);
            assertThrows(StaleTokenException.class, () -> write(table, StaticToken.of(inHand)),
                    "the source's older token " + inHand + " after the reference holder's " + r1);
            assertTrue(src.tryAcquire().isEmpty(), "the source took the lock the reference holder holds");
            CompletableFuture<Token> waiting = CompletableFuture.supplyAsync(() -> src.acquire(Duration.ofSeconds(60)));
            try {
                Token t = waiting.get(1, TimeUnit.SECONDS);
                fail("the source took the lock the reference holder holds: " + t);
            } catch (TimeoutException expected) {
                // waiting, as it should
            }
            holds.accept(true, grant);
            String rInHand = ref.next();
            ref.release();

            // the source holds again, after the reference holder
            Token again = waiting.get(60, TimeUnit.SECONDS);
            Token last = Fenced.run(db, src, c -> {
                try (PreparedStatement ps = c.prepareStatement("UPDATE " + table + " SET v = v + 1 WHERE k = 'a'")) {
                    ps.executeUpdate();
                }
                return src.token();
            });
            assertTrue(again.isNewerThan(Token.parse(rInHand)), again + " after the reference holder's " + rInHand);
            assertEquals("stale_token", byHand(table, rInHand),
                    "the reference holder's older token " + rInHand + " after the source's " + last);
            assertEquals("3 " + last, Env.one(db, "SELECT v || ' ' || fence FROM " + table));
            System.out.printf("one fence: source %s (in hand %s), reference %s (in hand %s), source %s%n",
                    grant, inHand, r1, rInHand, last);
        } finally {
            if (src.isHeld()) {
                src.release();
            }
        }
    }

    static void awaitTrue(String what, java.util.function.BooleanSupplier cond) {
        Env.until(what, 10, cond);
    }

    // ---- etcd: `etcdctl lock NAME` -------------------------------------------------------------

    /** {@code etcdctl lock NAME}: prints its key once it holds the lock, unlocks on SIGTERM. */
    static final class Etcdctl implements Reference {
        final Client etcd;
        final String name;
        Process p;
        final CompletableFuture<String> line = new CompletableFuture<>();
        String key;
        long createRevision;
        long lease;
        long gen;

        Etcdctl(Client etcd, String name) {
            this.etcd = etcd;
            this.name = name;
        }

        @Override
        public void start() throws IOException {
            ProcessBuilder pb = new ProcessBuilder("etcdctl", "--endpoints=" + Env.service("FENCING_JAVA_ETCD"), "lock", name);
            pb.environment().put("ETCDCTL_API", "3");
            pb.redirectError(ProcessBuilder.Redirect.INHERIT);
            p = pb.start();
            BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            Thread t = new Thread(() -> {
                try {
                    line.complete(out.readLine());
                } catch (IOException e) {
                    line.completeExceptionally(e);
                }
            });
            t.setDaemon(true);
            t.start();
        }

        @Override
        public boolean locked(Duration d) throws Exception {
            if (key != null) {
                return true;
            }
            String l;
            try {
                l = line.get(d.toMillis(), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                return false;
            }
            assertNotNull(l, "etcdctl lock ended");
            key = l.trim();
            KeyValue kv = etcd.getKVClient().get(ByteSequence.from(key, StandardCharsets.UTF_8)).get(10, TimeUnit.SECONDS)
                    .getKvs().get(0);
            assertEquals(name + "/" + Long.toHexString(kv.getLease()), key, "etcdctl's key is NAME/<lease id in hex>");
            createRevision = kv.getCreateRevision();
            lease = kv.getLease();
            gen = generation("etcd");
            return true;
        }

        @Override
        public String next() throws Exception {
            ByteSequence k = ByteSequence.from(key, StandardCharsets.UTF_8);
            TxnResponse r = etcd.getKVClient().txn()
                    .If(new Cmp(k, Cmp.Op.EQUAL, CmpTarget.createRevision(createRevision)))
                    .Then(Op.put(k, ByteSequence.EMPTY, PutOption.builder().withLeaseId(lease).build()))
                    .commit().get(10, TimeUnit.SECONDS);
            assertTrue(r.isSucceeded(), "etcdctl's " + key + " is still its own");
            return gen + ":" + r.getHeader().getRevision();
        }

        @Override
        public void release() throws InterruptedException {
            close();
        }

        @Override
        public void close() {
            if (p != null && p.isAlive()) {
                p.destroy();        // SIGTERM: etcdctl deletes its key and revokes its lease
                try {
                    p.waitFor(10, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    @Test
    void etcdctlLock() throws Exception {
        try (Client etcd = Env.etcd()) {
            String name = SourcesTest.unique("interop");
            EtcdSource src = new EtcdSource(etcd, name, db, Duration.ofSeconds(10));
            ByteSequence prefix = ByteSequence.from(name + "/", StandardCharsets.UTF_8);
            interop(src, new Etcdctl(etcd, name), (waiting, grant) -> {
                // the source's key: NAME/<its lease id in hex>, as etcdctl's (whose comes first)
                int want = waiting ? 2 : 1;
                List<KeyValue> kvs = new ArrayList<>();
                awaitTrue(want + " keys under " + name + "/", () -> {
                    try {
                        GetResponse r = etcd.getKVClient().get(prefix, GetOption.builder().isPrefix(true)
                                .withSortField(GetOption.SortTarget.CREATE).withSortOrder(GetOption.SortOrder.ASCEND)
                                .build()).get(10, TimeUnit.SECONDS);
                        kvs.clear();
                        kvs.addAll(r.getKvs());
                        return kvs.size() == want;
                    } catch (InterruptedException | ExecutionException | TimeoutException e) {
                        throw new AssertionError(e);
                    }
                });
                KeyValue kv = kvs.get(want - 1);
                String k = kv.getKey().toString(StandardCharsets.UTF_8);
                assertEquals(name + "/" + Long.toHexString(kv.getLease()), k, "the source's key is NAME/<lease id in hex>");
                if (!waiting) {
                    assertEquals(k, src.key());
                }
            });
        }
    }

    // ---- ZooKeeper: the docs' kazoo recipe -----------------------------------------------------

    static final Pattern TOKEN = Pattern.compile("\"token\": \"([0-9]+:[0-9]+)\"");
    static final Pattern LOCK = Pattern.compile("\"lock\": \"([^\"]+)\"");

    static String field(Pattern p, String line) {
        Matcher m = p.matcher(line);
        assertTrue(m.find(), "no " + p + " in " + line);
        return m.group(1);
    }

    /**
     * The locksvc suite's worker (kazoo's Lock with the common node names): it takes the lock when it
     * starts and says {@code locked {json}}; {@code next} answers {@code ok {"token": ...}},
     * {@code unlock} gives the lock up.
     */
    static final class Kazoo implements Reference {
        final String path;
        Process p;
        PrintWriter in;
        final LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
        String node;

        Kazoo(String path) {
            this.path = path;
        }

        @Override
        public void start() throws IOException {
            List<String> cmd = new ArrayList<>(Arrays.asList(Env.service("FENCING_JAVA_ZK_REFERENCE").trim().split("\\s+")));
            cmd.addAll(List.of("zookeeper", "--who", "R", "--dsn", "", "--zk", Env.service("FENCING_JAVA_ZK"),
                    "--lock", path, "--session-timeout", "10"));
            ProcessBuilder pb = new ProcessBuilder(cmd);
            pb.redirectError(ProcessBuilder.Redirect.INHERIT);
            p = pb.start();
            in = new PrintWriter(p.outputWriter(StandardCharsets.UTF_8), true);
            BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            Thread t = new Thread(() -> {
                try {
                    for (String l; (l = out.readLine()) != null;) {
                        lines.add(l);
                    }
                } catch (IOException e) {
                    // ended
                }
            });
            t.setDaemon(true);
            t.start();
        }

        String read(Duration d) throws InterruptedException {
            return lines.poll(d.toMillis(), TimeUnit.MILLISECONDS);
        }

        @Override
        public boolean locked(Duration d) throws Exception {
            if (node != null) {
                return true;
            }
            String l = read(d);
            if (l == null) {
                assertTrue(p.isAlive(), "the kazoo holder ended");
                return false;
            }
            assertTrue(l.startsWith("locked "), "the kazoo holder: " + l);
            node = field(LOCK, l);
            System.out.println("the kazoo holder: " + l);
            return true;
        }

        @Override
        public String next() throws Exception {
            in.println("next");
            String l = read(Duration.ofSeconds(60));
            assertTrue(l != null && l.startsWith("ok "), "the kazoo holder's next token: " + l);
            return field(TOKEN, l);
        }

        @Override
        public void release() throws Exception {
            in.println("unlock");
            String l = read(Duration.ofSeconds(60));
            assertTrue(l != null && l.startsWith("unlocked"), "the kazoo holder's unlock: " + l);
        }

        @Override
        public void close() {
            if (p != null) {
                in.println("quit");
                in.close();
                try {
                    if (!p.waitFor(10, TimeUnit.SECONDS)) {
                        p.destroyForcibly();
                    }
                } catch (InterruptedException e) {
                    p.destroyForcibly();
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    @Test
    void kazooLockWithTheCommonNames() throws Exception {
        try (CuratorFramework zk = Env.zk(10000)) {
            String path = "/fencing-test/" + SourcesTest.unique("interop");
            ZooKeeperSource src = new ZooKeeperSource(zk, path, db);
            Kazoo ref = new Kazoo(path);
            Pattern ours = Pattern.compile("_c_[0-9a-f-]{36}-lock-\\d{10}");       // Curator's
            Pattern kazoos = Pattern.compile("[0-9a-f]{32}-lock-\\d{10}");         // the docs' kazoo recipe
            interop(src, ref, (waiting, grant) -> {
                int want = waiting ? 2 : 1;
                List<String> children = new ArrayList<>();
                awaitTrue(want + " nodes under " + path, () -> {
                    try {
                        children.clear();
                        children.addAll(zk.getChildren().forPath(path));
                        return children.size() == want;
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                });
                children.sort((a, b) -> a.substring(a.length() - 10).compareTo(b.substring(b.length() - 10)));
                String mine = children.get(want - 1);
                assertTrue(ours.matcher(mine).matches(), "the source's node " + mine);
                if (waiting) {
                    String theirs = children.get(0);
                    assertTrue(kazoos.matcher(theirs).matches(), "the kazoo holder's node " + theirs);
                    assertEquals(path + "/" + theirs, ref.node, "the kazoo holder's node holds, the source's waits");
                } else {
                    assertEquals(path + "/" + mine, src.node());
                }
            });
        }
    }

    // ---- Redis: the docs' scripts ---------------------------------------------------------------

    // the scripts of docs/lock-services.md, as written there
    static final String ACQUIRE = """
            if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
                return redis.call('INCR', KEYS[2])
            end
            return nil
            """;
    static final String NEXT = """
            if redis.call('GET', KEYS[1]) == ARGV[1] then
                redis.call('PEXPIRE', KEYS[1], ARGV[2])
                return redis.call('INCR', KEYS[2])
            end
            return nil
            """;
    static final String RELEASE = """
            if redis.call('GET', KEYS[1]) == ARGV[1] then
                return redis.call('DEL', KEYS[1])
            end
            return 0
            """;

    static final class RedisByHand implements Reference {
        final JedisPooled redis;
        final List<String> keys;
        final String me = UUID.randomUUID().toString();
        final CompletableFuture<Long> got = new CompletableFuture<>();
        volatile boolean stop;
        Long gen;

        RedisByHand(JedisPooled redis, String name) {
            this.redis = redis;
            this.keys = List.of("lock:{" + name + "}", "fence:{" + name + "}");
        }

        @Override
        public void start() {
            Thread t = new Thread(() -> {
                while (!stop) {
                    Object n = redis.eval(ACQUIRE, keys, List.of(me, "10000"));
                    if (n != null) {
                        got.complete((Long) n);
                        return;
                    }
                    try {
                        Thread.sleep(50);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            t.setDaemon(true);
            t.start();
        }

        @Override
        public boolean locked(Duration d) throws Exception {
            try {
                got.get(d.toMillis(), TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                return false;
            }
            if (gen == null) {
                gen = generation("redis");
            }
            return true;
        }

        @Override
        public String next() {
            Object n = redis.eval(NEXT, keys, List.of(me, "10000"));
            assertNotNull(n, "the docs' holder lost its lock");
            return gen + ":" + n;
        }

        @Override
        public void release() {
            assertEquals(1L, redis.eval(RELEASE, keys.subList(0, 1), List.of(me)));
        }

        @Override
        public void close() {
            stop = true;
        }
    }

    @Test
    void redisScriptsOfTheDocs() throws Exception {
        try (JedisPooled redis = Env.redis()) {
            String name = SourcesTest.unique("interop");
            RedisSource src = new RedisSource(redis, name, db, Duration.ofSeconds(10));
            interop(src, new RedisByHand(redis, name), (waiting, grant) -> {
                if (!waiting) {
                    // the source's lock: lock:{NAME} (its id), fence:{NAME} the grant's counter
                    assertTrue(redis.exists("lock:{" + name + "}"));
                    assertEquals(Long.toString(grant.counter()), redis.get("fence:{" + name + "}"));
                }
            });
        }
    }
}
