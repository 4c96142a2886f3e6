/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Counters in shared memory: fencing.stats (the guard, per table),
 *	  fencing.idempotency_stats (idem_begin outcomes, cluster-wide),
 *	  fencing.lease_stats (the built-in leases, per database), and
 *	  fencing.stats_reset.  They are saved at a clean shutdown and loaded
 *	  at start, as pg_stat_statements does.
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
 * (FencingStatsCount), no lock.
 *
 * Freeing entries.  An entry is removed when its table is dropped or
 * unprotected (FencingStatsForget), at the commit of that transaction,
 * and not before: a rollback keeps the table protected and its counters.
 * Other backends may have cached a pointer to the entry.  They cannot use
 * it any more: DROP TABLE and unprotect() hold a lock on the table that
 * conflicts with every write until they commit, and they send a relcache
 * invalidation for it, which a writer processes when it next locks the
 * table, before its guard fires; the invalidation drops the cached
 * configuration with the pointer (guard_config.c).  And since the hash
 * has a fixed size in shared memory, a freed entry's memory stays mapped
 * and only ever holds another entry, so even a pointer used too late
 * could miscount, never crash.
 *
 * Dropped databases.  DROP DATABASE frees every entry of the database
 * (its tables', its lease counters, its memory of grant ends) when it
 * commits: an object access hook sees the drop in the backend that runs
 * it, which has the library loaded since it is preloaded.  No backend can
 * hold a pointer to those entries: nobody is connected to a database
 * being dropped.  Counters loaded from the file at start may still name a
 * database that was dropped while the server ran without the preload (the
 * file stays until a start with the preload loads it): the first backend
 * that touches the counters after such a start frees the entries of every
 * database that no longer exists.  So the entries of a dropped database
 * neither take room that new tables need nor come back after a restart.
 *
 * When the hash is full, a new relation's writes are counted in one
 * cluster-wide overflow entry, shown in fencing.stats as the row whose
 * relid is NULL (in every database), and the first overflow is logged
 * once; nothing is silently dropped.
 *
 * Leases.  Each database has one set of lease counters (a small shared
 * hash keyed by database, sized by fencing.stats_max_databases, with an
 * overflow entry of its own), kept under a spinlock: lease calls are
 * rare next to guarded writes, and the hold time's maximum cannot be an
 * atomic add.  A grant's end (by release, by expiry, or by its holder
 * acquiring again) is counted once: a second shared hash remembers, per
 * lease name, the token of the last grant whose end was counted, so that
 * whichever of acquire, renew, release or check first notices that a
 * grant ran out counts it, and the others do not.  Tokens only grow, so
 * "already counted" is "token <= the remembered one".  That hash is sized
 * by fencing.stats_max_leases; names beyond it are counted without the
 * memory (an expiry may then be counted by each call that notices it),
 * and the first time that happens is logged.
 *
 * Persistence.  At a clean shutdown the postmaster writes every counter
 * to pg_stat/fencing.stat (write, fsync, rename, fsync of the directory)
 * in a versioned format with a CRC; at start it loads the file and
 * removes it, so that a crash, an immediate shutdown (which leaves the
 * control file "in production") or a copy of the data directory never
 * brings back counters that went on moving afterwards.  A file that does
 * not match (another format, a bad checksum, truncated) is ignored with a
 * WARNING in the server log.
 *
 * Counters are 64-bit; one would need centuries at a billion increments a
 * second to pass bigint's maximum, but if one ever does, the views show
 * the maximum and warn rather than wrap around.  A reset that races with
 * a write may or may not include that write.  Counters count what the
 * guard and the functions decided, also in transactions that later roll
 * back.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>
#include "access/xact.h"
#include "access/xlog_internal.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_control.h"
#include "catalog/pg_database.h"
#include "common/hashfn.h"
#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "fence.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(fencing_stats_internal);
PG_FUNCTION_INFO_V1(fencing_idempotency_stats_internal);
PG_FUNCTION_INFO_V1(fencing_lease_stats_internal);
PG_FUNCTION_INFO_V1(fencing_stats_reset);

#define FENCING_STATS_TRANCHE	"fencing"

#define FENCING_STAT_NCOUNTERS	(FENCING_STAT_REJECTED_LEASE + 1)
#define FENCING_IDEM_NCOUNTERS	(FENCING_IDEM_CLAIM_TAKEN_OVER + 1)

/*
 * The counters that fencing 1.0-1.3 had, which their views show: a
 * refusal of any reason was rejected_stale, and no claim was counted.
 */
#define FENCING_STAT_NCOUNTERS_1_0	(FENCING_STAT_BYPASSED + 1)
#define FENCING_IDEM_NCOUNTERS_1_0	(FENCING_IDEM_IN_PROGRESS_REJECTED + 1)
#define FENCING_LEASE_NCOUNTERS (FENCING_LEASE_REJECTED + 1)

/* The file the counters are saved in between a clean shutdown and a start */
#define FENCING_STATS_FILE		PGSTAT_STAT_PERMANENT_DIRECTORY "/fencing.stat"
#define FENCING_STATS_FILE_TMP	FENCING_STATS_FILE ".tmp"

/* "FNCS", and the format of the file: change it with any change below */
#define FENCING_STATS_MAGIC		0x464E4353
#define FENCING_STATS_FORMAT	2

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

/* One database's lease counters */
typedef struct FencingLeaseStats
{
	Oid			dbid;			/* hash key, must be first */
	slock_t		mutex;			/* protects everything below */
	uint64		counters[FENCING_LEASE_NCOUNTERS];
	uint64		hold_count;		/* grants whose end was counted */
	double		hold_sum;		/* their hold times, in seconds */
	double		hold_max;
} FencingLeaseStats;

/* Key of the memory of counted grant ends: a lease name of a database */
typedef struct FencingLeaseEndKey
{
	Oid			dbid;
	uint32		pad;			/* zero: the key is hashed as bytes */
	uint64		namehash;
} FencingLeaseEndKey;

/* The last grant of a lease name whose end was counted */
typedef struct FencingLeaseEnd
{
	FencingLeaseEndKey key;		/* hash key, must be first */
	Fence		ended;			/* its token */
} FencingLeaseEnd;

