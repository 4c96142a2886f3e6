/*-------------------------------------------------------------------------
 *
 * scopes.c
 *	  The check-and-advance of a key or table scope's fence, atomic with
 *	  the write, in the scope's storage table (see scope_storage.c).
 *
 * A key is the key columns' values, compared by the unique index of the
 * storage table: the default btree equality of each column's type, under
 * the column's collation, NULLs equal to each other.  No text form, no
 * session setting, no spelling of an equal value can make one key two or
 * two keys one.
 *
 * A key that has a row: find it through the unique index under a fresh
 * snapshot, lock its newest version (table_tuple_lock, as ON CONFLICT DO
 * UPDATE does), compare, and update it in place (HOT: the fence is not
 * indexed).  Under READ COMMITTED a row updated concurrently is looked up
 * again; under REPEATABLE READ it fails with 40001, as the upsert would.
 *
 * A key without a row: two first writers of one key must not both insert
 * it, and the second must not fail with a unique violation.  The inserter
 * takes a lock on the key's hash for the moment of its insertion only (a
 * heavyweight lock, released at once, so that a COPY of a million new
 * keys does not fill the lock table), looks again with a dirty snapshot,
 * which sees rows that other transactions are inserting, and inserts only
 * when there is none.  A writer that finds one waits for its transaction
 * and starts over: under READ COMMITTED it then finds the committed row
 * and competes for it as above; under REPEATABLE READ a row it cannot see
 * is a serialization failure (40001), as for ON CONFLICT.
 *
 * No executor, no SPI: measured with callgrind on a ledger INSERT
 * (test/bench/profile.sh), the upsert through SPI of 1.0 cost some 80,000
 * instructions a write, most of it the executor's start-up and shut-down
 * for one row; this path costs what the index descent and the page's
 * pruning cost.  The storage tables belong to the extension's owner and
 * have no triggers (but those of replication.c, which never fire here),
 * row security or other indexes; one that has grown any is refused
 * (SF005) rather than written behind its back.
 *
 * One token, one transaction.  Once this transaction has advanced a
 * scope, it holds the scope row's lock until it ends, so a per-transaction
 * cache knows the scope's fence: it answers repeat writes with the same
 * token (a bulk COPY into one account) without touching the table, and it
 * is the only thing that makes an equal token acceptable in strict mode:
 * rows that protect() seeded or another path wrote in this transaction do
 * not.  Each entry remembers the subtransaction that advanced it, so that
 * a rolled-back savepoint takes back exactly what it did.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "compat.h"
#include "extension.h"
#include "fence.h"
#include "scopes.h"

/*
 * The lock a first writer of a key holds while it inserts the key's row:
 * an advisory lock tag (database, storage table, key hash) in a space of
 * its own, so that it meets no pg_advisory_lock() of the application
 * (those use 1 and 2 here).  Shown in pg_locks as advisory, objsubid 70.
 */
#define FENCING_NEW_KEY_LOCK	70

/* ------------------------------------------------------------------------
 * Keys
 * ------------------------------------------------------------------------
 */

/*
 * The key of a row of a protected relation into key/nulls: its key
 * columns' values (key_attnums, in the scope's order) (detoasted, so that they can be stored and compared
 * alone), or the constant true of table scope.
 */
void
FencingScopeKeyOf(ScopeStorage *scope, const AttrNumber *key_attnums,
		   HeapTuple tuple, TupleDesc desc, Datum *key, bool *nulls)
{
	int			i;

	if (scope->table_scope)
	{
		key[0] = BoolGetDatum(true);
		nulls[0] = false;
		return;
	}
	for (i = 0; i < scope->nkeys; i++)
	{
		key[i] = heap_getattr(tuple, key_attnums[i], desc, &nulls[i]);
		if (!nulls[i] && scope->typlen[i] == -1 &&
			VARATT_IS_EXTERNAL(DatumGetPointer(key[i])))
			key[i] = PointerGetDatum(detoast_external_attr((struct varlena *)
														   DatumGetPointer(key[i])));
	}
}

