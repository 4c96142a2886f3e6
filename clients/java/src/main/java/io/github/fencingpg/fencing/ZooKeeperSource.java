package io.github.fencingpg.fencing;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.framework.state.ConnectionStateListener;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

/**
 * A ZooKeeper lock, with Curator's {@link InterProcessMutex} (the lock recipe kazoo's {@code Lock}
 * follows too): an ephemeral sequential znode under {@code path}, the lowest holds. A token's
 * number is the <b>mzxid of a {@code setData} on the holder's own lock znode</b>: the grant's token
 * is the first right after the lock is taken, each {@link #nextToken()} another; a {@code setData}
 * that finds no node means the lock is lost (the session expired and the node went with it).
 * Tokens are {@link Token#fromZxid(long, long)} of that zxid and the generation of service
 * {@code zookeeper}.
 *
 * <p>The lock is lost when the client's session expires: Curator's heartbeats run in this
 * process, so a frozen process loses its lock once it is frozen past the session timeout; the
 * source signals the loss when Curator reports the connection {@code LOST} or its node is gone
 * (checked every third of the session timeout). {@link #release()} deletes the lock's node, from
 * any thread.
 */
public final class ZooKeeperSource extends LockSource {
    private final CuratorFramework zk;
    private final String path;
    private volatile String node;
    private volatile long generation;
    private final ConnectionStateListener listener = (client, state) -> {
        if (state == ConnectionState.LOST) {
            lostAsync("ZooKeeper session lost");
        }
    };

    /** Curator's mutex, its node's path at hand. */
    private static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework zk, String path) {
            super(zk, path);
        }

        String node() {
            return getLockPath();
        }
    }

    /**
     * @param zk a started Curator client
     * @param path the lock's znode (its children are the contenders)
     * @param db where the generation is read and the fences raised
     */
    public ZooKeeperSource(CuratorFramework zk, String path, DataSource db) {
        super(db, path);
        this.zk = zk;
        this.path = path;
    }

    @Override
    protected Token grant(Duration wait) throws Exception {
        Mutex m = new Mutex(zk, path);
        if (!m.acquire(wait.toMillis(), TimeUnit.MILLISECONDS)) {
            return null;
        }
        node = m.node();
        zk.getConnectionStateListenable().addListener(listener);
        try {
            generation = generation("zookeeper");
            Token t = next();
            if (t == null) {
                throw new LockLostException("ZooKeeper lock " + path + " lost right after it was taken");
            }
            return t;
        } catch (Exception e) {
            drop(null);
            throw e;
        }
    }

    @Override
    protected Token next() throws Exception {
        try {
            Stat st = zk.setData().forPath(node, Long.toString(System.currentTimeMillis())
                    .getBytes(StandardCharsets.US_ASCII));
            return Token.fromZxid(st.getMzxid(), generation);
        } catch (KeeperException.NoNodeException | KeeperException.SessionExpiredException e) {
            return null;
        }
    }

    @Override
    protected boolean renew() throws Exception {
        Stat st = zk.checkExists().forPath(node);
        return st != null && st.getEphemeralOwner() == zk.getZookeeperClient().getZooKeeper().getSessionId();
    }

    @Override
    protected Duration renewEvery() {
        try {
            return Duration.ofMillis(Math.max(100, zk.getZookeeperClient().getZooKeeper().getSessionTimeout() / 3));
        } catch (Exception e) {
            return Duration.ofSeconds(1);
        }
    }

    @Override
    protected void drop(Token last) throws Exception {
        zk.getConnectionStateListenable().removeListener(listener);
        String n = node;
        if (n != null) {
            try {
                zk.delete().guaranteed().forPath(n);
            } catch (KeeperException.NoNodeException e) {
                // gone with the session already
            }
        }
    }
}
