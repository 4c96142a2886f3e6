/*-------------------------------------------------------------------------
 *
 * citus_transfer.c
 *	  Citus shard transfers (moves, splits, rebalancing) of a table in key
 *	  scope: on the new node, no write gets ahead of its fences.
 *
 * A logical-replication transfer fills the new shards of a co-location
 * group by one stream per table owner: one publication, slot and
 * subscription each.  A table in key scope and its scope's storage
 * (fencing.scope_<n>, the extension owner's) usually have different
 * owners, so the table's rows and the fences that its guard wrote in the
 * same transactions on the old node travel by two streams, applied on the
 * new node by two apply workers in no set order.  Citus waits, before it
 * blocks writes and again before it switches the shards over, until the
 * subscriptions have caught up with the old node; but it reads their
 * progress as the least latest_end_lsn of pg_stat_subscription, and a
 * subscription whose apply worker is not running (the launcher starts a
 * second one up to wal_retrieve_retry_interval after the first on 15, or
 * it keeps failing) or has not yet reported shows NULL there, which the
 * least of them skips.  The transfer can then complete with the table's
 * rows all there and the fences of the last writes, or of all of them,
 * missing: a fence below a token the old node accepted.
 *
 * The same holds the other way round: a table's stream whose apply
 * worker has not started yet is skipped as well, and the transfer can
 * complete with the fences there and the table's rows of the same
 * writes missing.
 *
 * So the table's stream is made to wait for the storage's, at the two
 * places where the guard is in the path of the table's stream on the new
 * node:
 *
 *   - When the guard arrives on a shard being filled (Citus creates a new
 *     shard's triggers, or attaches its partitions, after the first
 *     catch-up), fencing.citus_ddl_end() waits until every stream of the
 *     scope's storage from the same publisher has come as far as the
 *     table's own stream has (FencingCitusAwaitTransferDdl).  The command
 *     holds a lock that the table's apply worker needs, so the table's
 *     stream stands still meanwhile: what it replayed before the guard was
 *     there, its fences have come too.
 *
 *   - From then on, each write the table's apply worker replays on a shard
 *     in key scope (FencingCitusFollowReplay, from the guard) makes that
 *     replayed transaction wait, before it commits, until those streams
 *     have come as far as the old node's commit of the same transaction
 *     (replorigin_session_origin_lsn); the transaction there wrote its
 *     fences, if any, so they are here.  A DELETE, whose token only the
 *     storage carries, waits the same way.
 *
 * And the storage's stream waits for the tables': each transaction that
 * it replays waits, before it commits, until the streams of the tables in
 * key scope whose storage shards it fills, from the same publisher, have
 * come as far as the old node's commit of the same transaction
 * (AwaitScopeTables), from the first one on: before the guard is on a
 * new shard, its distributed table's shell on the node tells its scope.
 * Each stream that Citus skips thus holds back one that it sees, and the
 * transfer waits for both.  This side runs in the
 * storage's apply worker, which loads the library only when it is
 * preloaded (shared_preload_libraries = 'citus,fencing').
 *
 * A stream has come as far as a position when its replication origin
 * (the end of the last transaction it applied) or the last message that
 * its running apply worker received (last_lsn: a transaction's change,
 * its commit, or a keepalive sent after everything before it) is there:
 * the worker applies its messages one by one, in order.  That message may
 * be the commit of the very transaction waited for, which the other
 * stream's worker is committing, or waiting at itself: two streams that
 * wait for each other at the same transaction both go on.
 *
 * Every storage change on the old node comes with a write of a table of
 * the scope in the same shard group (the guard writes the storage only
 * for a write it checks), so while neither side can get ahead, Citus'
 * catch-up of one is a catch-up of the other.  Nothing but the storage's own stream writes the storage
 * shard on the new node before the switch: no unique violation, no
 * UPDATE that misses its row (REPLICA IDENTITY FULL compares the fence).
 *
 * A stream that stays behind for citus.logical_replication_timeout, or is
 * dropped, fails the wait with 55000; a table replicated with no stream
 * of its storage fails it with SF005.  Either way the transfer fails: the
 * old shards stay, with their fences.  Writes on a stream that carries the
 * storage itself (a table of the extension owner) need no wait: their
 * fences come before them in the same transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_subscription_rel.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "replication/logicalworker.h"
#include "replication/origin.h"
#include "replication/worker_internal.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "citus_shard.h"
#include "citus_transfer.h"
#include "compat.h"
#include "extension.h"
#include "fence.h"

/* A scope whose fences this replayed transaction waits for. */
typedef struct PendingScope
{
	char	   *storage;		/* its storage table in schema fencing */
	char	   *scope_name;
	char	   *relname;		/* a table the transaction replayed into */
} PendingScope;