/* The fixed part of the shared state */
typedef struct FencingStatsShared
{
	LWLock	   *lock;			/* taken to look up, insert and remove
								 * entries of the three hashes */
	pg_atomic_flag overflow_logged; /* set once the table hash was full */
	pg_atomic_flag lease_overflow_logged;	/* ... the database hash */
	pg_atomic_flag ends_full_logged;	/* ... the lease-name hash */
	pg_atomic_uint32 sweep_pending; /* 1: loaded entries may name dropped
									 * databases; the next backend frees them */
	FencingTableStats overflow; /* writes of relations that did not fit */
	pg_atomic_uint64 idem[FENCING_IDEM_NCOUNTERS];
	FencingLeaseStats lease_overflow;	/* databases that did not fit */
} FencingStatsShared;

/* fencing.stats_max_tables, stats_max_databases, stats_max_leases */
static int	fencing_stats_max_tables = 1000;
static int	fencing_stats_max_databases = 100;
static int	fencing_stats_max_leases = 1000;

/* Pointers into shared memory; NULL without the preload */
static FencingStatsShared *fstate = NULL;
static HTAB *fhash = NULL;		/* tables */
static HTAB *lhash = NULL;		/* lease counters per database */
static HTAB *ehash = NULL;		/* counted grant ends per lease name */

/* This backend's database's lease counters, once looked up */
static FencingLeaseStats *my_lease_stats = NULL;

/*
 * Tables whose counters this transaction will free at commit: dropped or
 * unprotected, with the (sub)transaction level that did it; or, with
 * relid InvalidOid, a database being dropped, all of whose entries go.
 * Allocated in TopTransactionContext.
 */
typedef struct PendingForget
{
	Oid			dbid;
	Oid			relid;
	int			nestlevel;
	struct PendingForget *next;
} PendingForget;

static PendingForget *pending_forgets = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;
static object_access_hook_type prev_object_access_hook = NULL;

static Size FencingStatsShmemSize(void);
static void FencingStatsShmemRequest(void);
static void FencingStatsShmemStartup(void);
static void FencingStatsShmemShutdown(int code, Datum arg);
static void StatsObjectAccess(ObjectAccessType access, Oid classId,
							  Oid objectId, int subId, void *arg);
static void ForgetDatabaseEntries(Oid dbid);
static void SweepDroppedDatabases(void);
static void StatsXactCallback(XactEvent event, void *arg);
static void StatsSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
								 SubTransactionId parentSubid, void *arg);
static void CheckStatsAvailable(void);
static void InitCounters(FencingTableStats *entry);
static void InitLeaseStats(FencingLeaseStats *entry, Oid dbid);
static FencingLeaseStats *LeaseStatsEntry(void);
static void LoadStatsFile(void);
static void SaveStatsFile(void);
static Datum CounterGetDatum(uint64 value, const char *name);
static Tuplestorestate *BeginMaterializedSRF(FunctionCallInfo fcinfo,
											 TupleDesc *tupdesc);
static void AddStatsRow(Tuplestorestate *tupstore, TupleDesc tupdesc,
						FencingTableStats *entry, bool is_overflow);

/* Register the settings and the shared memory hooks, when preloaded. */
void
FencingStatsInit(void)
{
	/*
	 * Shared memory can only be reserved by the postmaster.  Loaded later,
	 * the library works without statistics; the settings are not even
	 * defined then, so that a postgresql.conf line for them does not make
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
	DefineCustomIntVariable("fencing.stats_max_databases",
							"Maximum number of databases whose lease counters fencing.lease_stats keeps separately.",
							"The lease calls of further databases are counted together, and each of them shows that sum.",
							&fencing_stats_max_databases,
							100,
							1,
							INT_MAX / 2,
							PGC_POSTMASTER,
							0,
							NULL,
							NULL,
							NULL);
	DefineCustomIntVariable("fencing.stats_max_leases",
							"Maximum number of lease names whose last counted grant end fencing.lease_stats remembers.",
							"Beyond it, an expiry may be counted by each call that notices it rather than once.",
							&fencing_stats_max_leases,
							1000,
							1,
							INT_MAX / 2,
							PGC_POSTMASTER,
							0,
							NULL,
							NULL,
							NULL);

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = FencingStatsShmemRequest;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = FencingStatsShmemStartup;

	/* freeing the entries of dropped and unprotected tables at commit */
	RegisterXactCallback(StatsXactCallback, NULL);
	RegisterSubXactCallback(StatsSubXactCallback, NULL);

	/* ... and those of dropped databases */
	prev_object_access_hook = object_access_hook;
	object_access_hook = StatsObjectAccess;
}

/* Bytes of shared memory needed for the three hashes. */
static Size
FencingStatsShmemSize(void)
{
	Size		size;

	size = MAXALIGN(sizeof(FencingStatsShared));
	size = add_size(size, hash_estimate_size(fencing_stats_max_tables,
											 sizeof(FencingTableStats)));
	size = add_size(size, hash_estimate_size(fencing_stats_max_databases,
											 sizeof(FencingLeaseStats)));
	size = add_size(size, hash_estimate_size(fencing_stats_max_leases,
											 sizeof(FencingLeaseEnd)));
	return size;
}

/* Reserve the shared memory and the LWLock (shmem_request_hook). */
static void
FencingStatsShmemRequest(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();

	RequestAddinShmemSpace(FencingStatsShmemSize());
	RequestNamedLWLockTranche(FENCING_STATS_TRANCHE, 1);
}

/*
 * Create or attach to the shared state (shmem_startup_hook); the process
 * that creates it (the postmaster) loads the saved counters and arranges
 * for them to be saved when it exits.
 */
