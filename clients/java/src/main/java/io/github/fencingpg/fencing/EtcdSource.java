package io.github.fencingpg.fencing;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.kv.GetResponse;
import io.etcd.jetcd.kv.TxnResponse;
import io.etcd.jetcd.lease.LeaseKeepAliveResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.DeleteOption;
import io.etcd.jetcd.options.GetOption;
import io.etcd.jetcd.options.PutOption;
import io.etcd.jetcd.options.WatchOption;
import io.etcd.jetcd.support.CloseableClient;
import io.etcd.jetcd.watch.WatchEvent;
import io.grpc.stub.StreamObserver;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;

/**
 * An etcd lock, with jetcd: etcd's own mutex, as {@code etcdctl lock NAME} and Go's
 * {@code concurrency.Mutex} take it (so every client excludes every other). The holder's key is
 * {@code NAME/<lease id in hex>}, put under a lease of its time to live; the key with the lowest
 * create revision holds the lock, the others wait for the deletion of the key just before theirs.
 *
 * <p>A token's number is the <b>header revision of a transaction that puts the holder's own key
 * while it is still this grant's</b> ({@code If(CreateRevision(key) == mine) Then(Put(key))}): the
 * grant's token is the first such put right after the lock is taken, each {@link #nextToken()}
 * another. A failed compare means the lock is lost. Tokens are {@code (generation, revision)}, the
 * generation of service {@code etcd}.
 *
 * <p>The lease is kept alive by jetcd from this process, so a frozen process stops renewing it and
 * loses the lock after its time to live; the source also checks its key every third of the time to
 * live. etcd grants leases of a few seconds at least (2 s by default); the time to live is rounded
 * up to whole seconds.
 */
public final class EtcdSource extends LockSource {
    private final Client etcd;
    private final ByteSequence prefix;
    private final long ttlSeconds;
    private volatile ByteSequence key;
    private volatile long lease;
    private volatile long createRevision;
    private volatile long generation;
    private volatile CloseableClient keepAlive;

    /**
     * @param etcd a jetcd client ({@code Client.builder().endpoints(url).build()})
     * @param name the lock's name (the prefix of its keys)
     * @param db where the generation is read and the fences raised
     * @param ttl the lease's time to live (whole seconds, rounded up)
     */
    public EtcdSource(Client etcd, String name, DataSource db, Duration ttl) {
        super(db, name);
        this.etcd = etcd;
        this.prefix = bytes(name + "/");
        this.ttlSeconds = Math.max(1, (ttl.toMillis() + 999) / 1000);
    }

    private static ByteSequence bytes(String s) {
        return ByteSequence.from(s, StandardCharsets.UTF_8);
    }

    private static final long CALL = 10;     // seconds a call to etcd may take

    @Override
    protected Token grant(Duration wait) throws Exception {
        long deadline = System.nanoTime() + wait.toNanos();
        for (int tries = 1;; tries++) {
            try {
                return grant(deadline);
            } catch (java.util.concurrent.ExecutionException e) {
                // the lease ran out between its grant and the put (a pause): a new lease
                if (tries >= 3 || String.valueOf(e.getCause()).indexOf("lease not found") < 0) {
                    throw e;
                }
            }
        }
    }