/* The scopes of the current transaction of this apply worker. */
static LocalTransactionId pending_lxid = InvalidLocalTransactionId;
static List *pending_scopes = NIL;	/* of PendingScope, TopTransactionContext */

/* A stream of a scope's storage, and what it is waited for */
typedef struct ScopeStream
{
	Oid			subid;
	char	   *subname;
} ScopeStream;

/* Poll a stream at first every millisecond, at most every 100 ms. */
#define STREAM_POLL_MIN_MS	1
#define STREAM_POLL_MAX_MS	100

/* The wait event of the wait, in pg_stat_activity. */
static uint32
StreamWaitEvent(void)
{
	static uint32 wait_event = 0;

	/* named from 17 on (src/compat.h) */
	if (wait_event == 0)
		wait_event = FencingWaitEventNew("FencingScopeStream");
	return wait_event;
}

/*
 * How far the stream of subscription subid has come on its publisher:
 * the end of the last transaction it applied (its replication origin),
 * or the position of the last keepalive its running apply worker
 * received after applying everything before it, whichever is further.
 */
static XLogRecPtr
StreamProgress(Oid subid)
{
	char		originname[NAMEDATALEN];
	RepOriginId originid;
	XLogRecPtr	progress = InvalidXLogRecPtr;
	LogicalRepWorker *worker;

	/* the name the apply worker gives its origin */
	snprintf(originname, sizeof(originname), "pg_%u", subid);
	originid = replorigin_by_name(originname, true);
	if (originid != InvalidRepOriginId)
		progress = replorigin_get_progress(originid, false);

	/*
	 * A running apply worker applies its stream in order, one message at a
	 * time: with the message it has received last (last_lsn, which a
	 * keepalive raises too), everything before it is applied.  That message
	 * may be the commit of the very transaction a stream waits for, which
	 * this worker is committing (and may itself be waiting for the other
	 * stream at): counting it lets two streams that wait for each other at
	 * the same transaction both go on.
	 */
	LWLockAcquire(LogicalRepWorkerLock, LW_SHARED);
	worker = logicalrep_worker_find(subid, InvalidOid, true);
	if (worker != NULL && worker->last_lsn > progress)
		progress = worker->last_lsn;
	LWLockRelease(LogicalRepWorkerLock);
	return progress;
}