/* Are two keys of a scope the same key?  NULLs are equal to each other. */
static bool
ScopeKeyEqual(ScopeStorage *scope, Datum *a, bool *anulls, Datum *b, bool *bnulls)
{
	int			i;

	for (i = 0; i < scope->nkeys; i++)
	{
		if (anulls[i] || bnulls[i])
		{
			if (anulls[i] != bnulls[i])
				return false;
			continue;
		}
		if (!DatumGetBool(FunctionCall2Coll(&scope->eq[i], scope->collations[i],
											a[i], b[i])))
			return false;
	}
	return true;
}

/*
 * Order two keys of a scope (btree order, NULLs last): 0 when they are
 * the same key.  Writers that must lock two keys lock them in this order.
 */
int
FencingScopeKeyCompare(ScopeStorage *scope, Datum *a, bool *anulls,
				Datum *b, bool *bnulls)
{
	int			i;

	for (i = 0; i < scope->nkeys; i++)
	{
		int32		c;

		if (anulls[i] || bnulls[i])
		{
			if (anulls[i] != bnulls[i])
				return anulls[i] ? 1 : -1;
			continue;
		}
		c = DatumGetInt32(FunctionCall2Coll(&scope->cmp[i], scope->collations[i],
											a[i], b[i]));
		if (c != 0)
			return c < 0 ? -1 : 1;
	}
	return 0;
}

/*
 * A hash of a key, consistent with ScopeKeyEqual; 0 for every key of a
 * scope whose types have no hash opclass (they then share one bucket).
 */
static uint32
ScopeKeyHash(ScopeStorage *scope, Datum *key, bool *nulls)
{
	uint32		h = 0;
	int			i;

	if (!scope->hashable)
		return 0;
	for (i = 0; i < scope->nkeys; i++)
	{
		uint32		k = 0;

		if (!nulls[i])
			k = DatumGetUInt32(FunctionCall1Coll(&scope->hash[i],
												 scope->collations[i], key[i]));
		h = hash_combine(h, k);
	}
	return h;
}

/*
 * The key as people read it, for messages: a JSON array of the values'
 * text forms, as the fencing.scopes view shows it.  For people only: it
 * depends on the session's settings, and two keys may print alike.
 */
