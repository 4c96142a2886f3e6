/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Leases inside PostgreSQL: the C half.  The lease functions themselves
 *	  (fencing.lease_acquire() and friends, current_epoch(), bump_epoch())
 *	  are PL/pgSQL in sql/fencing--1.0.sql; this file gives them what SQL
 *	  cannot see, the server's timeline and system identifier, and gives
 *	  the guard its check of a table's lease.
 *
 * The epoch of a token is
 *
 *		epoch = (effective timeline << 32) + bumps
 *
 * where the effective timeline is the server's WAL timeline plus an
 * offset kept in fencing.epoch_state (0 unless the database was moved to
 * another cluster, see the SQL script), and bumps counts
 * fencing.bump_epoch().  A promotion or a point-in-time recovery starts a
 * new, higher timeline, so every epoch after it beats every epoch before
 * it, however many bumps and grants the new primary never saw, as long as
 * bumps stay below 2^32.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#if PG_VERSION_NUM >= 150000
#include "access/xlogrecovery.h"
#endif
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "fencing.h"

PG_FUNCTION_INFO_V1(fencing_server_timeline);

/* The saved plan that reads one lease, for the guard */
static SPIPlanPtr lease_plan = NULL;

/*
 * What the guard last read of a lease, reused for the other rows of the
 * same command of the same transaction (a bulk INSERT or COPY reads the
 * lease once).  The expiry is checked against the clock on every row.
 */
static struct
{
	bool		valid;
	LocalTransactionId lxid;
	CommandId	cid;
	char		name[NAMEDATALEN * 2];
	bool		found;			/* the lease has a row */
	bool		granted;		/* ... and a token */
	Fence		token;
	TimestampTz expires_at;
} lease_cache = {false};

/*
 * The timeline this server writes WAL on; on a standby, the timeline it
 * replays.
 */
static TimeLineID
ServerTimeline(void)
{
	TimeLineID	tli;

	if (RecoveryInProgress())
	{
		(void) GetXLogReplayRecPtr(&tli);
		return tli;
	}
#if PG_VERSION_NUM >= 150000
	return GetWALInsertionTimeLine();
#else
	/* set by InitXLOGAccess(), which RecoveryInProgress() has called */
	return ThisTimeLineID;
#endif
}

/*
 * fencing.server_timeline(): the server's timeline and system identifier,
 * the inputs of fencing.current_epoch().
 */
Datum
fencing_server_timeline(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum((int64) ServerTimeline());
	/* the same bits as pg_control_system().system_identifier */
	values[1] = Int64GetDatum((int64) GetSystemIdentifier());
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc),
													  values, nulls)));
}

/* Read lease name from fencing.leases into lease_cache, as the owner. */
static void
ReadLease(const char *name)
{
	FencingSavedUser saved;
	Datum		args[1];
	int			rc;

	lease_cache.valid = false;
	FencingBecomeOwner(&saved);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (lease_plan == NULL)
	{
		Oid			argtypes[1] = {TEXTOID};
		SPIPlanPtr	plan;

		/* a unique-index lookup: no generic plan can be worse */
		plan = SPI_prepare("SELECT token, expires_at FROM fencing.leases "
						   "WHERE name OPERATOR(pg_catalog.=) $1",
						   1, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		lease_plan = plan;
	}

	args[0] = CStringGetTextDatum(name);
	rc = SPI_execute_plan(lease_plan, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.leases: %s", SPI_result_code_string(rc));
	lease_cache.found = SPI_processed > 0;
	lease_cache.granted = false;
	if (lease_cache.found)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		token_null;
		bool		expires_null;
		Datum		token = SPI_getbinval(tup, desc, 1, &token_null);
		Datum		expires = SPI_getbinval(tup, desc, 2, &expires_null);

		if (!token_null && !expires_null)
		{
			lease_cache.granted = true;
			lease_cache.token = *DatumGetFenceP(token);
			lease_cache.expires_at = DatumGetTimestampTz(expires);
		}
	}
	SPI_finish();
	FencingRestoreUser(&saved);

	lease_cache.lxid = CurrentLocalTransactionId();
	lease_cache.cid = GetCurrentCommandId(false);
	strlcpy(lease_cache.name, name, sizeof(lease_cache.name));
	lease_cache.valid = strlen(name) < sizeof(lease_cache.name);
}

/*
 * The guard's check of a table protected with a lease: is token the
 * lease's current token, and the lease live?  The clock is read on every
 * row.
 */
bool
LeaseHeldWith(const char *lease, const Fence *token)
{
	if (!lease_cache.valid ||
		lease_cache.lxid != CurrentLocalTransactionId() ||
		lease_cache.cid != GetCurrentCommandId(false) ||
		strcmp(lease_cache.name, lease) != 0)
		ReadLease(lease);

	return lease_cache.granted &&
		FenceCmp(&lease_cache.token, token) == 0 &&
		lease_cache.expires_at > GetCurrentTimestamp();
}

/*
 * Raise SF001 for a write whose token does not hold the lease, naming the
 * lease's current token and expiry, as LeaseHeldWith() last read them.
 */
void
ReportLeaseLost(const char *lease, const Fence *token, Relation rel)
{
	char	   *token_s = FenceToCString(token);

	if (!lease_cache.granted)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 errmsg("fence token %s does not hold lease \"%s\" of table \"%s\"",
						token_s, lease, RelationGetRelationName(rel)),
				 errdetail("Lease \"%s\" has never been granted.", lease),
				 errhint("Acquire the lease with fencing.lease_acquire() and write with the token it returns."),
				 errtable(rel)));
	else if (FenceCmp(&lease_cache.token, token) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 errmsg("fence token %s does not hold lease \"%s\" of table \"%s\"",
						token_s, lease, RelationGetRelationName(rel)),
				 errdetail("Token %s is newer than the current token of the lease, %s.",
						   token_s, FenceToCString(&lease_cache.token)),
				 errhint("Acquire the lease with fencing.lease_acquire() and write with the token it returns."),
				 errtable(rel)));
	else if (FenceCmp(&lease_cache.token, token) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 errmsg("lease \"%s\" of table \"%s\" expired: fence token %s is no longer valid",
						lease, RelationGetRelationName(rel), token_s),
				 errdetail("Lease \"%s\" with token %s ran out or was released at %s.",
						   lease, token_s, timestamptz_to_str(lease_cache.expires_at)),
				 errhint("The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token."),
				 errtable(rel)));
	else
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 errmsg("lease \"%s\" of table \"%s\" has moved on: fence token %s is no longer valid",
						lease, RelationGetRelationName(rel), token_s),
				 lease_cache.expires_at > GetCurrentTimestamp() ?
				 errdetail("The current token of lease \"%s\" is %s, live until %s.",
						   lease, FenceToCString(&lease_cache.token),
						   timestamptz_to_str(lease_cache.expires_at)) :
				 errdetail("The current token of lease \"%s\" is %s, expired at %s.",
						   lease, FenceToCString(&lease_cache.token),
						   timestamptz_to_str(lease_cache.expires_at)),
				 errhint("The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token."),
				 errtable(rel)));
	pg_unreachable();
}