static void
FencingStatsShmemStartup(void)
{
	HASHCTL		info;
	bool		found;
	int			i;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	/* reset in case this is a restart within the postmaster */
	fstate = NULL;
	fhash = NULL;
	lhash = NULL;
	ehash = NULL;
	my_lease_stats = NULL;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);

	fstate = ShmemInitStruct("fencing stats", sizeof(FencingStatsShared),
							 &found);
	if (!found)
	{
		fstate->lock = &(GetNamedLWLockTranche(FENCING_STATS_TRANCHE))->lock;
		pg_atomic_init_u32(&fstate->sweep_pending, 0);
		pg_atomic_init_flag(&fstate->overflow_logged);
		pg_atomic_init_flag(&fstate->lease_overflow_logged);
		pg_atomic_init_flag(&fstate->ends_full_logged);
		fstate->overflow.key.dbid = InvalidOid;
		fstate->overflow.key.relid = InvalidOid;
		InitCounters(&fstate->overflow);
		for (i = 0; i < FENCING_IDEM_NCOUNTERS; i++)
			pg_atomic_init_u64(&fstate->idem[i], 0);
		InitLeaseStats(&fstate->lease_overflow, InvalidOid);
	}

	/*
	 * All entries are allocated up front (HASH_FIXED_SIZE): a hash never
	 * grows into the shared memory that others count on, an insert into a
	 * full hash fails cleanly instead, and a removed entry's memory stays
	 * an entry.
	 */
	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(FencingStatsKey);
	info.entrysize = sizeof(FencingTableStats);
	fhash = ShmemInitHash("fencing stats hash",
						  fencing_stats_max_tables, fencing_stats_max_tables,
						  &info,
						  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(Oid);
	info.entrysize = sizeof(FencingLeaseStats);
	lhash = ShmemInitHash("fencing lease stats hash",
						  fencing_stats_max_databases, fencing_stats_max_databases,
						  &info,
						  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	memset(&info, 0, sizeof(info));
	info.keysize = sizeof(FencingLeaseEndKey);
	info.entrysize = sizeof(FencingLeaseEnd);
	ehash = ShmemInitHash("fencing lease ends hash",
						  fencing_stats_max_leases, fencing_stats_max_leases,
						  &info,
						  HASH_ELEM | HASH_BLOBS | HASH_FIXED_SIZE);

	LWLockRelease(AddinShmemInitLock);

	/* the postmaster (or a standalone backend) saves the counters at exit */
	if (!IsUnderPostmaster)
		on_shmem_exit(FencingStatsShmemShutdown, (Datum) 0);

	/* no other process runs yet: no lock needed to load */
	if (!found)
		LoadStatsFile();
}

/* Save the counters at a clean exit of the postmaster (on_shmem_exit). */
static void
FencingStatsShmemShutdown(int code, Datum arg)
{
	(void) arg;

	/* not after a crash */
	if (code != 0)
		return;
	if (fstate == NULL || fhash == NULL || lhash == NULL || ehash == NULL)
		return;
	SaveStatsFile();
}

/* Zero a relation's counters. */
static void
InitCounters(FencingTableStats *entry)
{
	int			i;

	for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
		pg_atomic_init_u64(&entry->counters[i], 0);
}

/* Zero a database's lease counters. */
static void
InitLeaseStats(FencingLeaseStats *entry, Oid dbid)
{
	entry->dbid = dbid;
	SpinLockInit(&entry->mutex);
	memset(entry->counters, 0, sizeof(entry->counters));
	entry->hold_count = 0;
	entry->hold_sum = 0;
	entry->hold_max = 0;
}

/*
 * Find or create the counters of a relation of the current database.
 *
 * NULL without the preload.  The result stays valid, at the same address,
 * until the table is dropped or unprotected, so callers may cache it
 * where a relcache invalidation of the table drops the cached pointer;
 * when the hash is full the result is the shared overflow entry.
 */
FencingTableStats *
FencingStatsGetEntry(Oid relid)
{
	FencingStatsKey key;
	FencingTableStats *entry;
	bool		found;

	if (fstate == NULL || fhash == NULL)
		return NULL;
	SweepDroppedDatabases();

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

/*
 * Free the counters of a table of the current database when this
 * transaction commits (the table is being dropped or unprotected).  A
 * no-op without the preload.  Protecting the table again later starts its
 * counters from zero.
 */
void
FencingStatsForget(Oid relid)
{
	PendingForget *p;

	if (fstate == NULL)
		return;
	p = MemoryContextAlloc(TopTransactionContext, sizeof(PendingForget));
	p->dbid = MyDatabaseId;
	p->relid = relid;
	p->nestlevel = GetCurrentTransactionNestLevel();
	p->next = pending_forgets;
	pending_forgets = p;
}

/*
 * At commit, free the entries of the tables dropped or unprotected; at
 * abort, keep them.  A prepared transaction keeps them too: its COMMIT
 * PREPARED runs elsewhere, and freeing them at PREPARE would leave the
 * cached pointers of a table that a ROLLBACK PREPARED keeps protected
 * aimed at a freed entry.  (Such an entry lingers until the server's
 * statistics are reset by a crash; it is harmless.)
 */
static void
StatsXactCallback(XactEvent event, void *arg)
{
	PendingForget *p;

	(void) arg;
	if (pending_forgets == NULL)
		return;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			if (fstate != NULL && fhash != NULL)
			{
				LWLockAcquire(fstate->lock, LW_EXCLUSIVE);
				for (p = pending_forgets; p != NULL; p = p->next)
				{
					FencingStatsKey key;

					if (!OidIsValid(p->relid))
					{
						ForgetDatabaseEntries(p->dbid);
						continue;
					}
					key.dbid = p->dbid;
					key.relid = p->relid;
					(void) hash_search(fhash, &key, HASH_REMOVE, NULL);
				}
				LWLockRelease(fstate->lock);
			}
			pending_forgets = NULL;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* the list goes with TopTransactionContext */
			pending_forgets = NULL;
			break;
		default:
			break;
	}
}

/* A rolled-back subtransaction forgets nothing; a committed one hands up. */
static void
StatsSubXactCallback(SubXactEvent event, SubTransactionId mySubid,
					 SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	PendingForget **pp;

	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		pp = &pending_forgets;
		while (*pp != NULL)
		{
			if ((*pp)->nestlevel >= level)
				*pp = (*pp)->next;	/* freed with the transaction's memory */
			else
				pp = &(*pp)->next;
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		PendingForget *p;

		for (p = pending_forgets; p != NULL; p = p->next)
			if (p->nestlevel >= level)
				p->nestlevel = level - 1;
	}
}

/*
 * The object access hook: DROP DATABASE frees the database's entries when
 * it commits (dropdb() calls the hook before its last checks, which may
 * still fail).  DROP DATABASE runs in a transaction of its own, never in
 * a subtransaction.
 */
static void
StatsObjectAccess(ObjectAccessType access, Oid classId, Oid objectId,
				  int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access == OAT_DROP && classId == DatabaseRelationId && fstate != NULL)
	{
		PendingForget *p;

		p = MemoryContextAlloc(TopTransactionContext, sizeof(PendingForget));
		p->dbid = objectId;
		p->relid = InvalidOid;
		p->nestlevel = GetCurrentTransactionNestLevel();
		p->next = pending_forgets;
		pending_forgets = p;
	}
}

