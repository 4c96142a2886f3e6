/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters of the guard and of the idempotency helpers in shared
 *	  memory: fencing.stats, fencing.idempotency_stats, fencing.stats_reset.
 *
 * The counters exist only when the library is loaded through
 * shared_preload_libraries; otherwise every C entry point below is a no-op
 * and the SQL functions raise an error whose HINT says to preload, as
 * pg_stat_statements does.
 *
 * Per-table counters live in a fixed-capacity shared hash keyed by
 * (database, relation), sized by fencing.stats_max_tables.  The guard
 * looks an entry up once per relation (FencingStatsGetEntry, which takes
 * the LWLock) and caches the pointer; every row then costs one atomic add
 * (FencingStatsCount), no lock.  For that pointer to stay valid, entries
 * are never removed or moved while the server runs: fencing.stats_reset()
 * zeroes counters in place, it does not delete entries.  The price is that
 * an entry outlives its table (a dropped table keeps its row, shown by OID,
 * until the server restarts) and that a full hash stays full until a
 * restart.
 *
 * When the hash is full, a new relation's writes are counted in one
 * cluster-wide overflow entry, shown in fencing.stats as the row whose
 * relid is NULL (in every database), and the first overflow is logged
 * once; nothing is silently dropped.
 *
 * The counters are not saved across a server restart: they count since
 * the server started or since the last fencing.stats_reset().  A reset
 * that races with a write may or may not include that write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/tuplestore.h"

#include "fencing.h"

PG_FUNCTION_INFO_V1(fencing_stats_internal);
PG_FUNCTION_INFO_V1(fencing_idempotency_stats_internal);
PG_FUNCTION_INFO_V1(fencing_stats_reset);

#define FENCING_STATS_TRANCHE	"fencing"

#define FENCING_STAT_NCOUNTERS	(FENCING_STAT_BYPASSED + 1)
#define FENCING_IDEM_NCOUNTERS	(FENCING_IDEM_IN_PROGRESS_REJECTED + 1)

/* Hash key: relation OIDs repeat across databases */
typedef struct FencingStatsKey
{
	Oid			dbid;
	Oid			relid;
} FencingStatsKey;

/* One relation's counters (opaque outside this file) */
struct FencingTableStats
{
	FencingStatsKey key;		/* hash key, must be first */
	pg_atomic_uint64 counters[FENCING_STAT_NCOUNTERS];
};

/* The fixed part of the shared state */
typedef struct FencingStatsShared
{
	LWLock	   *lock;			/* taken only to look up and insert entries */
	pg_atomic_flag overflow_logged; /* set once the hash was found full */
	FencingTableStats overflow; /* writes of relations that did not fit */
	pg_atomic_uint64 idem[FENCING_IDEM_NCOUNTERS];
} FencingStatsShared;

/* fencing.stats_max_tables */
static int	fencing_stats_max_tables = 1000;

/* Pointers into shared memory; NULL without the preload */
static FencingStatsShared *fstate = NULL;
static HTAB *fhash = NULL;

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static Size FencingStatsShmemSize(void);
static void FencingStatsShmemRequest(void);
static void FencingStatsShmemStartup(void);
static void CheckStatsAvailable(void);
static void InitCounters(FencingTableStats *entry);
static Tuplestorestate *BeginMaterializedSRF(FunctionCallInfo fcinfo,
											 TupleDesc *tupdesc);
static void AddStatsRow(Tuplestorestate *tupstore, TupleDesc tupdesc,
						FencingTableStats *entry, bool is_overflow);

/* Register the setting and the shared memory hooks, when preloaded. */
void
FencingStatsInit(void)
{
	/*
	 * Shared memory can only be reserved by the postmaster.  Loaded later,
	 * the library works without statistics; the setting is not even
	 * defined then, so that a postgresql.conf line for it does not make
	 * every backend warn that it cannot be changed without a restart.
	 */
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomIntVariable("fencing.stats_max_tables",
							"Maximum number of tables counted separately in fencing.stats.",
							"Writes to further tables are counted together in the row whose relid is NULL.",
							&fencing_stats_max_tables,
							1000,
							1,
							INT_MAX / 2,
							PGC_POSTMASTER,
							0,
							NULL,
							NULL,
							NULL);

#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = FencingStatsShmemRequest;
#else
	FencingStatsShmemRequest();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = FencingStatsShmemStartup;
}