char *
FencingScopeKeyToText(ScopeStorage *scope, Datum *key, bool *nulls)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	if (!scope->table_scope)
	{
		for (i = 0; i < scope->nkeys; i++)
		{
			if (i > 0)
				appendStringInfoChar(&buf, ',');
			if (nulls[i])
				appendStringInfoString(&buf, "null");
			else
				escape_json(&buf, OutputFunctionCall(&scope->out[i], key[i]));
		}
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

/* ------------------------------------------------------------------------
 * The per-transaction cache of the scopes this transaction has advanced
 * ------------------------------------------------------------------------
 */

/* One fence a (sub)transaction advanced a key to; the newest first. */
typedef struct ScopeCacheVersion
{
	Fence		fence;
	bool		ours;			/* advanced by a write the guard accepted */
	SubTransactionId subxid;
	struct ScopeCacheVersion *older;
} ScopeCacheVersion;

/* One key of one scope */
typedef struct ScopeCacheItem
{
	struct ScopeCacheItem *next;	/* in the same bucket */
	Datum	   *key;
	bool	   *nulls;
	ScopeCacheVersion *newest;	/* NULL: forgotten */
} ScopeCacheItem;

typedef struct ScopeCacheBucketKey
{
	Oid			storage;
	uint32		hash;
} ScopeCacheBucketKey;

typedef struct ScopeCacheBucket
{
	ScopeCacheBucketKey key;	/* hash key, must be first */
	ScopeCacheItem *items;
} ScopeCacheBucket;

static MemoryContext scope_cache_cxt = NULL;
static HTAB *scope_cache = NULL;

/*
 * In front of the hash table, the item last found for each hash value
 * modulo the slots (direct-mapped): a COPY of a million ledger rows over a
 * thousand accounts finds its key here with the key's hash and one
 * equality, where hash_search would hash the bucket key again and walk a
 * chain.  None for a transaction that advanced fewer than
 * SCOPE_DIRECT_FROM keys (the single-row writes: the hash table is enough
 * there, and they would pay for zeroing the slots); then four times as
 * many slots as items (few keys share a slot, and two that do push each
 * other out), from 64 up to SCOPE_DIRECT_MAX
 * (the array is made anew, empty, when it grows), in the cache's memory
 * context, so gone with the transaction.  Only an item that is linked in
 * the table may sit here: a subtransaction's abort, which unlinks items,
 * empties every slot by moving to a new generation.
 */
#define SCOPE_DIRECT_FROM	8
#define SCOPE_DIRECT_MIN	64
#define SCOPE_DIRECT_MAX	65536

typedef struct ScopeDirectSlot
{
	ScopeCacheItem *item;
	Oid			storage;
	uint32		hash;
	uint32		generation;		/* empty unless scope_direct_generation */
} ScopeDirectSlot;

static ScopeDirectSlot *scope_direct = NULL;
static uint32 scope_direct_size = 0;
static uint32 scope_direct_generation = 1;
static uint32 scope_cache_items = 0;

static inline void
ScopeDirectSet(ScopeStorage *scope, uint32 hash, ScopeCacheItem *item)
{
	ScopeDirectSlot *slot;

	if (scope_direct == NULL)
		return;
	slot = &scope_direct[hash & (scope_direct_size - 1)];
	slot->item = item;
	slot->storage = scope->relid;
	slot->hash = hash;
	slot->generation = scope_direct_generation;
}

/* One more item in the cache: room for it in the slots (new, empty ones). */
static void
ScopeDirectGrow(void)
{
	uint32		size = scope_direct_size;

	if (++scope_cache_items < SCOPE_DIRECT_FROM)
		return;
	while (size < SCOPE_DIRECT_MAX &&
		   (size < SCOPE_DIRECT_MIN || size < 4 * scope_cache_items))
		size = size == 0 ? SCOPE_DIRECT_MIN : size * 2;
	if (size == scope_direct_size)
		return;
	if (scope_direct != NULL)
	{
		pfree(scope_direct);
		scope_direct = NULL;	/* none, should the allocation fail */
	}
	scope_direct = MemoryContextAllocZero(scope_cache_cxt,
										  sizeof(ScopeDirectSlot) * size);
	scope_direct_size = size;
}

/* Transaction end: the cache lived in TopTransactionContext. */
static void
ScopeCacheXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			scope_cache = NULL;
			scope_cache_cxt = NULL;
			scope_direct = NULL;
			scope_direct_size = 0;
			scope_cache_items = 0;
			break;
		default:
			break;
	}
}

/*
 * Subtransaction abort: what it (and the subtransactions it started, whose
 * ids are all greater) advanced is rolled back and its row locks are gone.
 */
static void
ScopeCacheSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid pg_attribute_unused(),
						  void *arg pg_attribute_unused())
{
	HASH_SEQ_STATUS status;
	ScopeCacheBucket *bucket;

	if (event != SUBXACT_EVENT_ABORT_SUB || scope_cache == NULL)
		return;
	if (++scope_direct_generation == 0)
		scope_direct_generation = 1;
	hash_seq_init(&status, scope_cache);
	while ((bucket = hash_seq_search(&status)) != NULL)
	{
		ScopeCacheItem **link = &bucket->items;

		while (*link != NULL)
		{
			ScopeCacheItem *item = *link;

			while (item->newest != NULL && item->newest->subxid >= mySubid)
				item->newest = item->newest->older;
			if (item->newest == NULL)
				*link = item->next;
			else
				link = &item->next;
		}
	}
}

/* Register the callbacks of the cache; called from _PG_init. */
void
FencingScopesInit(void)
{
	RegisterXactCallback(ScopeCacheXactCallback, NULL);
	RegisterSubXactCallback(ScopeCacheSubXactCallback, NULL);
}