/*
 * Remove every entry of database dbid: its tables' counters, its lease
 * counters and its memory of grant ends.  The caller holds the lock
 * exclusively.  (dynahash allows removing the element just returned by a
 * sequential scan.)
 */
static void
ForgetDatabaseEntries(Oid dbid)
{
	HASH_SEQ_STATUS hash_seq;
	FencingTableStats *entry;
	FencingLeaseEnd *end;

	hash_seq_init(&hash_seq, fhash);
	while ((entry = hash_seq_search(&hash_seq)) != NULL)
		if (entry->key.dbid == dbid)
			(void) hash_search(fhash, &entry->key, HASH_REMOVE, NULL);
	(void) hash_search(lhash, &dbid, HASH_REMOVE, NULL);
	hash_seq_init(&hash_seq, ehash);
	while ((end = hash_seq_search(&hash_seq)) != NULL)
		if (end->key.dbid == dbid)
			(void) hash_search(ehash, &end->key, HASH_REMOVE, NULL);
}

/*
 * Once after a start that loaded counters from the file: free the entries
 * of every database that no longer exists (dropped while the server ran
 * without the preload, so that no hook saw it).  Runs in the first
 * backend that touches the counters inside a transaction; pg_database is
 * a shared catalog, readable from any database.
 */
static void
SweepDroppedDatabases(void)
{
	HASH_SEQ_STATUS hash_seq;
	FencingTableStats *entry;
	FencingLeaseStats *lentry;
	FencingLeaseEnd *end;
	Oid		   *dbids;
	int			ndbids = 0;
	int			capacity;
	int			i;

	if (pg_atomic_read_u32(&fstate->sweep_pending) == 0 ||
		!IsTransactionState() ||
		pg_atomic_exchange_u32(&fstate->sweep_pending, 0) == 0)
		return;

	/* the databases named, under the lock; looked up without it */
	LWLockAcquire(fstate->lock, LW_SHARED);
	capacity = hash_get_num_entries(fhash) + hash_get_num_entries(lhash) +
		hash_get_num_entries(ehash) + 1;
	dbids = palloc(sizeof(Oid) * capacity);
	hash_seq_init(&hash_seq, fhash);
	while ((entry = hash_seq_search(&hash_seq)) != NULL)
		dbids[ndbids++] = entry->key.dbid;
	hash_seq_init(&hash_seq, lhash);
	while ((lentry = hash_seq_search(&hash_seq)) != NULL)
		dbids[ndbids++] = lentry->dbid;
	hash_seq_init(&hash_seq, ehash);
	while ((end = hash_seq_search(&hash_seq)) != NULL)
		dbids[ndbids++] = end->key.dbid;
	LWLockRelease(fstate->lock);

	for (i = 0; i < ndbids; i++)
	{
		int			j;
		bool		seen = false;

		for (j = 0; j < i && !seen; j++)
			seen = dbids[j] == dbids[i];
		if (seen || dbids[i] == MyDatabaseId ||
			SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(dbids[i])))
			continue;
		LWLockAcquire(fstate->lock, LW_EXCLUSIVE);
		ForgetDatabaseEntries(dbids[i]);
		LWLockRelease(fstate->lock);
	}
	pfree(dbids);
}

/*
 * The lease counters of the current database, found or created once per
 * backend; the overflow entry when the hash is full.  NULL without the
 * preload.  Entries are never removed, so the pointer stays valid.
 */
static FencingLeaseStats *
LeaseStatsEntry(void)
{
	FencingLeaseStats *entry;
	bool		found;
	Oid			dbid = MyDatabaseId;

	if (fstate == NULL || lhash == NULL)
		return NULL;
	if (my_lease_stats != NULL)
		return my_lease_stats;
	SweepDroppedDatabases();

	LWLockAcquire(fstate->lock, LW_EXCLUSIVE);
	entry = (FencingLeaseStats *) hash_search(lhash, &dbid, HASH_FIND, NULL);
	if (entry == NULL &&
		hash_get_num_entries(lhash) < fencing_stats_max_databases)
	{
		entry = (FencingLeaseStats *) hash_search(lhash, &dbid,
												  HASH_ENTER_NULL, &found);
		if (entry != NULL && !found)
			InitLeaseStats(entry, dbid);
	}
	LWLockRelease(fstate->lock);

	if (entry == NULL)
	{
		if (pg_atomic_test_set_flag(&fstate->lease_overflow_logged))
			ereport(LOG,
					(errmsg("fencing.lease_stats is full"),
					 errdetail("The lease calls of databases beyond the first %d are counted together, and fencing.lease_stats shows that sum in each of them.",
							   fencing_stats_max_databases),
					 errhint("Raise \"fencing.stats_max_databases\" and restart the server to count more databases separately.")));
		entry = &fstate->lease_overflow;
	}
	my_lease_stats = entry;
	return entry;
}

/* Count one outcome of a lease call of the current database. */
void
FencingStatsCountLease(FencingLeaseCounter counter)
{
	FencingLeaseStats *entry = LeaseStatsEntry();

	if (entry == NULL)
		return;
	Assert(counter >= 0 && counter < FENCING_LEASE_NCOUNTERS);
	SpinLockAcquire(&entry->mutex);
	entry->counters[counter]++;
	SpinLockRelease(&entry->mutex);
}

/*
 * Count the end of the grant of lease name whose token is token, granted
 * at granted_at and ended at ended_at (released, replaced, or run out
 * when expired), unless its end was counted already.  Returns whether it
 * counted.  The hold time goes into the hold figures; an expiry into
 * expired.
 */
