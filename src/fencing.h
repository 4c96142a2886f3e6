/*-------------------------------------------------------------------------
 *
 * fencing.h
 *	  The fence token type and the declarations shared by the C files of
 *	  the fencing extension.
 *
 * A fence is a pair (epoch, counter) of non-negative 64-bit integers,
 * ordered lexicographically.  It is 16 bytes, fixed length, passed by
 * reference and double aligned.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_H
#define FENCING_H

#include "postgres.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "utils/rel.h"

#include "compat.h"

typedef struct Fence
{
	int64		epoch;
	int64		counter;
} Fence;

#define DatumGetFenceP(X)		((Fence *) DatumGetPointer(X))
#define FencePGetDatum(X)		PointerGetDatum(X)
#define PG_GETARG_FENCE_P(n)	DatumGetFenceP(PG_GETARG_DATUM(n))
#define PG_RETURN_FENCE_P(x)	return FencePGetDatum(x)

/* The SQLSTATE class SF, see the SPEC */
#define ERRCODE_STALE_FENCE_TOKEN			MAKE_SQLSTATE('S','F','0','0','1')
#define ERRCODE_FENCE_TOKEN_REQUIRED		MAKE_SQLSTATE('S','F','0','0','2')
#define ERRCODE_IDEMPOTENCY_KEY_REUSED		MAKE_SQLSTATE('S','F','0','0','3')
#define ERRCODE_IDEMPOTENCY_KEY_IN_PROGRESS MAKE_SQLSTATE('S','F','0','0','4')
#define ERRCODE_FENCING_GUARD_ALTERED		MAKE_SQLSTATE('S','F','0','0','5')

/* extension.c: the extension's own objects, and running as its owner */
typedef struct FencingSavedUser
{
	Oid			userid;
	int			sec_context;
} FencingSavedUser;

extern Oid	FencingSchemaOid(void);
extern Oid	FencingTypeOid(void);
extern Oid	FencingOwnerOid(void);
extern void FencingBecomeOwner(FencingSavedUser *saved);
extern void FencingBecomeRole(Oid role, FencingSavedUser *saved);
extern void FencingRestoreUser(const FencingSavedUser *saved);
extern bool FencingActsFor(Oid owner);
extern char *FencingQualifiedName(Oid relid);
extern Oid	FencingRelOwner(Oid relid);
extern void FencingRunUtility(const char *sql);
extern int	FencingExecuteLatest(const char *sql, int nargs, Oid *argtypes,
								 Datum *values, const char *nulls,
								 bool read_only, long tcount);

/* fence.c */
extern int	FenceCmp(const Fence *a, const Fence *b);
extern bool FencingParseFence(const char *str, Fence *result, bool *out_of_range);
extern char *FenceToCString(const Fence *f);
extern Fence *FenceCopy(const Fence *f);

/* errors.c */
pg_noreturn extern void FencingReportStaleToken(const Fence *token, const Fence *fence,
										 Relation rel, const char *scope_desc);
pg_noreturn extern void FencingReportStaleTokenHidden(const Fence *token, Relation rel,
											   const char *scope_name);
pg_noreturn extern void FencingReportTokenRequired(Relation rel, const char *what);
pg_noreturn extern void FencingReportConflictingTokens(const Fence *setting,
												const Fence *column,
												Relation rel);

/* guard.c, protect.c, scopes.c, guc.c */
#define FENCING_GUARD_TRIGGER		"zz_fencing_guard"
#define FENCING_TRUNCATE_TRIGGER	"zz_fencing_truncate"

/* guc.c */
extern bool FencingBypass;
extern void FencingGucInit(void);
extern const Fence *FencingTokenSetting(void);

/*
 * protect.c: true while protect()/unprotect() run their own DDL, which the
 * DDL guard (ddl_guard.c) must let through.
 */
extern bool FencingDdlGuardSuspended;
extern void RunWithDdlGuardSuspended(void (*fn) (Oid, void *), Oid relid, void *arg);

/*
 * scopes.c, scope_storage.c: a key or table scope's fences live in a table
 * of their own, created by protect(): the key columns with the types and
 * collations of the protected table's key columns (table scope: one
 * boolean column, always true), a fence column, and a unique index on the
 * key columns, NULLS NOT DISTINCT.  Two rows have the same key exactly
 * when that index says so.  This is what the guard needs of it, cached
 * per protected relation.
 */