/* The cached item of a key, or NULL. */
static ScopeCacheItem *
LookupScopeCache(ScopeStorage *scope, uint32 hash, Datum *key, bool *nulls)
{
	ScopeCacheBucketKey bkey;
	ScopeCacheBucket *bucket;
	ScopeCacheItem *item;
	ScopeDirectSlot *slot;

	if (scope_cache == NULL)
		return NULL;
	if (scope_direct == NULL)
		slot = NULL;
	else
		slot = &scope_direct[hash & (scope_direct_size - 1)];
	if (slot != NULL && slot->generation == scope_direct_generation &&
		slot->hash == hash && slot->storage == scope->relid &&
		ScopeKeyEqual(scope, slot->item->key, slot->item->nulls, key, nulls))
		return slot->item;
	memset(&bkey, 0, sizeof(bkey));
	bkey.storage = scope->relid;
	bkey.hash = hash;
	bucket = hash_search(scope_cache, &bkey, HASH_FIND, NULL);
	if (bucket == NULL)
		return NULL;
	for (item = bucket->items; item != NULL; item = item->next)
		if (ScopeKeyEqual(scope, item->key, item->nulls, key, nulls))
		{
			ScopeDirectSet(scope, hash, item);
			return item;
		}
	return NULL;
}

/*
 * Remember that this (sub)transaction advanced the key to fence: by a
 * write the guard accepted (ours), or by seeding or replication.
 */
static void
RememberScope(ScopeStorage *scope, uint32 hash, Datum *key, bool *nulls,
			  ScopeCacheItem *item, const Fence *fence, bool ours)
{
	SubTransactionId subxid = GetCurrentSubTransactionId();
	ScopeCacheVersion *version;

	if (scope_cache == NULL)
	{
		HASHCTL		ctl;

		scope_cache_cxt = AllocSetContextCreate(TopTransactionContext,
												"fencing scope cache",
												ALLOCSET_SMALL_SIZES);
		ctl.keysize = sizeof(ScopeCacheBucketKey);
		ctl.entrysize = sizeof(ScopeCacheBucket);
		ctl.hcxt = scope_cache_cxt;
		scope_cache = hash_create("fencing scope cache", 64, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	if (item == NULL)
	{
		ScopeCacheBucketKey bkey;
		ScopeCacheBucket *bucket;
		bool		found;
		int			i;

		memset(&bkey, 0, sizeof(bkey));
		bkey.storage = scope->relid;
		bkey.hash = hash;
		bucket = hash_search(scope_cache, &bkey, HASH_ENTER, &found);
		if (!found)
			bucket->items = NULL;
		item = MemoryContextAllocZero(scope_cache_cxt, sizeof(ScopeCacheItem));
		item->key = MemoryContextAlloc(scope_cache_cxt, sizeof(Datum) * scope->nkeys);
		item->nulls = MemoryContextAlloc(scope_cache_cxt, sizeof(bool) * scope->nkeys);
		for (i = 0; i < scope->nkeys; i++)
		{
			item->nulls[i] = nulls[i];
			if (nulls[i])
				item->key[i] = (Datum) 0;
			else
			{
				MemoryContext oldcxt = MemoryContextSwitchTo(scope_cache_cxt);

				item->key[i] = datumCopy(key[i], scope->typbyval[i],
										 scope->typlen[i]);
				MemoryContextSwitchTo(oldcxt);
			}
		}
		item->next = bucket->items;
		bucket->items = item;
		ScopeDirectGrow();
		ScopeDirectSet(scope, hash, item);
	}

	/* the newest version of this subtransaction is overwritten in place */
	if (item->newest != NULL && item->newest->subxid == subxid)
	{
		item->newest->fence = *fence;
		item->newest->ours = ours;
		return;
	}
	version = MemoryContextAlloc(scope_cache_cxt, sizeof(ScopeCacheVersion));
	version->fence = *fence;
	version->ours = ours;
	version->subxid = subxid;
	version->older = item->newest;
	item->newest = version;
}

/* ------------------------------------------------------------------------
 * The storage table
 * ------------------------------------------------------------------------
 */

/* The outcome of one look at the storage table */
typedef enum ScopeRowResult
{
	SCOPE_ROW_ACCEPTED,
	SCOPE_ROW_REJECTED,
	SCOPE_ROW_RETRY				/* look again: something changed meanwhile */
} ScopeRowResult;

/* Raise SF005: the storage table is not as protect() made it. */
static void
ReportStorageAltered(ScopeStorage *scope, Relation rel, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("the fence storage of scope \"%s\" has been altered",
					scope->scope_name),
			 errdetail("Table \"%s\" %s; the guard writes it directly and cannot keep anything else up to date.",
					   RelationGetRelationName(rel), what),
			 errhint("Remove what was added to table \"%s\".",
					 RelationGetRelationName(rel)),
			 errtable(rel)));
}