bool
FencingStatsLeaseEnded(const char *name, int namelen, const Fence *token,
					   TimestampTz granted_at, TimestampTz ended_at,
					   bool expired)
{
	FencingLeaseStats *stats = LeaseStatsEntry();
	FencingLeaseEndKey key;
	FencingLeaseEnd *end;
	bool		found = false;
	double		held;

	if (stats == NULL || ehash == NULL)
		return false;

	memset(&key, 0, sizeof(key));
	key.dbid = MyDatabaseId;
	key.namehash = hash_bytes_extended((const unsigned char *) name,
									   namelen, 0);

	LWLockAcquire(fstate->lock, LW_EXCLUSIVE);
	end = (FencingLeaseEnd *) hash_search(ehash, &key, HASH_FIND, NULL);
	if (end != NULL)
		found = true;
	else if (hash_get_num_entries(ehash) < fencing_stats_max_leases)
		end = (FencingLeaseEnd *) hash_search(ehash, &key, HASH_ENTER_NULL,
											  &found);
	if (found && FenceCmp(token, &end->ended) <= 0)
	{
		/* this grant's end, or a later one's, was counted */
		LWLockRelease(fstate->lock);
		return false;
	}
	if (end != NULL)
		end->ended = *token;
	LWLockRelease(fstate->lock);

	if (end == NULL &&
		pg_atomic_test_set_flag(&fstate->ends_full_logged))
		ereport(LOG,
				(errmsg("fencing.lease_stats cannot remember more lease names"),
				 errdetail("The ends of grants of lease names beyond the first %d are counted without memory: an expiry may be counted by each call that notices it.",
						   fencing_stats_max_leases),
				 errhint("Raise \"fencing.stats_max_leases\" and restart the server.")));

	held = (ended_at > granted_at) ? (double) (ended_at - granted_at) / USECS_PER_SEC : 0.0;
	SpinLockAcquire(&stats->mutex);
	if (expired)
		stats->counters[FENCING_LEASE_EXPIRED]++;
	stats->hold_count++;
	stats->hold_sum += held;
	if (held > stats->hold_max)
		stats->hold_max = held;
	SpinLockRelease(&stats->mutex);
	return true;
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

/*
 * A counter as a bigint.  A counter past bigint's maximum (centuries away
 * at any real rate) shows the maximum, with a warning: never a wrapped or
 * negative value.
 */
static Datum
CounterGetDatum(uint64 value, const char *name)
{
	if (value > (uint64) PG_INT64_MAX)
	{
		ereport(WARNING,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("fencing counter \"%s\" passed the maximum of bigint", name),
				 errdetail("It is shown as %lld.", (long long) PG_INT64_MAX),
				 errhint("Call fencing.stats_reset() to start counting again.")));
		value = (uint64) PG_INT64_MAX;
	}
	return Int64GetDatum((int64) value);
}

/* Set up a materialized set-returning call; works on PostgreSQL 13-18. */
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

/* Names of the counters, for the warning of CounterGetDatum() */
static const char *const TableCounterNames[FENCING_STAT_NCOUNTERS] = {
	"accepted", "rejected_stale", "rejected_missing", "bypassed",
	"rejected_already_used", "rejected_lease_expired"
};
static const char *const IdemCounterNames[FENCING_IDEM_NCOUNTERS] = {
	"started", "replayed", "resumed", "reused_rejected", "in_progress_rejected",
	"claim_taken_over"
};
static const char *const LeaseCounterNames[FENCING_LEASE_NCOUNTERS] = {
	"acquired", "acquire_refused", "renewed", "renew_failed", "released",
	"release_failed", "expired", "rejected"
};

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
		values[1 + i] = CounterGetDatum(pg_atomic_read_u64(&entry->counters[i]),
										TableCounterNames[i]);

	/*
	 * The view of an extension not yet updated to 1.4 has the first five
	 * columns only, and counts every refusal with a token as stale.
	 */
	if (tupdesc->natts == 1 + FENCING_STAT_NCOUNTERS_1_0)
		values[1 + FENCING_STAT_REJECTED_STALE] =
			CounterGetDatum(pg_atomic_read_u64(&entry->counters[FENCING_STAT_REJECTED_STALE]) +
							pg_atomic_read_u64(&entry->counters[FENCING_STAT_REJECTED_ALREADY_USED]) +
							pg_atomic_read_u64(&entry->counters[FENCING_STAT_REJECTED_LEASE]),
							TableCounterNames[FENCING_STAT_REJECTED_STALE]);
	else if (tupdesc->natts != 1 + FENCING_STAT_NCOUNTERS)
		elog(ERROR, "fencing.stats_internal() returns %d columns, expected %d",
			 tupdesc->natts, 1 + FENCING_STAT_NCOUNTERS);
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
	FencingTableStats *copies;
	int			ncopies = 0;
	int			i;
	bool		overflowed = false;

	CheckStatsAvailable();
	SweepDroppedDatabases();
	tupstore = BeginMaterializedSRF(fcinfo, &tupdesc);

	/*
	 * Copy the entries under the lock (which keeps inserts and removals
	 * out of the scan, not the counting), then build the rows without it:
	 * a warning raised while building must not find the lock held.
	 */
	LWLockAcquire(fstate->lock, LW_SHARED);
	copies = palloc(sizeof(FencingTableStats) *
					Max(hash_get_num_entries(fhash), 1));
	hash_seq_init(&hash_seq, fhash);
	while ((entry = hash_seq_search(&hash_seq)) != NULL)
	{
		if (entry->key.dbid != MyDatabaseId)
			continue;
		copies[ncopies].key = entry->key;
		for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
			pg_atomic_init_u64(&copies[ncopies].counters[i],
							   pg_atomic_read_u64(&entry->counters[i]));
		ncopies++;
	}
	LWLockRelease(fstate->lock);

	for (i = 0; i < ncopies; i++)
		AddStatsRow(tupstore, tupdesc, &copies[i], false);

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
	/* before 1.4 the view has no claim_taken_over: the first five */
	if (tupdesc->natts != FENCING_IDEM_NCOUNTERS &&
		tupdesc->natts != FENCING_IDEM_NCOUNTERS_1_0)
		elog(ERROR, "fencing.idempotency_stats_internal() returns %d columns, expected %d",
			 tupdesc->natts, FENCING_IDEM_NCOUNTERS);
	tupdesc = BlessTupleDesc(tupdesc);

	memset(nulls, 0, sizeof(nulls));
	for (i = 0; i < FENCING_IDEM_NCOUNTERS; i++)
		values[i] = CounterGetDatum(pg_atomic_read_u64(&fstate->idem[i]),
									IdemCounterNames[i]);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * fencing.lease_stats_internal(): the lease counters of the current
 * database, one row: the eight counts, hold_count, hold_seconds_sum,
 * hold_seconds_max.
 */
