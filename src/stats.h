/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  The counters of fencing.stats, fencing.idempotency_stats and
 *	  fencing.lease_stats, in shared memory when the library is preloaded
 *	  (stats.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_STATS_H
#define FENCING_STATS_H

#include "fence.h"

#include "datatype/timestamp.h"

/*
 * the counters of fencing.stats, in its column order: a refusal is counted
 * by its reason, so that a lost lock (stale) is told apart from a token
 * used by a second transaction (already used: a programming error) and
 * from a write whose built-in lease was not live
 */
typedef enum FencingTableCounter
{
	FENCING_STAT_ACCEPTED,
	FENCING_STAT_REJECTED_STALE,
	FENCING_STAT_REJECTED_MISSING,
	FENCING_STAT_BYPASSED,
	FENCING_STAT_REJECTED_ALREADY_USED,
	FENCING_STAT_REJECTED_LEASE
} FencingTableCounter;

typedef enum FencingIdemCounter
{
	FENCING_IDEM_STARTED,
	FENCING_IDEM_REPLAYED,
	FENCING_IDEM_RESUMED,
	FENCING_IDEM_REUSED_REJECTED,
	FENCING_IDEM_IN_PROGRESS_REJECTED,
	FENCING_IDEM_CLAIM_TAKEN_OVER	/* an SF001 of a claim that was lost */
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

#endif							/* FENCING_STATS_H */