/* Open the storage table and its unique index for writing. */
static Relation
OpenStorage(ScopeStorage *scope, Relation *idx)
{
	Relation	rel = try_table_open(scope->relid, RowExclusiveLock);
	List	   *indexes;

	if (rel == NULL)
		FencingReportScopeStorageMissing(scope->scope_name, InvalidOid);
	indexes = RelationGetIndexList(rel);
	if (list_length(indexes) != 1 || linitial_oid(indexes) != scope->indexid)
		ReportStorageAltered(scope, rel, "has other indexes");
	if (rel->trigdesc != NULL)
	{
		int			i;

		/* the triggers that keep it local under logical replication only */
		for (i = 0; i < rel->trigdesc->numtriggers; i++)
			if (!FencingIsLocalStateTrigger(&rel->trigdesc->triggers[i]))
				ReportStorageAltered(scope, rel, "has triggers");
	}
	if (rel->rd_rel->relrowsecurity)
		ReportStorageAltered(scope, rel, "has row security");
	if (rel->rd_rel->relkind != RELKIND_RELATION ||
		rel->rd_tableam != GetHeapamTableAmRoutine())
		ReportStorageAltered(scope, rel, "is not a heap table");
	list_free(indexes);
	*idx = index_open(scope->indexid, RowExclusiveLock);
	return rel;
}

/* Scan keys for a key: equality, or IS NULL. */
static void
InitKeyScan(ScopeStorage *scope, Relation idx, Datum *key, bool *nulls,
			ScanKey skey)
{
	int			i;

	for (i = 0; i < scope->nkeys; i++)
	{
		if (nulls[i])
			ScanKeyEntryInitialize(&skey[i], SK_ISNULL | SK_SEARCHNULL, i + 1,
								   InvalidStrategy, InvalidOid, InvalidOid,
								   InvalidOid, (Datum) 0);
		else
			ScanKeyEntryInitializeWithInfo(&skey[i], 0, i + 1,
										   BTEqualStrategyNumber, InvalidOid,
										   idx->rd_indcollation[i],
										   &scope->eq[i], key[i]);
	}
}

/* Find the key's row visible to snapshot; its TID into *tid. */
static bool
FindKeyRow(Relation rel, Relation idx, ScanKey skey, int nkeys,
		   Snapshot snapshot, TupleTableSlot *slot, ItemPointer tid)
{
	IndexScanDesc scan;
	bool		found;

	scan = FencingIndexBeginscan(rel, idx, snapshot, nkeys, 0);
	index_rescan(scan, skey, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, slot);
	if (found)
		*tid = slot->tts_tid;
	index_endscan(scan);
	return found;
}

/* Insert index entries for a new row version of the storage table. */
static void
InsertKeyIndexEntry(Relation rel, Relation idx, HeapTuple tup,
					IndexUniqueCheck check)
{
	TupleDesc	desc = RelationGetDescr(rel);
	IndexInfo  *info = BuildIndexInfo(idx);
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	int			i;

	for (i = 0; i < info->ii_NumIndexAttrs; i++)
		values[i] = heap_getattr(tup, info->ii_IndexAttrNumbers[i], desc,
								 &isnull[i]);
	index_insert(idx, values, isnull, &tup->t_self, rel, check, false, info);
}