Datum
fencing_lease_stats_internal(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[FENCING_LEASE_NCOUNTERS + 3];
	bool		nulls[FENCING_LEASE_NCOUNTERS + 3];
	FencingLeaseStats *entry;
	FencingLeaseStats copy;
	int			i;

	CheckStatsAvailable();

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);

	entry = LeaseStatsEntry();
	SpinLockAcquire(&entry->mutex);
	copy = *entry;
	SpinLockRelease(&entry->mutex);

	memset(nulls, 0, sizeof(nulls));
	for (i = 0; i < FENCING_LEASE_NCOUNTERS; i++)
		values[i] = CounterGetDatum(copy.counters[i], LeaseCounterNames[i]);
	values[FENCING_LEASE_NCOUNTERS] = CounterGetDatum(copy.hold_count,
													  "hold_count");
	values[FENCING_LEASE_NCOUNTERS + 1] = Float8GetDatum(copy.hold_sum);
	values[FENCING_LEASE_NCOUNTERS + 2] = Float8GetDatum(copy.hold_max);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* Zero a database's lease counters, under its spinlock. */
static void
ResetLeaseStats(FencingLeaseStats *entry)
{
	SpinLockAcquire(&entry->mutex);
	memset(entry->counters, 0, sizeof(entry->counters));
	entry->hold_count = 0;
	entry->hold_sum = 0;
	entry->hold_max = 0;
	SpinLockRelease(&entry->mutex);
}

/*
 * fencing.stats_reset(): zero every counter, of all databases.  Entries
 * stay where they are, since backends cache pointers to them; the memory
 * of counted grant ends stays too (a grant whose end was counted before
 * the reset is not counted again after it).
 */
Datum
fencing_stats_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS hash_seq;
	FencingTableStats *entry;
	FencingLeaseStats *lentry;
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
	hash_seq_init(&hash_seq, lhash);
	while ((lentry = hash_seq_search(&hash_seq)) != NULL)
		ResetLeaseStats(lentry);
	LWLockRelease(fstate->lock);

	for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
		pg_atomic_write_u64(&fstate->overflow.counters[i], 0);
	for (i = 0; i < FENCING_IDEM_NCOUNTERS; i++)
		pg_atomic_write_u64(&fstate->idem[i], 0);
	ResetLeaseStats(&fstate->lease_overflow);

	PG_RETURN_VOID();
}

/* ----------------------------------------------------------------------
 * The statistics file
 *
 * Layout (native byte order: the file never leaves this server):
 *
 *	uint32 magic, uint32 format
 *	uint32 ntables, uint32 ndatabases, uint32 nends
 *	uint64 idem[NI]
 *	uint64 overflow table counters[NT]
 *	lease record of the overflow entry
 *	ntables x { uint32 dbid, uint32 relid, uint64 counters[NT] }
 *	ndatabases x lease record
 *	nends x { uint32 dbid, uint64 namehash, int64 epoch, int64 counter }
 *	uint32 CRC-32C of everything before it
 *
 * where a lease record is { uint32 dbid, uint64 counters[8], uint64
 * hold_count, float8 hold_sum, float8 hold_max }, and NI, NT are 6 and 6
 * in format 2, 5 and 4 in format 1 (fencing 1.0-1.3, read too: a package
 * update restarts the server with the counters it saved, its refusals
 * with a token all counted as stale).
 * ----------------------------------------------------------------------
 */

#define FILE_HEADER_SIZE	(5 * sizeof(uint32))
#define FILE_FIXED_SIZE_N(nidem, ntable) (FILE_HEADER_SIZE + \
							 (nidem) * sizeof(uint64) + \
							 (ntable) * sizeof(uint64) + \
							 LEASE_RECORD_SIZE)
#define TABLE_RECORD_SIZE_N(ntable)	(2 * sizeof(uint32) + (ntable) * sizeof(uint64))
#define FILE_FIXED_SIZE		FILE_FIXED_SIZE_N(FENCING_IDEM_NCOUNTERS, FENCING_STAT_NCOUNTERS)
#define TABLE_RECORD_SIZE	TABLE_RECORD_SIZE_N(FENCING_STAT_NCOUNTERS)
#define LEASE_RECORD_SIZE	(sizeof(uint32) + (FENCING_LEASE_NCOUNTERS + 1) * sizeof(uint64) + \
							 2 * sizeof(double))
#define END_RECORD_SIZE		(sizeof(uint32) + 3 * sizeof(uint64))

/* A cursor over the file's bytes */
typedef struct FileReader
{
	const char *p;
	const char *end;
} FileReader;

static void
PutU32(StringInfo buf, uint32 v)
{
	appendBinaryStringInfo(buf, (const char *) &v, sizeof(v));
}

static void
PutU64(StringInfo buf, uint64 v)
{
	appendBinaryStringInfo(buf, (const char *) &v, sizeof(v));
}

static void
PutF64(StringInfo buf, double v)
{
	appendBinaryStringInfo(buf, (const char *) &v, sizeof(v));
}

static uint32
GetU32(FileReader *r)
{
	uint32		v;

	Assert(r->end - r->p >= (ptrdiff_t) sizeof(v));
	memcpy(&v, r->p, sizeof(v));
	r->p += sizeof(v);
	return v;
}

static uint64
GetU64(FileReader *r)
{
	uint64		v;

	Assert(r->end - r->p >= (ptrdiff_t) sizeof(v));
	memcpy(&v, r->p, sizeof(v));
	r->p += sizeof(v);
	return v;
}

static double
GetF64(FileReader *r)
{
	double		v;

	Assert(r->end - r->p >= (ptrdiff_t) sizeof(v));
	memcpy(&v, r->p, sizeof(v));
	r->p += sizeof(v);
	return v;
}

/* Append a database's lease counters (copied under its spinlock). */
static void
PutLeaseRecord(StringInfo buf, FencingLeaseStats *entry)
{
	FencingLeaseStats copy;
	int			i;

	SpinLockAcquire(&entry->mutex);
	copy = *entry;
	SpinLockRelease(&entry->mutex);

	PutU32(buf, copy.dbid);
	for (i = 0; i < FENCING_LEASE_NCOUNTERS; i++)
		PutU64(buf, copy.counters[i]);
	PutU64(buf, copy.hold_count);
	PutF64(buf, copy.hold_sum);
	PutF64(buf, copy.hold_max);
}