/* Is relid a shard of storage table fencing.<storage> (<storage>_<id>)? */
static bool
IsStorageShard(Oid relid, const char *storage)
{
	char	   *relname;
	size_t		len = strlen(storage);
	const char *p;

	if (get_rel_namespace(relid) != FencingSchemaOid())
		return false;
	relname = get_rel_name(relid);
	if (relname == NULL || strncmp(relname, storage, len) != 0 ||
		relname[len] != '_' || relname[len + 1] == '\0')
		return false;
	for (p = relname + len + 1; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return false;
	return true;
}

/*
 * The subscriptions of this database that replicate relid into this
 * node (pg_subscription_rel), as a list of OIDs.
 */
static List *
SubscriptionsOfRelation(Oid relid)
{
	Relation	rel = table_open(SubscriptionRelRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *subids = NIL;

	ScanKeyInit(&key, Anum_pg_subscription_rel_srrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, SubscriptionRelSrrelidSrsubidIndexId, true,
							  NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
		subids = list_append_unique_oid(subids,
										((Form_pg_subscription_rel) GETSTRUCT(tup))->srsubid);
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return subids;
}

/*
 * The streams of the storage fencing.<storage> that come to this node
 * from the publisher of subscription subid (the same connection: the same
 * old node, whose WAL positions compare), other than subid itself, which
 * *carries_storage tells whether it replicates a shard of the storage too.
 */
static List *
StorageStreams(Oid subid, const char *storage, bool *carries_storage)
{
	Subscription *own = GetSubscription(subid, true);
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *subids = NIL;
	List	   *streams = NIL;
	ListCell   *lc;

	*carries_storage = false;
	if (own == NULL)
		return NIL;

	/* every relation replicated into this database: a short list */
	rel = table_open(SubscriptionRelRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_subscription_rel sr = (Form_pg_subscription_rel) GETSTRUCT(tup);

		if (IsStorageShard(sr->srrelid, storage))
			subids = list_append_unique_oid(subids, sr->srsubid);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	foreach(lc, subids)
	{
		Oid			other = lfirst_oid(lc);
		Subscription *sub;

		if (other == subid)
		{
			*carries_storage = true;
			continue;
		}
		sub = GetSubscription(other, true);
		if (sub != NULL && sub->dbid == MyDatabaseId &&
			strcmp(sub->conninfo, own->conninfo) == 0)
		{
			ScopeStream *stream = palloc(sizeof(ScopeStream));

			stream->subid = other;
			stream->subname = pstrdup(sub->name);
			streams = lappend(streams, stream);
		}
	}
	return streams;
}

/* citus.logical_replication_timeout: how long a stream may stand still */
static long
StreamTimeoutMs(void)
{
	const char *value = GetConfigOption("citus.logical_replication_timeout", true, false);
	long		ms = value != NULL ? strtol(value, NULL, 10) : 0;

	/* Citus' default, two hours */
	return ms > 0 ? ms : 2 * 60 * 60 * 1000L;
}

/*
 * Wait until stream has come to target on its publisher: the fences of
 * scope_name that a write replayed into table relname needs, or (for_rows)
 * the writes into table relname that the fences of scope_name replayed
 * here came with.  Fails with 55000 when the stream's subscription is
 * dropped, or when it stands still for citus.logical_replication_timeout.
 */
static void
AwaitStream(ScopeStream *stream, XLogRecPtr target, const char *scope_name,
			const char *relname, bool for_rows)
{
	XLogRecPtr	progress = StreamProgress(stream->subid);
	XLogRecPtr	seen = progress;
	TimestampTz moved = GetCurrentTimestamp();
	long		timeout = StreamTimeoutMs();
	long		sleep_ms = STREAM_POLL_MIN_MS;

	while (progress < target)
	{
		int			rc;

		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					   sleep_ms, StreamWaitEvent());
		if (rc & WL_LATCH_SET)
			ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		sleep_ms = Min(sleep_ms * 2, STREAM_POLL_MAX_MS);

		/* a dropped subscription brings nothing more */
		AcceptInvalidationMessages();
		if (!SearchSysCacheExists1(SUBSCRIPTIONOID, ObjectIdGetDatum(stream->subid)) &&
			for_rows)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the writes of table \"%s\" stopped arriving on this node",
							relname),
					 errdetail("Subscription \"%s\", which replicates table \"%s\" to this node, was dropped at %X/%X, before the position %X/%X of the fences of scope \"%s\" replayed here.",
							   stream->subname, relname,
							   LSN_FORMAT_ARGS(progress), LSN_FORMAT_ARGS(target),
							   scope_name),
					 errhint("The shard transfer that created the subscription did not complete; its old shards keep the table and its fences.  Run it again.")));
		if (!SearchSysCacheExists1(SUBSCRIPTIONOID, ObjectIdGetDatum(stream->subid)))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the fences of scope \"%s\" stopped arriving on this node",
							scope_name),
					 errdetail("Subscription \"%s\", which replicates the fences of scope \"%s\" to this node, was dropped at %X/%X, before the position %X/%X of the writes replayed into table \"%s\".",
							   stream->subname, scope_name,
							   LSN_FORMAT_ARGS(progress), LSN_FORMAT_ARGS(target),
							   relname),
					 errhint("The shard transfer that created the subscription did not complete; its old shards keep the table and its fences.  Run it again.")));

		progress = StreamProgress(stream->subid);
		if (progress > seen)
		{
			seen = progress;
			moved = GetCurrentTimestamp();
		}
		else if (TimestampDifferenceExceeds(moved, GetCurrentTimestamp(), timeout) &&
				 for_rows)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the writes of table \"%s\" did not arrive on this node in time",
							relname),
					 errdetail("Subscription \"%s\", which replicates table \"%s\" to this node, stood at %X/%X for %ld ms, before the position %X/%X of the fences of scope \"%s\" replayed here.",
							   stream->subname, relname, LSN_FORMAT_ARGS(progress),
							   timeout, LSN_FORMAT_ARGS(target), scope_name),
					 errhint("Find out in the server log why the apply worker of subscription \"%s\" does not run.  The shard transfer fails rather than complete without the writes of table \"%s\".",
							 stream->subname, relname)));
		else if (TimestampDifferenceExceeds(moved, GetCurrentTimestamp(), timeout))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the fences of scope \"%s\" did not arrive on this node in time",
							scope_name),
					 errdetail("Subscription \"%s\", which replicates the fences of scope \"%s\" to this node, stood at %X/%X for %ld ms, before the position %X/%X of the writes replayed into table \"%s\".",
							   stream->subname, scope_name, LSN_FORMAT_ARGS(progress),
							   timeout, LSN_FORMAT_ARGS(target), relname),
					 errhint("Find out in the server log why the apply worker of subscription \"%s\" does not run.  The shard transfer fails rather than let the table's writes arrive ahead of their fences.",
							 stream->subname)));
	}
}

