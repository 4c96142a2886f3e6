/*-------------------------------------------------------------------------
 *
 * fence.h
 *	  The fence token type, the extension's SQLSTATEs and its errors: the
 *	  bottom of the extension, used by every other module.
 *
 * A fence is a pair (epoch, counter) of non-negative 64-bit integers,
 * ordered lexicographically.  It is 16 bytes, fixed length, passed by
 * reference and double aligned.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_FENCE_H
#define FENCING_FENCE_H

#include "postgres.h"

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

/* The SQLSTATE class SF: the extension's own errors */
#define ERRCODE_STALE_FENCE_TOKEN			MAKE_SQLSTATE('S','F','0','0','1')
#define ERRCODE_FENCE_TOKEN_REQUIRED		MAKE_SQLSTATE('S','F','0','0','2')
#define ERRCODE_IDEMPOTENCY_KEY_REUSED		MAKE_SQLSTATE('S','F','0','0','3')
#define ERRCODE_IDEMPOTENCY_KEY_IN_PROGRESS MAKE_SQLSTATE('S','F','0','0','4')
#define ERRCODE_FENCING_GUARD_ALTERED		MAKE_SQLSTATE('S','F','0','0','5')

/*
 * Why an SF001 was raised, for programs: the error's constraint name field
 * (PG_DIAG_CONSTRAINT_NAME; psycopg's diag.constraint_name, pgx's
 * ConstraintName, node-postgres' constraint) holds one of these, so that a
 * client tells the four cases apart without reading message text.
 */
#define FENCING_REASON_STALE_TOKEN			"stale_token"	/* a newer token won */
#define FENCING_REASON_TOKEN_ALREADY_USED	"token_already_used"	/* strict: used by another transaction */
#define FENCING_REASON_LEASE_EXPIRED		"lease_expired" /* the lease ran out or was released */
#define FENCING_REASON_CLAIM_TAKEN_OVER		"claim_taken_over"	/* an idempotency claim was lost */

/* fence.c: the type's functions */
extern int	FenceCmp(const Fence *a, const Fence *b);
extern bool FencingParseFence(const char *str, Fence *result, bool *out_of_range);
extern char *FenceToCString(const Fence *f);
extern Fence *FenceCopy(const Fence *f);

/* errors.c: the errors of the SF class, in one voice */
extern int	FencingErrReason(const char *reason);
pg_noreturn extern void FencingReportStaleToken(const Fence *token, const Fence *fence,
										 Relation rel, const char *scope_desc);
pg_noreturn extern void FencingReportStaleTokenHidden(const Fence *token, Relation rel,
											   const char *scope_name);
pg_noreturn extern void FencingReportTokenRequired(Relation rel, const char *what);
pg_noreturn extern void FencingReportScopeStorageMissing(const char *scope_name, Oid relid);
pg_noreturn extern void FencingReportConflictingTokens(const Fence *setting,
												const Fence *column,
												Relation rel);

#endif							/* FENCING_FENCE_H */