/*
 * The key has a row: lock its newest version, compare, advance it when
 * token is newer.  An equal token is accepted, without a change, only
 * with accept_equal.  tid is the version our snapshot found.  latest: the
 * snapshot is not the transaction's but one taken just now (seeding), so
 * a version that changed meanwhile is looked up again at every isolation
 * level.
 */
static ScopeRowResult
AdvanceKeyRow(Relation rel, Relation idx, ItemPointer tid, Snapshot snapshot,
			  TupleTableSlot *slot, const Fence *token, bool accept_equal,
			  bool latest, Fence *lost_to)
{
	TM_Result	tmres;
	TM_FailureData tmfd;
	HeapTuple	oldtup;
	bool		shouldfree;
	bool		isnull;
	Fence		fence;
	int			cmp;
	ScopeRowResult result;
	TupleDesc	desc = RelationGetDescr(rel);
	int			fence_attnum = desc->natts;

	/* lock the newest version, waiting for its updater if any */
	tmres = table_tuple_lock(rel, tid, snapshot, slot,
							 GetCurrentCommandId(true),
							 LockTupleNoKeyExclusive, LockWaitBlock, 0,
							 &tmfd);
	if (tmres == TM_Updated || tmres == TM_Deleted)
	{
		if (IsolationUsesXactSnapshot() && !latest)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
		return SCOPE_ROW_RETRY;	/* READ COMMITTED: look again */
	}
	if (tmres != TM_Ok)
		elog(ERROR, "unexpected result %d locking a row of scope storage \"%s\"",
			 (int) tmres, RelationGetRelationName(rel));

	oldtup = ExecFetchSlotHeapTuple(slot, false, &shouldfree);
	fence = *DatumGetFenceP(heap_getattr(oldtup, fence_attnum, desc, &isnull));
	cmp = FenceCmp(token, &fence);
	if (cmp > 0)
	{
		/* advance it; the fence is not indexed, so this is usually HOT */
		Datum		value = FencePGetDatum(token);
		bool		null = false;
		HeapTuple	newtup;

		newtup = heap_modify_tuple_by_cols(oldtup, desc, 1, &fence_attnum,
										   &value, &null);
		if (FencingSimpleHeapUpdate(rel, &oldtup->t_self, newtup))
			InsertKeyIndexEntry(rel, idx, newtup, UNIQUE_CHECK_NO);
		heap_freetuple(newtup);
		result = SCOPE_ROW_ACCEPTED;
	}
	else if (cmp == 0 && accept_equal)
		result = SCOPE_ROW_ACCEPTED;	/* locked, and nothing to change */
	else
	{
		*lost_to = fence;
		result = SCOPE_ROW_REJECTED;
	}
	if (shouldfree)
		heap_freetuple(oldtup);
	return result;
}

/*
 * The key has no row our snapshot sees: insert one, unless another
 * transaction is inserting or has inserted it.  latest: as for
 * AdvanceKeyRow.
 */