/* Add a saved lease record to entry (zeroed or the overflow). */
static void
AddLeaseRecord(FencingLeaseStats *entry, FileReader *r)
{
	int			i;
	double		sum;
	double		max;

	for (i = 0; i < FENCING_LEASE_NCOUNTERS; i++)
		entry->counters[i] += GetU64(r);
	entry->hold_count += GetU64(r);
	sum = GetF64(r);
	max = GetF64(r);
	/* a NaN or a negative figure is not ours: leave it out */
	if (sum >= 0)
		entry->hold_sum += sum;
	if (max > entry->hold_max)
		entry->hold_max = max;
}

/*
 * Did the server last stop cleanly?  The shutdown checkpoint marks the
 * control file "shut down" (or "shut down in recovery" on a standby);
 * after a crash or an immediate shutdown it still says "in production"
 * (or "in archive recovery").  Read without ereport(ERROR): this runs in
 * the postmaster, also on its way out.
 */
static bool
ShutdownWasClean(void)
{
	ControlFileData control;
	pg_crc32c	crc;
	int			fd;
	int			r;

	fd = OpenTransientFile(XLOG_CONTROL_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0)
		return false;
	r = read(fd, &control, sizeof(control));
	CloseTransientFile(fd);
	if (r != sizeof(control))
		return false;

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, (char *) &control, offsetof(ControlFileData, crc));
	FIN_CRC32C(crc);
	if (!EQ_CRC32C(crc, control.crc))
		return false;
	return control.state == DB_SHUTDOWNED ||
		control.state == DB_SHUTDOWNED_IN_RECOVERY;
}

/*
 * Write every counter to FENCING_STATS_FILE: into a temporary file,
 * fsync'ed, then renamed over the old one (durable_rename also fsyncs the
 * directory), so that the file is either the old one or the whole new
 * one.  Only after a clean shutdown: an immediate one calls the exit
 * hooks with a status of 0 as well.  Failures are logged, nothing more:
 * the server is on its way out.
 */
static void
SaveStatsFile(void)
{
	StringInfoData buf;
	HASH_SEQ_STATUS hash_seq;
	FencingTableStats *entry;
	FencingLeaseStats *lentry;
	FencingLeaseEnd *end;
	pg_crc32c	crc;
	int			fd;
	int			i;

	if (!ShutdownWasClean())
	{
		ereport(LOG,
				(errmsg("fencing statistics not saved: the server did not shut down cleanly")));
		return;
	}

	initStringInfo(&buf);
	PutU32(&buf, FENCING_STATS_MAGIC);
	PutU32(&buf, FENCING_STATS_FORMAT);
	PutU32(&buf, (uint32) hash_get_num_entries(fhash));
	PutU32(&buf, (uint32) hash_get_num_entries(lhash));
	PutU32(&buf, (uint32) hash_get_num_entries(ehash));
	for (i = 0; i < FENCING_IDEM_NCOUNTERS; i++)
		PutU64(&buf, pg_atomic_read_u64(&fstate->idem[i]));
	for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
		PutU64(&buf, pg_atomic_read_u64(&fstate->overflow.counters[i]));
	PutLeaseRecord(&buf, &fstate->lease_overflow);

	hash_seq_init(&hash_seq, fhash);
	while ((entry = hash_seq_search(&hash_seq)) != NULL)
	{
		PutU32(&buf, entry->key.dbid);
		PutU32(&buf, entry->key.relid);
		for (i = 0; i < FENCING_STAT_NCOUNTERS; i++)
			PutU64(&buf, pg_atomic_read_u64(&entry->counters[i]));
	}
	hash_seq_init(&hash_seq, lhash);
	while ((lentry = hash_seq_search(&hash_seq)) != NULL)
		PutLeaseRecord(&buf, lentry);
	hash_seq_init(&hash_seq, ehash);
	while ((end = hash_seq_search(&hash_seq)) != NULL)
	{
		PutU32(&buf, end->key.dbid);
		PutU64(&buf, end->key.namehash);
		PutU64(&buf, (uint64) end->ended.epoch);
		PutU64(&buf, (uint64) end->ended.counter);
	}

	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf.data, buf.len);
	FIN_CRC32C(crc);
	PutU32(&buf, crc);

	fd = OpenTransientFile(FENCING_STATS_FILE_TMP,
						   O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", FENCING_STATS_FILE_TMP)));
		pfree(buf.data);
		return;
	}
	errno = 0;
	if (write(fd, buf.data, buf.len) != buf.len)
	{
		if (errno == 0)
			errno = ENOSPC;
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", FENCING_STATS_FILE_TMP)));
		goto fail;
	}
	if (pg_fsync(fd) != 0)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not fsync file \"%s\": %m", FENCING_STATS_FILE_TMP)));
		goto fail;
	}
	if (CloseTransientFile(fd) != 0)
	{
		fd = -1;
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", FENCING_STATS_FILE_TMP)));
		goto fail;
	}
	pfree(buf.data);
	(void) durable_rename(FENCING_STATS_FILE_TMP, FENCING_STATS_FILE, LOG);
	return;

fail:
	if (fd >= 0)
		CloseTransientFile(fd);
	pfree(buf.data);
	unlink(FENCING_STATS_FILE_TMP);
}

/* Log why the statistics file is ignored (it is removed after). */
static void
ReportBadStatsFile(const char *detail)
{
	ereport(WARNING,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("ignoring the fencing statistics file \"%s\"", FENCING_STATS_FILE),
			 errdetail_internal("%s", detail),
			 errhint("The counters of fencing.stats, fencing.idempotency_stats and fencing.lease_stats start from zero.")));
}

/*
 * Load FENCING_STATS_FILE into the fresh shared state, then remove it.
 * The whole file is checked (size, header, checksum) before anything is
 * taken from it: it is used entirely or not at all.  Entries that no
 * longer fit (a smaller fencing.stats_max_* than when it was saved) go to
 * the overflow entries, or for grant ends, are left out.
 */