/* Raise SF005: no stream brings the fences of a table being replicated. */
static void
ReportNoStorageStream(const char *scope_name, const char *storage,
					  const char *relname)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("the fences of scope \"%s\" do not replicate to this node with table \"%s\"",
					scope_name, relname),
			 errdetail("Logical replication fills table \"%s\" on this node, and no subscription from the same publisher replicates a shard of \"fencing.%s\", where the fences of its writes are.",
					   relname, storage),
			 errhint("Move, split or copy a shard in key scope only together with the shards co-located with it, as Citus does.")));
}

/*
 * Wait until the streams of fencing.<storage> from the publisher of
 * subscription subid have come to target.
 */
static void
AwaitStorageStreams(Oid subid, const char *storage, const char *scope_name,
					const char *relname, XLogRecPtr target)
{
	bool		carries_storage;
	List	   *streams = StorageStreams(subid, storage, &carries_storage);
	ListCell   *lc;

	if (streams == NIL && !carries_storage)
		ReportNoStorageStream(scope_name, storage, relname);
	if (XLogRecPtrIsInvalid(target))
		return;
	foreach(lc, streams)
		AwaitStream(lfirst(lc), target, scope_name, relname, false);
}

/*
 * The apply worker replays a write into rel.  When rel carries the guard
 * of a Citus table (a shard being filled by a shard transfer, which
 * Citus' metadata may not list yet), go by its trigger's settings and
 * return true: *fence_attnum is its fence column in row scope, for the
 * caller to check; in key scope it is InvalidAttrNumber, and the replayed
 * transaction will wait, before it commits, for the fences of the scope.
 * False for any other table.
 */