static ScopeRowResult
InsertKeyRow(ScopeStorage *scope, Relation rel, Relation idx, ScanKey skey,
			 Datum *key, bool *nulls, uint32 hash, TupleTableSlot *slot,
			 const Fence *token, bool latest)
{
	LOCKTAG		tag;
	SnapshotData dirty;
	ItemPointerData tid;
	TupleDesc	desc = RelationGetDescr(rel);
	Datum		values[INDEX_MAX_KEYS + 1];
	bool		isnull[INDEX_MAX_KEYS + 1];
	HeapTuple	tup;
	int			i;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, scope->relid, hash,
						 FENCING_NEW_KEY_LOCK);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);

	InitDirtySnapshot(dirty);
	if (FindKeyRow(rel, idx, skey, scope->nkeys, &dirty, slot, &tid))
	{
		TransactionId xwait = TransactionIdIsValid(dirty.xmin) ?
			dirty.xmin : dirty.xmax;

		LockRelease(&tag, ExclusiveLock, false);
		if (TransactionIdIsValid(xwait) &&
			!TransactionIdIsCurrentTransactionId(xwait))
		{
			XactLockTableWait(xwait, rel, &tid, XLTW_InsertIndexUnique);
			return SCOPE_ROW_RETRY;
		}
		/* committed since our snapshot was taken */
		if (IsolationUsesXactSnapshot() && !latest)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update"),
					 errdetail("Another transaction wrote the first fence of this key of scope \"%s\".",
							   scope->scope_name)));
		return SCOPE_ROW_RETRY;
	}

	for (i = 0; i < scope->nkeys; i++)
	{
		values[i] = key[i];
		isnull[i] = nulls[i];
	}
	values[scope->nkeys] = FencePGetDatum(token);
	isnull[scope->nkeys] = false;
	tup = heap_form_tuple(desc, values, isnull);
	simple_heap_insert(rel, tup);
	InsertKeyIndexEntry(rel, idx, tup, UNIQUE_CHECK_YES);
	heap_freetuple(tup);

	LockRelease(&tag, ExclusiveLock, false);
	return SCOPE_ROW_ACCEPTED;
}

/*
 * Look the key up in the storage table and settle it: advance its fence
 * to token when token is newer (inserting the key's first row if need
 * be), accept an equal token only with accept_equal.  latest: look with a
 * snapshot taken now, also under REPEATABLE READ and SERIALIZABLE, and
 * never fail with 40001 for a change committed since the transaction's
 * snapshot (seeding only raises fences, so it may work on the newest
 * state; a guarded write may not: its check must hold at its snapshot).
 */
static bool
SettleKeyRow(ScopeStorage *scope, Datum *key, bool *nulls, uint32 hash,
			 const Fence *token, bool accept_equal, bool latest,
			 Fence *lost_to)
{
	Relation	rel;
	Relation	idx;
	TupleTableSlot *slot;
	ScanKeyData skey[INDEX_MAX_KEYS];
	ScopeRowResult result = SCOPE_ROW_RETRY;
	int			attempt;

	rel = OpenStorage(scope, &idx);
	slot = table_slot_create(rel, NULL);
	InitKeyScan(scope, idx, key, nulls, skey);

	for (attempt = 0; result == SCOPE_ROW_RETRY; attempt++)
	{
		Snapshot	snapshot;
		ItemPointerData tid;

		if (attempt >= 1000)
			elog(ERROR, "could not settle a fence of scope \"%s\"",
				 scope->scope_name);
		CHECK_FOR_INTERRUPTS();

		/*
		 * As SPI does before each query: see what this command wrote so far
		 * (an earlier row of the same COPY), then take the snapshot, a new
		 * one under READ COMMITTED (or when latest).
		 */
		CommandCounterIncrement();
		/* registered: PostgreSQL 18 asserts so in every MVCC visibility check */
		snapshot = RegisterSnapshot(latest ? GetLatestSnapshot() :
									GetTransactionSnapshot());

		if (FindKeyRow(rel, idx, skey, scope->nkeys, snapshot, slot, &tid))
			result = AdvanceKeyRow(rel, idx, &tid, snapshot, slot, token,
								   accept_equal, latest, lost_to);
		else
			result = InsertKeyRow(scope, rel, idx, skey, key, nulls, hash,
								  slot, token, latest);
		UnregisterSnapshot(snapshot);
	}

	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return result == SCOPE_ROW_ACCEPTED;
}

/*
 * Check token against the fence of a scope's key and advance it: the
 * guard's check of a write.
 *
 * Returns true when the write is accepted: token is newer than the key's
 * fence (strict: >, else >=), or equal to a fence that a write the guard
 * accepted in this transaction advanced the key to.  Returns false
 * otherwise, with *lost_to set to the fence that won.
 */