/* Bytes of shared memory needed for fencing.stats_max_tables entries. */
static Size
FencingStatsShmemSize(void)
{
	Size		size;

	size = MAXALIGN(sizeof(FencingStatsShared));
	size = add_size(size, hash_estimate_size(fencing_stats_max_tables,
											 sizeof(FencingTableStats)));
	return size;
}

/* Reserve the shared memory and the LWLock (shmem_request_hook). */
static void
FencingStatsShmemRequest(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif

	RequestAddinShmemSpace(FencingStatsShmemSize());
	RequestNamedLWLockTranche(FENCING_STATS_TRANCHE, 1);
}

/* Create or attach to the shared state (shmem_startup_hook). */
static void
FencingStatsShmemStartup(void)
{
	HASHCTL		info;
	bool		found;
	int			i;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	fstate = NULL;
	fhash = NULL;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);

	fstate = ShmemInitStruct("fencing stats", sizeof(FencingStatsShared),
							 &found);
	if (!found)
	{
		fstate->lock = &(GetNamedLWLockTranche(FENCING_STATS_TRANCHE))->lock;
		pg_atomic_init_flag(&fstate->overflow_logged);
		fstate->overflow.key.dbid = InvalidOid;
		fstate->overflow.key.relid = InvalidOid;
		InitCounters(&fstate->overflow);
		for (i = 0; i < FENCING_IDEM_NCOUNTERS; i++)
			pg_atomic_init_u64(&fstate->idem[i], 0);
	}

	/*
	 * All entries are allocated up front (HASH_FIXED_SIZE): the hash never
	 * grows into the shared memory that others count on, and an insert
	 * into a full hash fails cleanly instead.
	 */
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(FencingStatsKey);
	info.entrysize = sizeof(FencingTableStats);
	fhash = ShmemInitHash("fencing stats hash",
						  fencing_stats_max_tables, fencing_stats_max_tables,
						  &info,
						  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	LWLockRelease(AddinShmemInitLock);
}

/* Zero a relation's counters. */
static void
InitCounters(FencingTableStats *entry)
{
	int			i;

	for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
		pg_atomic_init_u64(&entry->counters[i], 0);
}

/*
 * Find or create the counters of a relation of the current database.
 *
 * NULL without the preload.  The result stays valid, at the same address,
 * until the server stops, so callers may cache it; when the hash is full
 * the result is the shared overflow entry.
 */
FencingTableStats *
FencingStatsGetEntry(Oid relid)
{
	FencingStatsKey key;
	FencingTableStats *entry;
	bool		found;

	if (fstate == NULL || fhash == NULL)
		return NULL;

	key.dbid = MyDatabaseId;
	key.relid = relid;

	LWLockAcquire(fstate->lock, LW_SHARED);
	entry = (FencingTableStats *) hash_search(fhash, &key, HASH_FIND, NULL);
	LWLockRelease(fstate->lock);
	if (entry != NULL)
		return entry;

	LWLockAcquire(fstate->lock, LW_EXCLUSIVE);
	entry = NULL;
	if (hash_get_num_entries(fhash) < fencing_stats_max_tables)
		entry = (FencingTableStats *) hash_search(fhash, &key,
												  HASH_ENTER_NULL, &found);
	else
		entry = (FencingTableStats *) hash_search(fhash, &key,
												  HASH_FIND, &found);
	if (entry != NULL && !found)
		InitCounters(entry);
	LWLockRelease(fstate->lock);

	if (entry == NULL)
	{
		if (pg_atomic_test_set_flag(&fstate->overflow_logged))
			ereport(LOG,
					(errmsg("fencing.stats is full"),
					 errdetail("Writes to tables beyond the first %d are counted in the row of fencing.stats whose relid is NULL.",
							   fencing_stats_max_tables),
					 errhint("Raise \"fencing.stats_max_tables\" and restart the server to count more tables separately.")));
		entry = &fstate->overflow;
	}
	return entry;
}

/* Count one write of a relation; lock-free, a no-op for a NULL entry. */
void
FencingStatsCount(FencingTableStats *entry, FencingTableCounter counter)
{
	if (entry == NULL)
		return;
	Assert(counter >= 0 && counter < FENCING_STAT_NCOUNTERS);
	pg_atomic_fetch_add_u64(&entry->counters[counter], 1);
}

/* Count one outcome of idem_begin; lock-free, a no-op without the preload. */
void
FencingStatsCountIdem(FencingIdemCounter counter)
{
	if (fstate == NULL)
		return;
	Assert(counter >= 0 && counter < FENCING_IDEM_NCOUNTERS);
	pg_atomic_fetch_add_u64(&fstate->idem[counter], 1);
}