bool
FencingCitusFollowReplay(Relation rel, AttrNumber *fence_attnum)
{
	const char *fence_column;
	const char *scope_name;
	const char *storage;
	MemoryContext old;
	PendingScope *pending;
	ListCell   *lc;

	*fence_attnum = InvalidAttrNumber;
	if (!FencingCitusGuardSettings(rel, &fence_column, &scope_name, &storage))
		return false;
	if (storage == NULL)
	{
		*fence_attnum = get_attnum(RelationGetRelid(rel), fence_column);
		if (*fence_attnum <= 0 ||
			get_atttype(RelationGetRelid(rel), *fence_attnum) != FencingTypeOid())
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_GUARD_ALTERED),
					 errmsg("the fencing guard of table \"%s\" is broken",
							RelationGetRelationName(rel)),
					 errdetail("Its fence column \"%s\" is missing or not of type fencing.fence.",
							   fence_column),
					 errhint("Call fencing.protect() on the distributed table again to repair its guard."),
					 errtable(rel)));
		return true;
	}

	/* key scope: remember the scope for this transaction's commit */
	if (pending_lxid != CurrentLocalTransactionId())
	{
		pending_lxid = CurrentLocalTransactionId();
		pending_scopes = NIL;
	}
	foreach(lc, pending_scopes)
		if (strcmp(((PendingScope *) lfirst(lc))->storage, storage) == 0)
			return true;
	old = MemoryContextSwitchTo(TopTransactionContext);
	pending = palloc(sizeof(PendingScope));
	pending->storage = pstrdup(storage);
	pending->scope_name = pstrdup(scope_name);
	pending->relname = pstrdup(RelationGetRelationName(rel));
	pending_scopes = lappend(pending_scopes, pending);
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * Before a replayed transaction commits: wait for the fences of the scopes
 * it wrote, up to the old node's commit of the same transaction.
 */
static void
AwaitPendingScopes(void)
{
	XLogRecPtr	target = replorigin_session_origin_lsn;
	Oid			subid = MySubscription != NULL ? MySubscription->oid : InvalidOid;
	ListCell   *lc;

	/* the apply worker sets it to the commit's end just before committing */
	if (XLogRecPtrIsInvalid(target) && MyLogicalRepWorker != NULL)
		target = MyLogicalRepWorker->last_lsn;
	if (!OidIsValid(subid))
		return;
	foreach(lc, pending_scopes)
	{
		PendingScope *pending = lfirst(lc);

		AwaitStorageStreams(subid, pending->storage, pending->scope_name,
							pending->relname, target);
	}
}

/*
 * For a shard fencing.scope_<x>_<shardid> of a scope's storage, the name
 * of its storage table (palloc'd), else NULL.
 */