typedef struct ScopeStorage
{
	char	   *scope_name;
	Oid			relid;			/* the storage table */
	Oid			indexid;		/* its unique index on the key columns */
	bool		table_scope;	/* one fence: the key is the constant true */
	int			nkeys;			/* key columns of the storage table */
	Oid		   *types;			/* their types and collations */
	Oid		   *collations;
	int16	   *typlen;
	bool	   *typbyval;
	RegProcedure *eqprocs;		/* the equality of the index's opfamily */
	FmgrInfo   *eq;				/* the same, for comparing two keys */
	FmgrInfo   *cmp;			/* btree order, for locking keys in order */
	FmgrInfo   *hash;			/* a hash consistent with eq, when the */
	bool		hashable;		/* type has a hash opclass */
	FmgrInfo   *out;			/* output functions, for people */
} ScopeStorage;

/* guard_config.c: what fencing.protected says of a relation, cached */
typedef struct GuardConfig
{
	Oid			relid;			/* hash key: the relation the trigger fired on */
	bool		valid;			/* false once a relcache invalidation hit it */
	bool		protected;		/* false: relation is not protected */
	Oid			protected_relid;	/* the table named in fencing.protected */
	AttrNumber	fence_attnum;	/* fence column in this relation */
	int			nkeys;			/* -1: row scope, 0: table scope, >0: key */
	AttrNumber *key_attnums;	/* key columns in this relation */
	bool		strict;
	char	   *scope_name;
	ScopeStorage *scope;		/* key or table scope: its storage */
	bool		legacy_scopes;	/* extension objects still at 1.0 */
	FmgrInfo   *key_out;		/* 1.0: output functions of the key columns */
	char	   *lease;			/* fencing.lease_check() must pass, or NULL */
	Oid			table_owner;	/* owner of protected_relid, for the lease */
	struct FencingTableStats *stats;	/* counters of protected_relid, or NULL */
} GuardConfig;

extern GuardConfig *FencingGetGuardConfig(Relation rel);

/* visibility.c: who may read a key value or a fence */
extern bool FencingMayReadGuardedKeys(Relation rel, GuardConfig *cfg);

/* replication.c: the extension's own tables under logical replication */
extern bool FencingIsLocalStateTrigger(const Trigger *t);

/* scopes.c: check and advance a scope's fence, atomically with the write */
extern bool FencingScopeCheckAndAdvance(ScopeStorage *scope, Datum *key, bool *nulls,
								 const Fence *token, bool strict, Fence *lost_to);
extern bool FencingScopeFollow(ScopeStorage *scope, Datum *key, bool *nulls,
						const Fence *fence, Fence *current);
extern void FencingScopeSeed(ScopeStorage *scope, Datum *key, bool *nulls,
					  const Fence *fence);
extern void FencingScopeKeyOf(GuardConfig *cfg, HeapTuple tuple, TupleDesc desc,
					   Datum *key, bool *nulls);
extern int	FencingScopeKeyCompare(ScopeStorage *scope, Datum *a, bool *anulls,
							Datum *b, bool *bnulls);
extern char *FencingScopeKeyToText(ScopeStorage *scope, Datum *key, bool *nulls);
extern void FencingScopesInit(void);

/* scope_storage.c: the scopes' owners and storage tables */
#define FENCING_SCOPE_NAME_MAXLEN	255 /* bytes */
extern bool FencingScopeStorageLayout(void);
extern ScopeStorage *FencingScopeStorageOpen(const char *scope_name, MemoryContext cxt);
extern Oid	FencingScopeStorageRegistered(const char *scope_name);
extern ScopeStorage *FencingScopeStorageOpenRelation(Oid storage, const char *scope_name,
											  bool table_scope, MemoryContext cxt);
extern Oid	FencingScopeStorageFor(const char *scope_name, Relation rel, int nkeys,
							const AttrNumber *key_attnums, const char *const *key_names,
							bool protected_here);
pg_noreturn extern void FencingReportScopeStorageMissing(const char *scope_name, Oid relid);
extern void FencingCheckScopeName(const char *scope_name);
extern void FencingCheckKeyColumnType(Relation rel, AttrNumber attnum, const char *name);
extern void FencingSeedScopesFrom(Oid protected_relid, Oid source_relid);
extern void FencingScopeStorageInvalidateAll(void);

/* scopes_1_0.c: key scopes of a database whose extension is still at 1.0 */
extern char *FencingLegacyScopeKey(GuardConfig *cfg, HeapTuple tuple, TupleDesc desc);
extern bool FencingLegacyScopesStillHere(void);
extern bool FencingLegacyScopeCheckAndAdvance(const char *scope_name, const char *key,
									   const Fence *token, bool strict,
									   Fence *lost_to);

/*
 * protection.c: is relid protected, and through which table?  The table
 * named in fencing.protected (relid itself or its nearest partition or
 * inheritance ancestor), else InvalidOid.  Cached, invalidation-driven.
 */
extern Oid	FencingProtectedBy(Oid relid);
extern bool FencingProtectionColumns(Oid relid, char **fence_column, int *nkeys,
									 char ***key_columns);
