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

#include "fmgr.h"
#include "utils/rel.h"

/*
 * Version compatibility: the few server APIs that changed between the
 * releases fencing supports (13 and later; built and tested on 15).
 */
#if PG_VERSION_NUM >= 160000
#define FencingOwnsRelation(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define FencingOwnsRelation(relid, roleid) pg_class_ownercheck((relid), (roleid))
#endif

#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

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

/* fence.c */
extern int	FenceCmp(const Fence *a, const Fence *b);
extern bool ParseFence(const char *str, Fence *result, bool *out_of_range);
extern char *FenceToCString(const Fence *f);
extern Fence *FenceCopy(const Fence *f);

/* errors.c */
extern void ReportStaleToken(const Fence *token, const Fence *fence,
							 Relation rel, const char *scope_desc) pg_attribute_noreturn();
extern void ReportTokenRequired(Relation rel, const char *what) pg_attribute_noreturn();
extern void ReportConflictingTokens(const Fence *setting, const Fence *column,
									Relation rel) pg_attribute_noreturn();

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
	FmgrInfo   *key_out;		/* their output functions */
	bool		strict;
	char	   *scope_name;
	char	   *lease;			/* fencing.lease_check() must pass, or NULL */
	struct FencingTableStats *stats;	/* counters of protected_relid, or NULL */
} GuardConfig;

extern GuardConfig *GetGuardConfig(Relation rel);
extern void GuardConfigInit(void);

/* scopes.c: the fences of key and table scopes, in fencing.scopes */
extern char *BuildScopeKey(GuardConfig *cfg, HeapTuple tuple, TupleDesc tupdesc);
extern char *ScopeKeyFromValues(int nkeys, Datum *values, bool *nulls, Oid *typids);
extern bool ScopeCheckAndAdvance(const char *scope_name, const char *key,
								 const Fence *token, bool strict, Fence *lost_to);
extern void ScopesInit(void);

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
extern void FencingProtectionInit(void);

/* ddl_guard.c: what protect() and unprotect() ask of the DDL guard */
extern void FencingCheckProtectable(Relation rel, const char *fence_column,
									int nkeys, Datum *keynames);
extern void FencingGuardTree(Oid relid);
extern void FencingUnguardTree(Oid relid);

/*
 * protect.c: advance the key or table scope fences of protected_relid to
 * the highest fence among source_relid's rows of each key (protect(), and
 * ATTACH PARTITION / INHERIT of a filled table).
 */
extern void SeedScopesFrom(Oid protected_relid, Oid source_relid);

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

/* opaque per-table entry; the guard caches the pointer per relation */
typedef struct FencingTableStats FencingTableStats;

extern void FencingStatsInit(void);
extern FencingTableStats *FencingStatsGetEntry(Oid relid);
extern void FencingStatsCount(FencingTableStats *entry, FencingTableCounter counter);
extern void FencingStatsCountIdem(FencingIdemCounter counter);

/* idempotency.c */
#define FENCING_IDEM_KEY_MAXLEN		255	/* characters */

/* lease.c: the guard's check of a table protected with a lease */
extern bool LeaseHeldWith(const char *lease, const Fence *token);
extern void ReportLeaseLost(const char *lease, const Fence *token,
							Relation rel) pg_attribute_noreturn();

#endif							/* FENCING_H */