/* Raise the error of pg_stat_statements' kind when not preloaded. */
static void
CheckStatsAvailable(void)
{
	if (fstate == NULL || fhash == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fencing must be loaded via \"shared_preload_libraries\""),
				 errhint("Add fencing to \"shared_preload_libraries\" in postgresql.conf and restart the server to collect statistics.")));
}

/* Set up a materialized set-returning call; works on PostgreSQL 13-17. */
static Tuplestorestate *
BeginMaterializedSRF(FunctionCallInfo fcinfo, TupleDesc *tupdesc)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcontext;
	Tuplestorestate *tupstore;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	if (!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("materialize mode required, but it is not allowed in this context")));

	oldcontext = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupstore = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tupstore;
	rsinfo->setDesc = *tupdesc;
	MemoryContextSwitchTo(oldcontext);

	return tupstore;
}

/* Append one relation's counters to the result of stats_internal(). */
static void
AddStatsRow(Tuplestorestate *tupstore, TupleDesc tupdesc,
			FencingTableStats *entry, bool is_overflow)
{
	Datum		values[1 + FENCING_STAT_NCOUNTERS];
	bool		nulls[1 + FENCING_STAT_NCOUNTERS];
	int			i;

	memset(nulls, 0, sizeof(nulls));
	if (is_overflow)
	{
		values[0] = (Datum) 0;
		nulls[0] = true;
	}
	else
		values[0] = ObjectIdGetDatum(entry->key.relid);
	for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
		values[1 + i] = Int64GetDatum((int64)
									  pg_atomic_read_u64(&entry->counters[i]));
	tuplestore_putvalues(tupstore, tupdesc, values, nulls);
}

/*
 * fencing.stats_internal(): the counters of the current database's
 * relations, plus the overflow row (relid NULL) when it counted anything.
 */
Datum
fencing_stats_internal(PG_FUNCTION_ARGS)
{
	Tuplestorestate *tupstore;
	TupleDesc	tupdesc;
	HASH_SEQ_STATUS hash_seq;
	FencingTableStats *entry;
	int			i;
	bool		overflowed = false;

	CheckStatsAvailable();
	tupstore = BeginMaterializedSRF(fcinfo, &tupdesc);

	/* the shared lock keeps inserts out of the scan, not the counting */
	LWLockAcquire(fstate->lock, LW_SHARED);
	hash_seq_init(&hash_seq, fhash);
	while ((entry = hash_seq_search(&hash_seq)) != NULL)
	{
		if (entry->key.dbid != MyDatabaseId)
			continue;
		AddStatsRow(tupstore, tupdesc, entry, false);
	}
	LWLockRelease(fstate->lock);

	for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
		if (pg_atomic_read_u64(&fstate->overflow.counters[i]) != 0)
			overflowed = true;
	if (overflowed)
		AddStatsRow(tupstore, tupdesc, &fstate->overflow, true);

	return (Datum) 0;
}

/* fencing.idempotency_stats_internal(): the outcomes of idem_begin. */
Datum
fencing_idempotency_stats_internal(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[FENCING_IDEM_NCOUNTERS];
	bool		nulls[FENCING_IDEM_NCOUNTERS];
	int			i;

	CheckStatsAvailable();

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	memset(nulls, 0, sizeof(nulls));
	for (i = 0; i < FENCING_IDEM_NCOUNTERS; i++)
		values[i] = Int64GetDatum((int64) pg_atomic_read_u64(&fstate->idem[i]));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * fencing.stats_reset(): zero every counter, of all databases.  Entries
 * stay where they are, since backends cache pointers to them.
 */
Datum
fencing_stats_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS hash_seq;
	FencingTableStats *entry;
	int			i;

	(void) fcinfo;				/* no arguments */
	CheckStatsAvailable();

	LWLockAcquire(fstate->lock, LW_SHARED);
	hash_seq_init(&hash_seq, fhash);
	while ((entry = hash_seq_search(&hash_seq)) != NULL)
	{
		for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
			pg_atomic_write_u64(&entry->counters[i], 0);
	}
	LWLockRelease(fstate->lock);

	for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
		pg_atomic_write_u64(&fstate->overflow.counters[i], 0);
	for (i = 0; i < FENCING_IDEM_NCOUNTERS; i++)
		pg_atomic_write_u64(&fstate->idem[i], 0);

	PG_RETURN_VOID();
}