static void
LoadStatsFile(void)
{
	struct stat st;
	char	   *data = NULL;
	int			fd;
	FileReader	r;
	uint32		ntables;
	uint32		ndbs;
	uint32		nends;
	uint64		expected;
	pg_crc32c	crc;
	uint32		saved_crc;
	uint32		u;
	int			i;
	int			nidem = FENCING_IDEM_NCOUNTERS;
	int			ntable = FENCING_STAT_NCOUNTERS;

	if (stat(FENCING_STATS_FILE, &st) != 0)
	{
		if (errno != ENOENT)
			ereport(LOG,
					(errcode_for_file_access(),
					 errmsg("could not stat file \"%s\": %m", FENCING_STATS_FILE)));
		return;
	}

	/* saved at a clean shutdown: after a crash, counters start from zero */
	if (!ShutdownWasClean())
	{
		ereport(LOG,
				(errmsg("discarding the fencing statistics file \"%s\": the server did not shut down cleanly since it was written",
						FENCING_STATS_FILE)));
		goto done;
	}

	if (st.st_size < (off_t) (FILE_FIXED_SIZE_N(FENCING_IDEM_NCOUNTERS_1_0,
												FENCING_STAT_NCOUNTERS_1_0) + sizeof(uint32)) ||
		st.st_size > (off_t) MaxAllocSize)
	{
		ReportBadStatsFile(psprintf("Its size, %lld bytes, is not that of a fencing statistics file.",
									(long long) st.st_size));
		goto done;
	}

	fd = OpenTransientFile(FENCING_STATS_FILE, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		ereport(WARNING,
				(errcode_for_file_access(),
				 errmsg("could not open file \"%s\": %m", FENCING_STATS_FILE)));
		goto done;
	}
	data = palloc(st.st_size);
	errno = 0;
	if (read(fd, data, st.st_size) != st.st_size)
	{
		CloseTransientFile(fd);
		ReportBadStatsFile("It could not be read whole.");
		goto done;
	}
	CloseTransientFile(fd);

	r.p = data;
	r.end = data + st.st_size;
	if (GetU32(&r) != FENCING_STATS_MAGIC)
	{
		ReportBadStatsFile("Its header is not that of a fencing statistics file.");
		goto done;
	}
	u = GetU32(&r);
	if (u == 1)
	{
		nidem = FENCING_IDEM_NCOUNTERS_1_0;
		ntable = FENCING_STAT_NCOUNTERS_1_0;
	}
	else if (u != FENCING_STATS_FORMAT)
	{
		ReportBadStatsFile(psprintf("It is in format %u; this version of fencing reads formats 1 and %u.",
									u, FENCING_STATS_FORMAT));
		goto done;
	}
	ntables = GetU32(&r);
	ndbs = GetU32(&r);
	nends = GetU32(&r);
	expected = (uint64) FILE_FIXED_SIZE_N(nidem, ntable) +
		(uint64) ntables * TABLE_RECORD_SIZE_N(ntable) +
		(uint64) ndbs * LEASE_RECORD_SIZE +
		(uint64) nends * END_RECORD_SIZE + sizeof(uint32);
	if (expected != (uint64) st.st_size)
	{
		ReportBadStatsFile(psprintf("It has %lld bytes where its header announces %llu: it is truncated or damaged.",
									(long long) st.st_size,
									(unsigned long long) expected));
		goto done;
	}
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, st.st_size - sizeof(uint32));
	FIN_CRC32C(crc);
	memcpy(&saved_crc, data + st.st_size - sizeof(uint32), sizeof(uint32));
	if (!EQ_CRC32C(crc, saved_crc))
	{
		ReportBadStatsFile("Its checksum does not match its contents.");
		goto done;
	}

	/* all checked: take the counters */
	for (i = 0; i < nidem; i++)
		pg_atomic_write_u64(&fstate->idem[i], GetU64(&r));
	for (i = 0; i < ntable; i++)
		pg_atomic_write_u64(&fstate->overflow.counters[i], GetU64(&r));
	(void) GetU32(&r);			/* the overflow's dbid */
	AddLeaseRecord(&fstate->lease_overflow, &r);

	for (u = 0; u < ntables; u++)
	{
		FencingStatsKey key;
		FencingTableStats *entry = NULL;
		bool		found;

		key.dbid = GetU32(&r);
		key.relid = GetU32(&r);
		if (hash_get_num_entries(fhash) < fencing_stats_max_tables)
			entry = hash_search(fhash, &key, HASH_ENTER_NULL, &found);
		if (entry == NULL)
			entry = &fstate->overflow;
		else if (!found)
			InitCounters(entry);
		for (i = 0; i < ntable; i++)
			pg_atomic_fetch_add_u64(&entry->counters[i], GetU64(&r));
	}
	for (u = 0; u < ndbs; u++)
	{
		Oid			dbid = GetU32(&r);
		FencingLeaseStats *entry = NULL;
		bool		found;

		if (hash_get_num_entries(lhash) < fencing_stats_max_databases)
			entry = hash_search(lhash, &dbid, HASH_ENTER_NULL, &found);
		if (entry == NULL)
			entry = &fstate->lease_overflow;
		else if (!found)
			InitLeaseStats(entry, dbid);
		AddLeaseRecord(entry, &r);
	}
	for (u = 0; u < nends; u++)
	{
		FencingLeaseEndKey key;
		FencingLeaseEnd *end = NULL;
		Fence		ended;
		bool		found;

		memset(&key, 0, sizeof(key));
		key.dbid = GetU32(&r);
		key.namehash = GetU64(&r);
		ended.epoch = (int64) GetU64(&r);
		ended.counter = (int64) GetU64(&r);
		if (hash_get_num_entries(ehash) < fencing_stats_max_leases)
			end = hash_search(ehash, &key, HASH_ENTER_NULL, &found);
		if (end != NULL && (!found || FenceCmp(&ended, &end->ended) > 0))
			end->ended = ended;
	}
	Assert(r.p == r.end - sizeof(uint32));

	/* some may belong to databases dropped meanwhile: see the head */
	if (ntables > 0 || ndbs > 0 || nends > 0)
		pg_atomic_write_u32(&fstate->sweep_pending, 1);

done:
	if (data != NULL)
		pfree(data);

	/*
	 * Remove the file, good or bad: it describes the server as it stopped,
	 * and must not come back after a crash of this run, nor travel with a
	 * copy of the data directory.  The next clean shutdown writes it anew.
	 */
	if (unlink(FENCING_STATS_FILE) != 0 && errno != ENOENT)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", FENCING_STATS_FILE)));
}