extern Oid	FencingProtectedTableOid(void);
extern void FencingProtectionReset(void);

/* ddl_guard.c: what protect() and unprotect() ask of the DDL guard */
extern void FencingCheckProtectable(Relation rel, const char *fence_column,
									int nkeys, Datum *keynames);
extern void FencingGuardTree(Oid relid);
extern void FencingUnguardTree(Oid relid);

/* citus.c: distributed and reference tables, when Citus is installed */
extern void FencingCitusCheckProtect(Relation rel, const char *fence_column,
									 int nkeys, Datum *keynames, bool strict,
									 const char *scope_name, const char *lease);
extern const char *FencingCitusGuardArgs(Oid relid);
extern int	FencingCitusBeginTriggerDdl(Oid relid);
extern void FencingCitusEndTriggerDdl(int level);
extern void FencingCitusShardGuardConfig(Relation rel, GuardConfig *cfg,
										 MemoryContext cxt);
extern bool FencingCitusShardProtection(Oid relid, Oid *shell, char **guard_name,
										char **fence_column, int *nkeys,
										char ***key_columns);
extern void FencingCitusPrepareStorage(Relation rel, Oid storage);
extern bool FencingCitusDistributesStorage(Oid relid);
extern bool FencingCitusSeedScope(const char *scope_name, const char *fence_column,
								  int nkeys, Datum *keynames, Oid source_relid);
extern void FencingCitusCheckLocalStorage(Relation rel, ScopeStorage *scope);
extern bool FencingCitusGuardSettings(Relation rel, const char **fence_column,
									  const char **scope_name, const char **storage);
extern bool FencingCitusCatalogGuardSettings(Oid relid, const char **scope_name,
											 const char **storage);
extern Oid	FencingCitusShardShell(Oid relid);

/* citus_transfer.c: key scope across Citus shard transfers */
extern void FencingCitusTransferInit(void);
extern bool FencingCitusFollowReplay(Relation rel, AttrNumber *fence_attnum);
extern void FencingCitusAwaitTransferDdl(Oid relid);

/* stats.c: counters in shared memory, present only with the preload */
typedef enum FencingTableCounter
{
	FENCING_STAT_ACCEPTED,
	FENCING_STAT_REJECTED_STALE,
	FENCING_STAT_REJECTED_MISSING,
	FENCING_STAT_BYPASSED
} FencingTableCounter;

typedef enum FencingIdemCounter
{
	FENCING_IDEM_STARTED,
	FENCING_IDEM_REPLAYED,
	FENCING_IDEM_RESUMED,
	FENCING_IDEM_REUSED_REJECTED,
	FENCING_IDEM_IN_PROGRESS_REJECTED
} FencingIdemCounter;

/* the counters of fencing.lease_stats, in its column order */
typedef enum FencingLeaseCounter
{
	FENCING_LEASE_ACQUIRED,
	FENCING_LEASE_ACQUIRE_REFUSED,
	FENCING_LEASE_RENEWED,
	FENCING_LEASE_RENEW_FAILED,
	FENCING_LEASE_RELEASED,
	FENCING_LEASE_RELEASE_FAILED,
	FENCING_LEASE_EXPIRED,
	FENCING_LEASE_REJECTED
} FencingLeaseCounter;

/*
 * opaque per-table entry; the guard caches the pointer per relation, in a
 * cache that a relcache invalidation of the table clears
 */
typedef struct FencingTableStats FencingTableStats;

extern void FencingStatsInit(void);
extern FencingTableStats *FencingStatsGetEntry(Oid relid);
extern void FencingStatsCount(FencingTableStats *entry, FencingTableCounter counter);
extern void FencingStatsCountIdem(FencingIdemCounter counter);
extern void FencingStatsCountLease(FencingLeaseCounter counter);
extern bool FencingStatsLeaseEnded(const char *name, int namelen,
								   const Fence *token, TimestampTz granted_at,
								   TimestampTz ended_at, bool expired);

/*
 * Free the counters of a table being dropped or unprotected, when the
 * current transaction commits (call it from the code that drops or
 * unprotects, in the transaction that does it).
 */
extern void FencingStatsForget(Oid relid);

/* idempotency.c */
#define FENCING_IDEM_KEY_MAXLEN		255	/* characters */

/*
 * lease.c: the guard's check of a table protected with a lease.
 * FencingReportLeaseLost() also counts the rejection in fencing.lease_stats.
 */
extern bool FencingLeaseHeldWith(const char *lease, const Fence *token, Oid table_owner);
extern void FencingCheckLeaseForTable(const char *lease, Oid table_owner, Relation rel);
pg_noreturn extern void FencingReportLeaseLost(const char *lease, const Fence *token,
										Relation rel);

#endif							/* FENCING_H */