    private Token grant(long deadline) throws Exception {
        long id = etcd.getLeaseClient().grant(ttlSeconds).get(CALL, TimeUnit.SECONDS).getID();
        ByteSequence mine = prefix.concat(bytes(Long.toHexString(id)));
        CloseableClient ka = etcd.getLeaseClient().keepAlive(id, new StreamObserver<LeaseKeepAliveResponse>() {
            @Override
            public void onNext(LeaseKeepAliveResponse r) {
                if (r.getTTL() <= 0) {
                    lostAsync("etcd lease expired");
                }
            }

            @Override
            public void onError(Throwable t) {
                lostAsync("etcd lease keep-alive: " + t.getMessage());
            }

            @Override
            public void onCompleted() {}
        });
        boolean ok = false;
        try {
            Cmp absent = new Cmp(mine, Cmp.Op.EQUAL, CmpTarget.createRevision(0));
            TxnResponse r = etcd.getKVClient().txn().If(absent)
                    .Then(Op.put(mine, ByteSequence.EMPTY, PutOption.builder().withLeaseId(id).build()))
                    .Else(Op.get(mine, GetOption.DEFAULT)).commit().get(CALL, TimeUnit.SECONDS);
            long myRev = r.isSucceeded() ? r.getHeader().getRevision()
                    : r.getGetResponses().get(0).getKvs().get(0).getCreateRevision();
            while (true) {
                // the key just before mine, if any: the lock is mine when there is none
                GetResponse before = etcd.getKVClient().get(prefix, GetOption.builder().isPrefix(true)
                        .withMaxCreateRevision(myRev - 1).withSortField(GetOption.SortTarget.CREATE)
                        .withSortOrder(GetOption.SortOrder.DESCEND).withLimit(1).build())
                        .get(CALL, TimeUnit.SECONDS);
                if (before.getKvs().isEmpty()) {
                    break;
                }
                if (System.nanoTime() >= deadline) {
                    return null;
                }
                KeyValue kv = before.getKvs().get(0);
                CountDownLatch gone = new CountDownLatch(1);
                var w = etcd.getWatchClient().watch(kv.getKey(),
                        WatchOption.builder().withRevision(before.getHeader().getRevision() + 1).build(),
                        resp -> {
                            for (WatchEvent e : resp.getEvents()) {
                                if (e.getEventType() == WatchEvent.EventType.DELETE) {
                                    gone.countDown();
                                }
                            }
                        });
                try {
                    long left = deadline - System.nanoTime();
                    gone.await(Math.max(1, Math.min(left, TimeUnit.SECONDS.toNanos(1))), TimeUnit.NANOSECONDS);
                } finally {
                    w.close();
                }
            }
            key = mine;
            lease = id;
            createRevision = myRev;
            keepAlive = ka;
            generation = generation("etcd");
            long rev = putMine();
            if (rev < 0) {
                return null;
            }
            ok = true;
            return new Token(generation, rev);
        } finally {
            if (!ok) {
                ka.close();
                revoke(id, mine);
            }
        }
    }

    /** Put my key while it is this grant's: the header revision, or -1 when the lock is lost. */
    private long putMine() throws Exception {
        Cmp mine = new Cmp(key, Cmp.Op.EQUAL, CmpTarget.createRevision(createRevision));
        TxnResponse r = etcd.getKVClient().txn().If(mine)
                .Then(Op.put(key, ByteSequence.EMPTY, PutOption.builder().withLeaseId(lease).build()))
                .commit().get(CALL, TimeUnit.SECONDS);
        return r.isSucceeded() ? r.getHeader().getRevision() : -1;
    }

    private void revoke(long id, ByteSequence k) {
        try {
            etcd.getKVClient().delete(k, DeleteOption.DEFAULT).get(CALL, TimeUnit.SECONDS);
            etcd.getLeaseClient().revoke(id).get(CALL, TimeUnit.SECONDS);
        } catch (Exception e) {
            // the lease runs out by itself
        }
    }

    @Override
    protected Token next() throws Exception {
        long rev = putMine();
        return rev < 0 ? null : new Token(generation, rev);
    }

    @Override
    protected boolean renew() throws Exception {
        GetResponse r = etcd.getKVClient().get(key).get(CALL, TimeUnit.SECONDS);
        return !r.getKvs().isEmpty() && r.getKvs().get(0).getCreateRevision() == createRevision;
    }

    @Override
    protected Duration renewEvery() {
        return Duration.ofMillis(ttlSeconds * 1000 / 3);
    }

    @Override
    protected void drop(Token last) throws Exception {
        CloseableClient ka = keepAlive;
        if (ka != null) {
            ka.close();
        }
        Cmp mine = new Cmp(key, Cmp.Op.EQUAL, CmpTarget.createRevision(createRevision));
        etcd.getKVClient().txn().If(mine).Then(Op.delete(key, DeleteOption.DEFAULT)).commit()
                .get(CALL, TimeUnit.SECONDS);
        try {
            etcd.getLeaseClient().revoke(lease).get(CALL, TimeUnit.SECONDS);
        } catch (Exception e) {
            // expired already
        }
    }
}
