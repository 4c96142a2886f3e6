/*-------------------------------------------------------------------------
 *
 * scopes.c
 *	  The fences of key and table scopes: how a scope key is spelled, and
 *	  the atomic check-and-advance of a scope's row in fencing.scopes.
 *
 * A key is the JSON array of the text forms of the key columns' values,
 * for example ["acct-1"] or ["acct-1","EUR"] ([] for table scope, null for
 * a NULL value), so that two tables whose key columns have the same values
 * share a fence whatever the column types, and no two keys collide.
 *
 * The check is one INSERT ... ON CONFLICT DO UPDATE ... WHERE fence < token:
 * it creates the scope row for a new key, or locks the existing row (the
 * newest version of it, whatever the snapshot; REPEATABLE READ fails with
 * 40001 when that version is not visible) and advances it.  Two writers of
 * a brand-new key serialise on the unique index.  Nothing but the scope
 * row is locked.
 *
 * The fast path for a key that has a row already (the common case) does
 * the same without the executor: find the row through the primary key,
 * lock its newest version (table_tuple_lock, as ON CONFLICT DO UPDATE
 * does), compare, and update it (HOT, as fence is not indexed).  Under
 * READ COMMITTED a row updated or deleted concurrently is looked up again;
 * under REPEATABLE READ it fails with 40001, as the upsert would.  A key
 * without a row, or a fencing.scopes that has grown triggers, more indexes
 * or row security, takes the SPI path.  Measured with callgrind on a
 * ledger INSERT (test/bench/profile.sh), the upsert through SPI cost some
 * 80,000 instructions a write, most of it the executor's start-up and
 * shut-down for one row; the fast path costs some 50,000, half of that the
 * index descent and the pruning of the row's page.
 *
 * Once this transaction has advanced a scope, it holds that row's lock
 * until it ends, so a per-transaction cache can answer repeat writes with
 * the same token (a bulk COPY into one account) without touching the table.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/skey.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "fencing.h"

/* Saved plans: [0] strict (advance on >), [1] not strict (advance on >=) */
static SPIPlanPtr upsert_plans[2] = {NULL, NULL};
static SPIPlanPtr select_plan = NULL;
static Oid	plans_fence_type = InvalidOid;

/* fencing.scopes and its primary key, for the fast path; looked up lazily */
static Oid	scopes_relid = InvalidOid;
static Oid	scopes_nspid = InvalidOid;
static Oid	scopes_pkey = InvalidOid;

#define Anum_scopes_scope_name	1
#define Anum_scopes_key			2
#define Anum_scopes_fence		3

/* The outcome of the fast path */
typedef enum ScopeFastResult
{
	SCOPE_FAST_ACCEPTED,
	SCOPE_FAST_REJECTED,
	SCOPE_FAST_NO_ROW			/* no row for the key, or no fast path: use SPI */
} ScopeFastResult;

/* The per-transaction cache of scopes this transaction has advanced */
typedef struct ScopeCacheEntry
{
	uint64		hash;			/* hash key */
	char	   *scope_name;
	char	   *key;
	Fence		fence;			/* the fence we advanced it to, and hold */
} ScopeCacheEntry;

static MemoryContext scope_cache_cxt = NULL;
static HTAB *scope_cache = NULL;

/* Append the JSON-array key of the given values to buf. */
static void
AppendScopeKey(StringInfo buf, int nkeys, Datum *values, bool *nulls,
			   FmgrInfo *out)
{
	int			i;

	appendStringInfoChar(buf, '[');
	for (i = 0; i < nkeys; i++)
	{
		if (i > 0)
			appendStringInfoChar(buf, ',');
		if (nulls[i])
			appendStringInfoString(buf, "null");
		else
			escape_json(buf, OutputFunctionCall(&out[i], values[i]));
	}
	appendStringInfoChar(buf, ']');
}