static char *
StorageOfShard(Oid relid)
{
	char	   *relname;
	char	   *sep;
	const char *p;

	if (get_rel_namespace(relid) != FencingSchemaOid())
		return NULL;
	relname = get_rel_name(relid);
	if (relname == NULL || strncmp(relname, "scope_", 6) != 0)
		return NULL;
	sep = strrchr(relname, '_');
	if (sep == relname + 5 || sep[1] == '\0')
		return NULL;
	for (p = sep + 1; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return NULL;
	*sep = '\0';
	return relname;
}

/*
 * The guard settings of relid, a shard that a transfer fills: its own
 * guard's, or before Citus has created it there (it does after the first
 * catch-up), those of its distributed table, whose shell on this node
 * (the shard's name without its "_<shardid>", in its schema) carries the
 * guard with the same settings.
 */
static bool
TableGuardSettings(Oid relid, const char **scope_name, const char **storage)
{
	char	   *relname;
	char	   *sep;
	const char *p;
	Oid			shell;

	if (FencingCitusCatalogGuardSettings(relid, scope_name, storage))
		return true;
	relname = get_rel_name(relid);
	if (relname == NULL || (sep = strrchr(relname, '_')) == NULL ||
		sep == relname || sep[1] == '\0')
		return false;
	for (p = sep + 1; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return false;
	*sep = '\0';
	shell = get_relname_relid(relname, get_rel_namespace(relid));
	return OidIsValid(shell) &&
		FencingCitusCatalogGuardSettings(shell, scope_name, storage);
}

/*
 * Before a replayed transaction of a stream that fills a storage shard
 * commits: wait until the streams of the tables in key scope whose fences
 * it carries, from the same publisher, have come as far as the old
 * node's commit of the same transaction.  The guard wrote those fences
 * with a write into one of those tables: without its stream, Citus would
 * take the transfer for caught up with the fences here and the writes
 * not.  Nothing to do for any other stream.
 */
static void
AwaitScopeTables(void)
{
	XLogRecPtr	target = replorigin_session_origin_lsn;
	Oid			subid = MySubscription->oid;
	Subscription *own;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *own_storages = NIL;
	List	   *other_subs = NIL;	/* the other streams' relations: */
	List	   *other_rels = NIL;	/* srsubid and srrelid */
	List	   *streams = NIL;
	List	   *stream_scopes = NIL;
	List	   *stream_tables = NIL;
	ListCell   *lc;
	ListCell   *lc2;
	ListCell   *lc3;

	if (XLogRecPtrIsInvalid(target) || !OidIsValid(get_extension_oid("citus", true)))
		return;
	own = GetSubscription(subid, true);
	if (own == NULL)
		return;

	rel = table_open(SubscriptionRelRelationId, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_subscription_rel sr = (Form_pg_subscription_rel) GETSTRUCT(tup);

		if (sr->srsubid == subid)
		{
			char	   *storage = StorageOfShard(sr->srrelid);

			if (storage != NULL)
				own_storages = lappend(own_storages, storage);
		}
		else
		{
			other_subs = lappend_oid(other_subs, sr->srsubid);
			other_rels = lappend_oid(other_rels, sr->srrelid);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (own_storages == NIL)
		return;

	forboth(lc2, other_subs, lc3, other_rels)
	{
		Oid			other = lfirst_oid(lc2);
		Oid			relid = lfirst_oid(lc3);
		const char *scope_name;
		const char *storage;
		bool		mine = false;
		Subscription *sub;
		ScopeStream *stream;

		if (!TableGuardSettings(relid, &scope_name, &storage) || storage == NULL)
			continue;
		foreach(lc, own_storages)
			if (strcmp((char *) lfirst(lc), storage) == 0)
				mine = true;
		if (!mine)
			continue;
		foreach(lc, streams)
			if (((ScopeStream *) lfirst(lc))->subid == other)
				mine = false;
		if (!mine)
			continue;
		sub = GetSubscription(other, true);
		if (sub == NULL || sub->dbid != MyDatabaseId ||
			strcmp(sub->conninfo, own->conninfo) != 0)
			continue;
		stream = palloc(sizeof(ScopeStream));
		stream->subid = other;
		stream->subname = pstrdup(sub->name);
		streams = lappend(streams, stream);
		stream_scopes = lappend(stream_scopes, pstrdup(scope_name));
		stream_tables = lappend(stream_tables, get_rel_name(relid));
	}

	forthree(lc, streams, lc2, stream_scopes, lc3, stream_tables)
		AwaitStream(lfirst(lc), target, lfirst(lc2), lfirst(lc3), true);
}

/* Transaction callback: the wait before commit, the forgetting after. */
static void
TransferXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			if (!IsLogicalWorker() || MySubscription == NULL)
				break;
			if (pending_scopes != NIL && pending_lxid == CurrentLocalTransactionId())
				AwaitPendingScopes();
			AwaitScopeTables();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
			pending_scopes = NIL;
			pending_lxid = InvalidLocalTransactionId;
			break;
		default:
			break;
	}
}

/* Register the transaction callback; called from _PG_init. */
void
FencingCitusTransferInit(void)
{
	RegisterXactCallback(TransferXactCallback, NULL);
}

/*
 * fencing.citus_ddl_end() after a CREATE TRIGGER or ALTER TABLE of relid
 * (or of a partition it attached): for relid and its partitions that
 * carry the guard of a Citus table in key scope and are being filled by
 * logical replication, wait until the streams of the scope's storage have
 * come as far as the table's stream, which the command's lock holds
 * still.  Nothing to do for any other relation, or without Citus.
 */
void
FencingCitusAwaitTransferDdl(Oid relid)
{
	List	   *tree;
	ListCell   *lc;

	if (!OidIsValid(relid) || !OidIsValid(get_extension_oid("citus", true)))
		return;
	tree = find_all_inheritors(relid, NoLock, NULL);
	foreach(lc, tree)
	{
		Oid			member = lfirst_oid(lc);
		const char *scope_name;
		const char *storage;
		List	   *subids;
		ListCell   *ls;

		if (!FencingCitusCatalogGuardSettings(member, &scope_name, &storage) ||
			storage == NULL)
			continue;
		subids = SubscriptionsOfRelation(member);
		foreach(ls, subids)
		{
			Oid			subid = lfirst_oid(ls);

			AwaitStorageStreams(subid, storage, scope_name, get_rel_name(member),
								StreamProgress(subid));
		}
	}
}