bool
FencingScopeCheckAndAdvance(ScopeStorage *scope, Datum *key, bool *nulls,
					 const Fence *token, bool strict, Fence *lost_to)
{
	uint32		hash = ScopeKeyHash(scope, key, nulls);
	ScopeCacheItem *cached = LookupScopeCache(scope, hash, key, nulls);

	if (cached != NULL)
	{
		ScopeCacheVersion *newest = cached->newest;
		int			cmp = FenceCmp(token, &newest->fence);

		/* we hold the row lock: the cached fence is the key's fence */
		if (cmp < 0 || (cmp == 0 && !newest->ours && strict))
		{
			*lost_to = newest->fence;
			return false;
		}
		if (cmp == 0)
			return true;
	}

	if (!SettleKeyRow(scope, key, nulls, hash, token, !strict, false, lost_to))
		return false;
	RememberScope(scope, hash, key, nulls, cached, token, true);
	return true;
}

/*
 * Advance a scope's key to fence unless it is there already, without a
 * check.  Returns false, with *current set, when the key's fence is newer
 * than fence (it is left as it is).  This is no write of the guard: it
 * never makes an equal token acceptable.  latest: see SettleKeyRow.
 */
static bool
FollowKey(ScopeStorage *scope, Datum *key, bool *nulls, const Fence *fence,
		  bool latest, Fence *current)
{
	uint32		hash = ScopeKeyHash(scope, key, nulls);
	ScopeCacheItem *cached = LookupScopeCache(scope, hash, key, nulls);

	if (cached != NULL && FenceCmp(fence, &cached->newest->fence) <= 0)
	{
		*current = cached->newest->fence;
		return FenceCmp(fence, current) == 0;
	}
	if (!SettleKeyRow(scope, key, nulls, hash, fence, true, latest, current))
		return false;
	if (cached != NULL)
		RememberScope(scope, hash, key, nulls, cached, fence, false);
	return true;
}

/*
 * FollowKey() for the writes the logical replication apply worker
 * replays, under the transaction's snapshot.
 */
bool
FencingScopeFollow(ScopeStorage *scope, Datum *key, bool *nulls, const Fence *fence,
			Fence *current)
{
	return FollowKey(scope, key, nulls, fence, false, current);
}

/*
 * FollowKey() for seeding a scope from existing rows: on the latest
 * committed state of the storage, at every isolation level, so that
 * protect() of a table sharing a busy scope does not fail with 40001
 * under REPEATABLE READ (seeding only ever raises a fence).
 */
void
FencingScopeSeed(ScopeStorage *scope, Datum *key, bool *nulls, const Fence *fence)
{
	Fence		current;

	(void) FollowKey(scope, key, nulls, fence, true, &current);
}

/* The OID of fencing.local_state(), once seen */
static Oid	local_state_oid = InvalidOid;

/* Is funcoid fencing.local_state(), the extension's C function? */
static bool
IsLocalStateFunction(Oid funcoid)
{
	HeapTuple	tup;
	bool		result = false;

	if (OidIsValid(local_state_oid) && funcoid == local_state_oid)
		return true;
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcoid));
	if (!HeapTupleIsValid(tup))
		return false;
	{
		Form_pg_proc proc = (Form_pg_proc) GETSTRUCT(tup);
		bool		isnull;
		Datum		src;

		if (strcmp(NameStr(proc->proname), "local_state") == 0 &&
			proc->pronamespace == FencingSchemaOid() &&
			proc->prolang == ClanguageId)
		{
			src = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
			result = !isnull &&
				strcmp(TextDatumGetCString(src), "fencing_local_state") == 0;
		}
	}
	ReleaseSysCache(tup);
	if (result)
		local_state_oid = funcoid;
	return result;
}

/*
 * Is t one of the triggers that keep a storage table's state local under
 * logical replication (replication.c), and nothing else: no WHEN clause,
 * no column list?  The scopes accept these on a storage table.
 */
bool
FencingIsLocalStateTrigger(const Trigger *t)
{
	return TRIGGER_FOR_BEFORE(t->tgtype) && t->tgqual == NULL &&
		t->tgnattr == 0 && IsLocalStateFunction(t->tgfoid);
}