/* The scope key of a row of a protected relation, with cached functions. */
char *
BuildScopeKey(GuardConfig *cfg, HeapTuple tuple, TupleDesc tupdesc)
{
	StringInfoData buf;
	Datum		values[INDEX_MAX_KEYS];
	bool		nulls[INDEX_MAX_KEYS];
	int			i;

	for (i = 0; i < cfg->nkeys; i++)
		values[i] = heap_getattr(tuple, cfg->key_attnums[i], tupdesc, &nulls[i]);
	initStringInfo(&buf);
	AppendScopeKey(&buf, cfg->nkeys, values, nulls, cfg->key_out);
	return buf.data;
}

/* The scope key of arbitrary values (slow path: looks up the functions). */
char *
ScopeKeyFromValues(int nkeys, Datum *values, bool *nulls, Oid *typids)
{
	StringInfoData buf;
	FmgrInfo   *out = palloc(sizeof(FmgrInfo) * Max(nkeys, 1));
	int			i;

	for (i = 0; i < nkeys; i++)
	{
		Oid			func;
		bool		isvarlena;

		getTypeOutputInfo(typids[i], &func, &isvarlena);
		fmgr_info(func, &out[i]);
	}
	initStringInfo(&buf);
	AppendScopeKey(&buf, nkeys, values, nulls, out);
	return buf.data;
}

/* Forget the cache: its entries are no longer backed by locks we hold. */
static void
ResetScopeCache(void)
{
	scope_cache = NULL;
	scope_cache_cxt = NULL;
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
			ResetScopeCache();
			break;
		default:
			break;
	}
}

/*
 * Subtransaction abort: what it advanced is rolled back and its locks
 * released.  Dropping the whole cache is conservative and cheap.
 */
static void
ScopeCacheSubXactCallback(SubXactEvent event,
						  SubTransactionId mySubid pg_attribute_unused(),
						  SubTransactionId parentSubid pg_attribute_unused(),
						  void *arg pg_attribute_unused())
{
	if (event == SUBXACT_EVENT_ABORT_SUB && scope_cache_cxt != NULL)
	{
		MemoryContextDelete(scope_cache_cxt);
		ResetScopeCache();
	}
}

/* Register the callbacks of the cache; called from _PG_init. */
void
ScopesInit(void)
{
	RegisterXactCallback(ScopeCacheXactCallback, NULL);
	RegisterSubXactCallback(ScopeCacheSubXactCallback, NULL);
}

/* Hash of a (scope_name, key) pair. */
static uint64
ScopeHash(const char *scope_name, const char *key)
{
	uint64		h1 = hash_bytes_extended((const unsigned char *) scope_name,
										 strlen(scope_name), 0);

	return hash_bytes_extended((const unsigned char *) key, strlen(key), h1);
}

/* Find the cached entry of a scope, or NULL. */
static ScopeCacheEntry *
LookupScopeCache(uint64 hash, const char *scope_name, const char *key)
{
	ScopeCacheEntry *entry;

	if (scope_cache == NULL)
		return NULL;
	entry = hash_search(scope_cache, &hash, HASH_FIND, NULL);
	if (entry == NULL || strcmp(entry->scope_name, scope_name) != 0 ||
		strcmp(entry->key, key) != 0)
		return NULL;
	return entry;
}

/* Remember that this transaction holds the scope at fence. */
static void
RememberScope(uint64 hash, const char *scope_name, const char *key,
			  const Fence *fence)
{
	ScopeCacheEntry *entry;
	bool		found;

	if (scope_cache == NULL)
	{
		HASHCTL		ctl;

		scope_cache_cxt = AllocSetContextCreate(TopTransactionContext,
												"fencing scope cache",
												ALLOCSET_SMALL_SIZES);
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(ScopeCacheEntry);
		ctl.hcxt = scope_cache_cxt;
		scope_cache = hash_create("fencing scope cache", 64, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(scope_cache, &hash, HASH_ENTER, &found);
	if (!found || strcmp(entry->scope_name, scope_name) != 0 ||
		strcmp(entry->key, key) != 0)
	{
		/* a new entry, or a hash collision: the newest one wins */
		entry->scope_name = MemoryContextStrdup(scope_cache_cxt, scope_name);
		entry->key = MemoryContextStrdup(scope_cache_cxt, key);
	}
	entry->fence = *fence;
}

/* Prepare and keep the plans; again if the extension was recreated. */
static void
PreparePlans(void)
{
	Oid			fence_type = FencingTypeOid();
	Oid			argtypes[3] = {TEXTOID, TEXTOID, fence_type};
	static const char *const upsert_sql[2] = {
		"INSERT INTO fencing.scopes AS s (scope_name, key, fence) "
		"VALUES ($1, $2, $3) ON CONFLICT (scope_name, key) "
		"DO UPDATE SET fence = EXCLUDED.fence "
		"WHERE s.fence OPERATOR(fencing.<) EXCLUDED.fence",
		"INSERT INTO fencing.scopes AS s (scope_name, key, fence) "
		"VALUES ($1, $2, $3) ON CONFLICT (scope_name, key) "
		"DO UPDATE SET fence = EXCLUDED.fence "
		"WHERE s.fence OPERATOR(fencing.<=) EXCLUDED.fence"
	};
	int			i;

	if (plans_fence_type == fence_type && select_plan != NULL)
		return;
	for (i = 0; i < 2; i++)
	{
		if (upsert_plans[i] != NULL)
			SPI_freeplan(upsert_plans[i]);
		upsert_plans[i] = SPI_prepare(upsert_sql[i], 3, argtypes);
		if (upsert_plans[i] == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(upsert_plans[i]);
	}
	if (select_plan != NULL)
		SPI_freeplan(select_plan);
	select_plan = SPI_prepare("SELECT fence, xmin FROM fencing.scopes "
							  "WHERE scope_name OPERATOR(pg_catalog.=) $1 "
							  "AND key OPERATOR(pg_catalog.=) $2",
							  2, argtypes);
	if (select_plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(select_plan);
	plans_fence_type = fence_type;
}

/* A non-HOT update of a scope row: its new version needs an index entry. */
static void
ScopeIndexInsert(Relation rel, Relation idx, HeapTuple tup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum		values[2];
	bool		isnull[2];
	IndexInfo  *info = BuildIndexInfo(idx);

	values[0] = heap_getattr(tup, Anum_scopes_scope_name, desc, &isnull[0]);
	values[1] = heap_getattr(tup, Anum_scopes_key, desc, &isnull[1]);
	/* the key is unchanged and its row locked by us: no unique check */
	index_insert(idx, values, isnull, &tup->t_self, rel, UNIQUE_CHECK_NO,
				 true, info);
}

/*
 * Open fencing.scopes for the fast path, with RowExclusiveLock, and its
 * primary key into *idx; NULL when the table does not qualify (more than
 * the one index, triggers or row security: the SPI path handles those).
 */
static Relation
OpenScopesForFastPath(Relation *idx)
{
	Relation	rel = NULL;
	List	   *indexes;

	if (OidIsValid(scopes_relid))
	{
		/* the extension may have been dropped and created again */
		rel = try_table_open(scopes_relid, RowExclusiveLock);
		if (rel != NULL &&
			(RelationGetNamespace(rel) != scopes_nspid ||
			 strcmp(RelationGetRelationName(rel), "scopes") != 0))
		{
			table_close(rel, RowExclusiveLock);
			rel = NULL;
		}
	}
	if (rel == NULL)
	{
		scopes_nspid = FencingSchemaOid();
		scopes_relid = get_relname_relid("scopes", scopes_nspid);
		if (!OidIsValid(scopes_relid))
			elog(ERROR, "table fencing.scopes is missing");
		rel = table_open(scopes_relid, RowExclusiveLock);
	}

	indexes = RelationGetIndexList(rel);
	if (list_length(indexes) != 1 || rel->trigdesc != NULL ||
		rel->rd_rel->relrowsecurity ||
		rel->rd_rel->relkind != RELKIND_RELATION)
	{
		table_close(rel, RowExclusiveLock);
		return NULL;
	}
	scopes_pkey = linitial_oid(indexes);
	*idx = index_open(scopes_pkey, RowExclusiveLock);
	if ((*idx)->rd_index->indnatts != 2 ||
		(*idx)->rd_index->indkey.values[0] != Anum_scopes_scope_name ||
		(*idx)->rd_index->indkey.values[1] != Anum_scopes_key ||
		!(*idx)->rd_index->indisunique || !(*idx)->rd_index->indisvalid)
	{
		index_close(*idx, RowExclusiveLock);
		table_close(rel, RowExclusiveLock);
		return NULL;
	}
	return rel;
}

/*
 * The fast path of ScopeCheckAndAdvance for a key that has a row: what the
 * upsert does when it finds the row, done directly.  Returns
 * SCOPE_FAST_NO_ROW when there is no row (or no fast path), and the SPI
 * upsert must run.
 */
static ScopeFastResult
ScopeFastCheckAndAdvance(Datum scope_name, Datum key, const Fence *token,
						 bool strict, Fence *lost_to)
{
	Relation	rel;
	Relation	idx;
	TupleTableSlot *slot;
	ScopeFastResult result;

	rel = OpenScopesForFastPath(&idx);
	if (rel == NULL)
		return SCOPE_FAST_NO_ROW;
	slot = table_slot_create(rel, NULL);

	for (;;)
	{
		Snapshot	snapshot;
		ScanKeyData skey[2];
		IndexScanDesc scan;
		bool		found;
		ItemPointerData tid;
		TM_Result	tmres;
		TM_FailureData tmfd;
		HeapTuple	oldtup;
		bool		shouldfree;
		bool		isnull;
		Fence		fence;
		int			cmp;

		/*
		 * As SPI does before each query: see what this command wrote so far
		 * (an earlier row of the same COPY), then take the snapshot, a new
		 * one under READ COMMITTED.
		 */
		CommandCounterIncrement();
		/* registered: PostgreSQL 18 asserts so in every MVCC visibility check */
		snapshot = RegisterSnapshot(GetTransactionSnapshot());

		ScanKeyInit(&skey[0], 1, BTEqualStrategyNumber, F_TEXTEQ, scope_name);
		skey[0].sk_collation = idx->rd_indcollation[0];
		ScanKeyInit(&skey[1], 2, BTEqualStrategyNumber, F_TEXTEQ, key);
		skey[1].sk_collation = idx->rd_indcollation[1];
		scan = FencingIndexBeginscan(rel, idx, snapshot, 2, 0);
		index_rescan(scan, skey, 2, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, slot);
		if (found)
			tid = slot->tts_tid;
		index_endscan(scan);
		if (!found)
		{
			UnregisterSnapshot(snapshot);
			result = SCOPE_FAST_NO_ROW;
			break;
		}

		/* lock the newest version, waiting for its updater if any */
		tmres = table_tuple_lock(rel, &tid, snapshot, slot,
								 GetCurrentCommandId(true),
								 LockTupleNoKeyExclusive, LockWaitBlock, 0,
								 &tmfd);
		UnregisterSnapshot(snapshot);
		if (tmres == TM_Updated || tmres == TM_Deleted)
		{
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update")));
			continue;			/* READ COMMITTED: look again */
		}
		if (tmres != TM_Ok)
			elog(ERROR, "unexpected result %d locking a row of fencing.scopes",
				 (int) tmres);

		oldtup = ExecFetchSlotHeapTuple(slot, false, &shouldfree);
		fence = *DatumGetFenceP(heap_getattr(oldtup, Anum_scopes_fence,
											 RelationGetDescr(rel), &isnull));
		cmp = FenceCmp(token, &fence);
		if (cmp > 0 || (cmp == 0 && !strict))
		{
			/* advance it; fence is not indexed, so this is usually HOT */
			int			attnum = Anum_scopes_fence;
			Datum		value = FencePGetDatum(token);
			bool		null = false;
			HeapTuple	newtup;

			newtup = heap_modify_tuple_by_cols(oldtup, RelationGetDescr(rel),
											   1, &attnum, &value, &null);
#if PG_VERSION_NUM >= 160000
			{
				TU_UpdateIndexes update_indexes;

				simple_heap_update(rel, &tid, newtup, &update_indexes);
				if (update_indexes != TU_None)
					ScopeIndexInsert(rel, idx, newtup);
			}
#else
			simple_heap_update(rel, &tid, newtup);
			if (!HeapTupleIsHeapOnly(newtup))
				ScopeIndexInsert(rel, idx, newtup);
#endif
			heap_freetuple(newtup);
			result = SCOPE_FAST_ACCEPTED;
		}
		else if (cmp == 0 &&
				 TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(oldtup->t_data)))
			result = SCOPE_FAST_ACCEPTED;	/* a repeat write of ours */
		else
		{
			*lost_to = fence;
			result = SCOPE_FAST_REJECTED;
		}
		if (shouldfree)
			heap_freetuple(oldtup);
		break;
	}

	ExecDropSingleTupleTableSlot(slot);
	index_close(idx, NoLock);
	table_close(rel, NoLock);
	return result;
}

/*
 * Check token against the fence of (scope_name, key) and advance it.
 *
 * Returns true when the write is accepted: token is newer than the scope's
 * fence (strict: >, else >=), or equal to it and this transaction wrote
 * the scope with it.  Returns false otherwise, with *lost_to set to the
 * fence that won.  Runs the SQL as the extension owner: no other role may
 * write fencing.scopes.
 */
bool
ScopeCheckAndAdvance(const char *scope_name, const char *key,
					 const Fence *token, bool strict, Fence *lost_to)
{
	uint64		hash = ScopeHash(scope_name, key);
	ScopeCacheEntry *cached = LookupScopeCache(hash, scope_name, key);
	Datum		args[3];
	FencingSavedUser saved;
	bool		accepted;
	int			rc;

	if (cached != NULL)
	{
		int			cmp = FenceCmp(token, &cached->fence);

		/* we hold the row lock: the cached fence is the scope's fence */
		if (cmp == 0)
			return true;
		if (cmp < 0)
		{
			*lost_to = cached->fence;
			return false;
		}
	}

	args[0] = CStringGetTextDatum(scope_name);
	args[1] = CStringGetTextDatum(key);
	args[2] = FencePGetDatum(token);

	switch (ScopeFastCheckAndAdvance(args[0], args[1], token, strict, lost_to))
	{
		case SCOPE_FAST_ACCEPTED:
			RememberScope(hash, scope_name, key, token);
			return true;
		case SCOPE_FAST_REJECTED:
			return false;
		case SCOPE_FAST_NO_ROW:
			break;
	}

	FencingBecomeOwner(&saved);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PreparePlans();
	rc = SPI_execute_plan(upsert_plans[strict ? 0 : 1], args, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "could not advance fencing.scopes: %s", SPI_result_code_string(rc));

	if (SPI_processed == 1)
		accepted = true;
	else
	{
		/*
		 * The row exists, its fence beat the token, and ON CONFLICT has
		 * locked it: read it to tell a repeat write of this transaction
		 * from a stale one.
		 */
		HeapTuple	tup;
		bool		isnull;
		TransactionId xmin;

		rc = SPI_execute_plan(select_plan, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "scope row of \"%s\" key %s vanished", scope_name, key);
		tup = SPI_tuptable->vals[0];
		*lost_to = *DatumGetFenceP(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		xmin = DatumGetTransactionId(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		accepted = FenceCmp(token, lost_to) == 0 &&
			TransactionIdIsCurrentTransactionId(xmin);
	}
	SPI_finish();
	FencingRestoreUser(&saved);

	if (accepted)
		RememberScope(hash, scope_name, key, token);
	return accepted;
}

PG_FUNCTION_INFO_V1(fencing_scope_key);

/*
 * fencing.scope_key(VARIADIC text[]): the key of fencing.scopes for these
 * values, so that an operator can find a scope's fence.
 */
Datum
fencing_scope_key(PG_FUNCTION_ARGS)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *values;
	bool	   *nulls;
	Oid		   *typids;
	int			n;
	int			i;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &n);
	typids = palloc(sizeof(Oid) * Max(n, 1));
	for (i = 0; i < n; i++)
		typids[i] = TEXTOID;
	PG_RETURN_TEXT_P(cstring_to_text(ScopeKeyFromValues(n, values, nulls, typids)));
}
