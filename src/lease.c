/*-------------------------------------------------------------------------
 *
 * lease.c
 *	  Leases inside PostgreSQL: fencing.lease_acquire(), lease_renew(),
 *	  lease_next(), lease_release() and lease_check() over the table
 *	  fencing.leases,
 *	  the server's timeline for fencing.current_epoch(), and the guard's
 *	  check of a table protected with a lease.
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
 * bumps stay below 2^32.  (current_epoch() and bump_epoch() are SQL; the
 * epoch of a grant comes from fencing.epoch_internal().)
 *
 * Owners.  A lease name belongs to the role that first acquired it (the
 * owner column of fencing.leases; leases of 1.0 were given to the
 * extension's owner by the update).  Only that role, its members and
 * superusers may acquire, renew, release or check it: anybody else gets
 * 42501 before anything about the lease is looked at, so the answers of
 * these functions cannot be used to guess its token either.  The
 * functions are not SECURITY DEFINER: they read the caller's identity
 * with GetUserId(), and switch to the extension's owner only around their
 * own, fully qualified statements (FencingBecomeOwner, as idempotency.c
 * does), since fencing.leases is readable by its owner alone.
 *
 * Serialisation.  acquire locks the lease's row (SELECT ... FOR UPDATE,
 * which under READ COMMITTED waits for a concurrent writer and returns
 * the newest version, as 1.0's INSERT ... ON CONFLICT DO UPDATE did),
 * decides in C on that version and writes it; a new name is inserted
 * with ON CONFLICT DO NOTHING, and a concurrent insert of the same name
 * sends the loser round again to find and lock the winner's row.  renew
 * and release are decided by their UPDATE's WHERE clause on the newest
 * version, so that a failing call (a paused holder's late renew) locks
 * nothing.  check only reads.
 *
 * Every owner check judges the row version that its call changes: acquire
 * checks the version it has locked, renew and release check in the WHERE
 * clause of their UPDATE (a second look after an UPDATE that changed
 * nothing only picks between 42501 and false), check judges the version
 * it read.  A first token is predictable, (current epoch, 1): a renew or
 * release of another role's name that read no row, or the row of its
 * former owner, before that role's acquire or a handover committed must
 * not change the row it finds afterwards.
 *
 * Statistics (fencing.lease_stats, stats.c).  Every call counts its
 * outcome; the end of a grant (released, replaced by its own holder's
 * next acquire, or run out) is counted once, with its hold time, by the
 * first call on the name that notices it: the release itself, or for an
 * expiry the next acquire, renew, release or check, including the guard's
 * check of a write (which counts its rejection as well).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "catalog/pg_type.h"
#include "catalog/namespace.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "extension.h"
#include "fence.h"
#include "lease.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(fencing_server_timeline);
PG_FUNCTION_INFO_V1(fencing_lease_acquire);
PG_FUNCTION_INFO_V1(fencing_lease_renew);
PG_FUNCTION_INFO_V1(fencing_lease_release);
PG_FUNCTION_INFO_V1(fencing_lease_check);
PG_FUNCTION_INFO_V1(fencing_lease_next);

/* The saved plan that reads one lease, for the guard */
static SPIPlanPtr lease_plan = NULL;

static void ReportForeignLease(const char *lease, Relation rel);

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
	Oid			owner;			/* the lease's owner (InvalidOid: 1.0) */
	Oid			table_owner;	/* the protected table's owner, and */
	bool		foreign;		/* ... it does not act for the lease's */
} lease_cache = {false};
static bool lease_plan_has_owner = false;

/* The statements of the lease functions, prepared once per backend */
typedef enum LeaseQuery
{
	LQ_EPOCH,
	LQ_LOCK,
	LQ_READ,
	LQ_INSERT,
	LQ_GRANT,
	LQ_SET_EXPIRY,
	LQ_NEXT,
	LQ_NUM_QUERIES
} LeaseQuery;

typedef struct LeaseQueryDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[9];
} LeaseQueryDef;

#define LEASE_ROW_COLUMNS \
	"SELECT owner, holder, token, granted_at, expires_at" \
	" FROM fencing.leases WHERE name OPERATOR(pg_catalog.=) $1"

static const LeaseQueryDef LeaseQueries[LQ_NUM_QUERIES] = {
	/* LQ_EPOCH: the epoch of a grant, recorded in fencing.epoch_state */
	{"SELECT fencing.epoch_internal(true, false)", 0, {InvalidOid}},
	/* LQ_LOCK: $1 name; the newest version, locked */
	{LEASE_ROW_COLUMNS " FOR UPDATE", 1, {TEXTOID}},
	/* LQ_READ: $1 name */
	{LEASE_ROW_COLUMNS, 1, {TEXTOID}},

	/*
	 * LQ_INSERT: $1 name, $2 holder, $3 epoch, $4 now, $5 expires_at, $6
	 * owner; nothing when another transaction inserted the name first
	 */
	{
		"INSERT INTO fencing.leases AS l"
		" (name, holder, token, granted_at, expires_at, owner)"
		" VALUES ($1, $2, fencing.fence($3, 1), $4, $5, $6::pg_catalog.regrole)"
		" ON CONFLICT (name) DO NOTHING"
		" RETURNING l.token",
		6, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, OIDOID}
	},

	/*
	 * LQ_GRANT: $1 name, $2 holder, $3 epoch, $4 now, $5 expires_at; the
	 * row is locked.  The token beats every earlier grant of the name:
	 * counter 1 of a newer epoch, else the next counter (22003 at the end
	 * of the counters, from fencing.next()).
	 */
	{
		"UPDATE fencing.leases AS l"
		" SET holder = $2,"
		"  token = CASE WHEN l.token IS NULL"
		"   OR fencing.epoch(l.token) OPERATOR(pg_catalog.<) $3"
		"   THEN fencing.fence($3, 1) ELSE fencing.next(l.token) END,"
		"  granted_at = $4, expires_at = $5"
		" WHERE l.name OPERATOR(pg_catalog.=) $1"
		" RETURNING l.token",
		5, {TEXTOID, TEXTOID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	/*
	 * LQ_SET_EXPIRY: $1 name, $2 $3 token, $4 now, $5 new expires_at
	 * (renew, release), $6 the caller, $7 the extension's owner (the owner
	 * of a row without one).  Decided by the UPDATE itself, on the newest
	 * version of the row, as in 1.0: a renew or release that fails locks
	 * nothing, so a paused holder's late call never holds up the next
	 * acquirer.  The owner check is part of the same WHERE clause, so it
	 * judges the very version the UPDATE changes: a row inserted, or
	 * handed to another role, after an earlier look is never changed by a
	 * role that does not act for its owner.
	 */
	{
		"UPDATE fencing.leases SET expires_at = $5"
		" WHERE name OPERATOR(pg_catalog.=) $1"
		"   AND token OPERATOR(fencing.=) fencing.fence($2, $3)"
		"   AND expires_at OPERATOR(pg_catalog.>) $4"
		"   AND pg_catalog.pg_has_role($6,"
		"        COALESCE(owner::pg_catalog.oid, $7), 'MEMBER')"
		" RETURNING granted_at",
		7, {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, OIDOID, OIDOID}
	},

	/*
	 * LQ_NEXT: $1 name, $2 $3 token, $4 now, $5 new expires_at when $9, $6
	 * the caller, $7 the extension's owner, $8 the epoch.  The next token
	 * of the same grant (its holder and start unchanged), decided as
	 * LQ_SET_EXPIRY decides, on the newest version of the row; the token
	 * beats every earlier one as a grant's does.
	 */
	{
		"UPDATE fencing.leases AS l"
		" SET token = CASE WHEN fencing.epoch(l.token) OPERATOR(pg_catalog.<) $8"
		"   THEN fencing.fence($8, 1) ELSE fencing.next(l.token) END,"
		"  expires_at = CASE WHEN $9 THEN $5 ELSE l.expires_at END"
		" WHERE l.name OPERATOR(pg_catalog.=) $1"
		"   AND l.token OPERATOR(fencing.=) fencing.fence($2, $3)"
		"   AND l.expires_at OPERATOR(pg_catalog.>) $4"
		"   AND pg_catalog.pg_has_role($6,"
		"        COALESCE(l.owner::pg_catalog.oid, $7), 'MEMBER')"
		" RETURNING l.token",
		9, {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, OIDOID, OIDOID,
		INT8OID, BOOLOID}
	},
};

static SPIPlanPtr LeasePlans[LQ_NUM_QUERIES];

/* What a lease function read of a lease's row */
typedef struct LeaseRow
{
	bool		found;			/* the name has a row */
	Oid			owner;			/* InvalidOid: none recorded */
	bool		same_holder;	/* holder is the caller's holder */
	bool		granted;		/* token and expires_at are set */
	Fence		token;
	TimestampTz granted_at;		/* 0 when NULL */
	TimestampTz expires_at;
} LeaseRow;

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
	return GetWALInsertionTimeLine();
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

/* Does fencing.leases have its 1.1 owner column? */
static bool
LeasesHaveOwner(void)
{
	Oid			relid = get_relname_relid("leases", FencingSchemaOid());

	return OidIsValid(relid) && get_attnum(relid, "owner") != InvalidAttrNumber;
}

/*
 * Read lease name from fencing.leases into lease_cache, as the extension
 * owner, for a table owned by table_owner.
 */
static void
ReadLease(const char *name, Oid table_owner)
{
	FencingSavedUser saved;
	Datum		args[1];
	bool		has_owner = LeasesHaveOwner();
	int			rc;

	lease_cache.valid = false;
	FencingBecomeOwner(&saved);
	FencingSpiConnect();
	if (lease_plan == NULL || lease_plan_has_owner != has_owner)
	{
		Oid			argtypes[1] = {TEXTOID};
		SPIPlanPtr	plan;

		if (lease_plan != NULL)
			SPI_freeplan(lease_plan);
		lease_plan = NULL;
		/* a unique-index lookup: no generic plan can be worse */
		plan = SPI_prepare(has_owner ?
						   "SELECT token, expires_at, owner::pg_catalog.oid FROM fencing.leases "
						   "WHERE name OPERATOR(pg_catalog.=) $1" :
						   "SELECT token, expires_at FROM fencing.leases "
						   "WHERE name OPERATOR(pg_catalog.=) $1",
						   1, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		lease_plan = plan;
		lease_plan_has_owner = has_owner;
	}

	args[0] = CStringGetTextDatum(name);
	rc = SPI_execute_plan(lease_plan, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.leases: %s", SPI_result_code_string(rc));
	lease_cache.found = SPI_processed > 0;
	lease_cache.granted = false;
	lease_cache.owner = InvalidOid;
	if (lease_cache.found)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		token_null;
		bool		expires_null;
		bool		owner_null = true;
		Datum		token = SPI_getbinval(tup, desc, 1, &token_null);
		Datum		expires = SPI_getbinval(tup, desc, 2, &expires_null);

		if (has_owner)
		{
			Datum		owner = SPI_getbinval(tup, desc, 3, &owner_null);

			if (!owner_null)
				lease_cache.owner = DatumGetObjectId(owner);
		}
		if (!token_null && !expires_null)
		{
			lease_cache.granted = true;
			lease_cache.token = *DatumGetFenceP(token);
			lease_cache.expires_at = DatumGetTimestampTz(expires);
		}
	}
	SPI_finish();
	FencingRestoreUser(&saved);

	/*
	 * A table follows only the leases of roles its owner acts for: else its
	 * owner could protect it with another role's lease name and learn from
	 * its writes, accepted or not, which token is that lease's current one.
	 */
	lease_cache.table_owner = table_owner;
	lease_cache.foreign = OidIsValid(lease_cache.owner) &&
		!is_member_of_role(table_owner, lease_cache.owner);

	lease_cache.lxid = CurrentLocalTransactionId();
	lease_cache.cid = GetCurrentCommandId(false);
	strlcpy(lease_cache.name, name, sizeof(lease_cache.name));
	lease_cache.valid = strlen(name) < sizeof(lease_cache.name);
}

/*
 * The guard's check of a table protected with a lease: is token the
 * lease's current token, and the lease live, and does the table's owner
 * act for the lease's owner?  The clock is read on every row.
 */
bool
FencingLeaseHeldWith(const char *lease, const Fence *token, Oid table_owner)
{
	if (!lease_cache.valid ||
		lease_cache.lxid != CurrentLocalTransactionId() ||
		lease_cache.cid != GetCurrentCommandId(false) ||
		lease_cache.table_owner != table_owner ||
		strcmp(lease_cache.name, lease) != 0)
		ReadLease(lease, table_owner);

	return !lease_cache.foreign && lease_cache.granted &&
		FenceCmp(&lease_cache.token, token) == 0 &&
		lease_cache.expires_at > GetCurrentTimestamp();
}

/*
 * protect(..., lease => name): a table may follow only a lease of a role
 * its owner acts for (42501).  A lease not acquired yet is checked when
 * the guard first reads it.
 */
void
FencingCheckLeaseForTable(const char *lease, Oid table_owner, Relation rel)
{
	ReadLease(lease, table_owner);
	lease_cache.valid = false;	/* read again by the guard, in its command */
	if (lease_cache.foreign)
		ReportForeignLease(lease, rel);
}

/*
 * What FencingReportLeaseLost() needs beyond lease_cache: when the current grant
 * began, and whether the caller may see the lease's token (its owner, a
 * member, a superuser; always in a 1.0 database, whose fencing.leases has
 * no owner and is readable by everyone).  The error path only.
 */
static void
ReadLeaseForReport(const char *name, TimestampTz *granted_at,
				   bool *show_token)
{
	Oid			relid = get_relname_relid("leases", FencingSchemaOid());
	bool		has_owner = OidIsValid(relid) &&
		get_attnum(relid, "owner") != InvalidAttrNumber;
	FencingSavedUser saved;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	Oid			owner = InvalidOid;
	int			rc;

	*granted_at = 0;
	*show_token = !has_owner;
	if (!OidIsValid(relid))
		return;

	args[0] = CStringGetTextDatum(name);
	FencingSpiConnect();
	FencingBecomeOwner(&saved);
	rc = SPI_execute_with_args(has_owner ?
							   "SELECT granted_at, owner FROM fencing.leases "
							   "WHERE name OPERATOR(pg_catalog.=) $1" :
							   "SELECT granted_at FROM fencing.leases "
							   "WHERE name OPERATOR(pg_catalog.=) $1",
							   1, argtypes, args, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.leases: %s", SPI_result_code_string(rc));
	if (SPI_processed > 0)
	{
		bool		isnull;
		Datum		d;

		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (!isnull)
			*granted_at = DatumGetTimestampTz(d);
		if (has_owner)
		{
			d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
			if (!isnull)
				owner = DatumGetObjectId(d);
		}
	}
	FencingRestoreUser(&saved);
	SPI_finish();

	if (has_owner)
		*show_token = OidIsValid(owner) ? FencingActsFor(owner) :
			FencingActsFor(FencingOwnerOid());
}

/*
 * Raise 42501: rel's owner does not act for the owner of the lease that
 * rel is protected with.  Says nothing of the lease's token or state.
 */
static void
ReportForeignLease(const char *lease, Relation rel)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for lease \"%s\" of table \"%s\"",
					lease, RelationGetRelationName(rel)),
			 errdetail("The lease belongs to role \"%s\", which the owner of the table, role \"%s\", is not a member of.",
					   GetUserNameFromId(lease_cache.owner, true) ?
					   GetUserNameFromId(lease_cache.owner, true) : "?",
					   GetUserNameFromId(lease_cache.table_owner, true) ?
					   GetUserNameFromId(lease_cache.table_owner, true) : "?"),
			 errhint("Protect the table with a lease of its owner's, or grant the lease's owner role to the table's owner."),
			 errtable(rel)));
}

/*
 * Raise SF001 for a write whose token does not hold the lease, naming the
 * lease's current token (to roles that may see it) and expiry, as
 * FencingLeaseHeldWith() last read them.  Counts the rejection, and the end of
 * the current grant when this is the first call to notice it ran out.
 */
void
FencingReportLeaseLost(const char *lease, const Fence *token, Relation rel)
{
	char	   *token_s = FenceToCString(token);
	TimestampTz granted_at = 0;
	bool		show_token = false;
	bool		live;

	FencingStatsCountLease(FENCING_LEASE_REJECTED);
	if (lease_cache.foreign)
		ReportForeignLease(lease, rel);
	if (lease_cache.granted)
	{
		ReadLeaseForReport(lease, &granted_at, &show_token);
		live = lease_cache.expires_at > GetCurrentTimestamp();
		if (!live)
			(void) FencingStatsLeaseEnded(lease, strlen(lease),
										  &lease_cache.token, granted_at,
										  lease_cache.expires_at, true);
	}
	else
		live = false;

	if (!lease_cache.granted)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(FENCING_REASON_LEASE_EXPIRED),
				 errmsg("fence token %s does not hold lease \"%s\" of table \"%s\"",
						token_s, lease, RelationGetRelationName(rel)),
				 errdetail("Lease \"%s\" has never been granted.", lease),
				 errhint("Acquire the lease with fencing.lease_acquire() and write with the token it returns."),
				 errtable(rel)));
	else if (FenceCmp(&lease_cache.token, token) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(FENCING_REASON_LEASE_EXPIRED),
				 errmsg("fence token %s does not hold lease \"%s\" of table \"%s\"",
						token_s, lease, RelationGetRelationName(rel)),
				 show_token ?
				 errdetail("Token %s is newer than the current token of the lease, %s.",
						   token_s, FenceToCString(&lease_cache.token)) :
				 errdetail("Token %s is newer than the current token of the lease.",
						   token_s),
				 errhint("Acquire the lease with fencing.lease_acquire() and write with the token it returns."),
				 errtable(rel)));
	else if (FenceCmp(&lease_cache.token, token) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(FENCING_REASON_LEASE_EXPIRED),
				 errmsg("lease \"%s\" of table \"%s\" expired: fence token %s is no longer valid",
						lease, RelationGetRelationName(rel), token_s),
				 errdetail("Lease \"%s\" with token %s ran out or was released at %s.",
						   lease, token_s, timestamptz_to_str(lease_cache.expires_at)),
				 errhint("The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token."),
				 errtable(rel)));
	else if (show_token)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(FENCING_REASON_STALE_TOKEN),
				 errmsg("lease \"%s\" of table \"%s\" has moved on: fence token %s is no longer valid",
						lease, RelationGetRelationName(rel), token_s),
				 live ?
				 errdetail("The current token of lease \"%s\" is %s, live until %s.",
						   lease, FenceToCString(&lease_cache.token),
						   timestamptz_to_str(lease_cache.expires_at)) :
				 errdetail("The current token of lease \"%s\" is %s, expired at %s.",
						   lease, FenceToCString(&lease_cache.token),
						   timestamptz_to_str(lease_cache.expires_at)),
				 errhint("The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token."),
				 errtable(rel)));
	else
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(FENCING_REASON_STALE_TOKEN),
				 errmsg("lease \"%s\" of table \"%s\" has moved on: fence token %s is no longer valid",
						lease, RelationGetRelationName(rel), token_s),
				 live ?
				 errdetail("Lease \"%s\" is held with a newer token, live until %s.",
						   lease, timestamptz_to_str(lease_cache.expires_at)) :
				 errdetail("Lease \"%s\" was last granted with a newer token, which expired at %s.",
						   lease, timestamptz_to_str(lease_cache.expires_at)),
				 errhint("The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token."),
				 errtable(rel)));
	pg_unreachable();
}

/* ----------------------------------------------------------------------
 * fencing.lease_acquire(), lease_renew(), lease_release(), lease_check()
 * ----------------------------------------------------------------------
 */

/* The prepared plan of a statement, prepared on first use. */
static SPIPlanPtr
LeasePlan(LeaseQuery q)
{
	if (LeasePlans[q] == NULL)
	{
		const LeaseQueryDef *def = &LeaseQueries[q];
		SPIPlanPtr	plan;

		plan = SPI_prepare(def->sql, def->nargs, (Oid *) def->argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 def->sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		LeasePlans[q] = plan;
	}
	return LeasePlans[q];
}

/* Run a prepared statement (a new snapshot under READ COMMITTED). */
static void
LeaseExecute(LeaseQuery q, Datum *values, int expected)
{
	int			rc;

	rc = SPI_execute_plan(LeasePlan(q), values, NULL, false, 0);
	if (rc != expected)
		elog(ERROR, "unexpected SPI result %s for \"%s\"",
			 SPI_result_code_string(rc), LeaseQueries[q].sql);
}

/* Raise 22004 for a NULL name, 22023 for an empty one (as 1.0 did). */
static text *
LeaseNameArg(FunctionCallInfo fcinfo, int argno)
{
	text	   *name;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease name must not be null")));
	name = PG_GETARG_TEXT_PP(argno);
	if (VARSIZE_ANY_EXHDR(name) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease name must not be empty")));
	return name;
}

/* now + ttl: 22004 for a NULL ttl, 22023 when it does not lie ahead. */
static TimestampTz
LeaseExpiry(FunctionCallInfo fcinfo, int argno, TimestampTz now)
{
	Interval   *ttl;
	TimestampTz expires;

	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease ttl must not be null")));
	ttl = PG_GETARG_INTERVAL_P(argno);
	expires = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
													  TimestampTzGetDatum(now),
													  IntervalPGetDatum(ttl)));
	if (expires <= now)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease ttl must be positive"),
				 errdetail("The ttl is \"%s\".",
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(ttl))))));
	return expires;
}

/*
 * Connect to SPI and run as the extension's owner until LeaseFinish();
 * caller keeps the caller's identity.  An error in between needs no
 * cleanup: (sub)transaction abort restores the user and security context.
 */
static void
LeaseConnect(FencingSavedUser *caller)
{
	FencingSpiConnect();
	FencingBecomeOwner(caller);
}

/* Back to the caller, and out of SPI. */
static void
LeaseFinish(FencingSavedUser *caller)
{
	FencingRestoreUser(caller);
	SPI_finish();
}

/*
 * Read the lease's row (locked with LQ_LOCK) into row; holder, when not
 * NULL, is compared with the row's holder.
 */
static void
ReadLeaseRow(LeaseQuery q, text *name, text *holder, LeaseRow *row)
{
	Datum		args[1];
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	bool		token_null;
	bool		expires_null;
	Datum		d;

	memset(row, 0, sizeof(LeaseRow));
	args[0] = PointerGetDatum(name);
	LeaseExecute(q, args, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return;

	row->found = true;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	d = SPI_getbinval(tup, desc, 1, &isnull);
	row->owner = isnull ? InvalidOid : DatumGetObjectId(d);
	d = SPI_getbinval(tup, desc, 2, &isnull);
	if (!isnull && holder != NULL)
	{
		text	   *h = DatumGetTextPP(d);

		row->same_holder = VARSIZE_ANY_EXHDR(h) == VARSIZE_ANY_EXHDR(holder) &&
			memcmp(VARDATA_ANY(h), VARDATA_ANY(holder), VARSIZE_ANY_EXHDR(h)) == 0;
	}
	d = SPI_getbinval(tup, desc, 3, &token_null);
	if (!token_null)
		row->token = *DatumGetFenceP(d);
	d = SPI_getbinval(tup, desc, 4, &isnull);
	row->granted_at = isnull ? 0 : DatumGetTimestampTz(d);
	d = SPI_getbinval(tup, desc, 5, &expires_null);
	if (!expires_null)
		row->expires_at = DatumGetTimestampTz(d);
	row->granted = !token_null && !expires_null;
}

/*
 * 42501 unless the caller may act for the lease's owner.  Checked as the
 * caller (FencingActsFor reads the current user), between statements run
 * as the extension's owner.  A row without an owner (only the extension's
 * owner could have written one) belongs to the extension's owner.
 */
static void
CheckLeaseOwner(text *name, const LeaseRow *row, const FencingSavedUser *caller)
{
	FencingSavedUser as_caller;
	Oid			owner = row->owner;
	bool		allowed;

	FencingRestoreUser(caller);
	if (!OidIsValid(owner))
		owner = FencingOwnerOid();
	allowed = FencingActsFor(owner);
	if (!allowed)
	{
		char	   *role = GetUserNameFromId(owner, true);
		char	   *name_s = text_to_cstring(name);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for lease \"%s\"", name_s),
				 role ?
				 errdetail("Lease \"%s\" belongs to role \"%s\".", name_s, role) :
				 errdetail("Lease \"%s\" belongs to a role that was dropped (OID %u).",
						   name_s, owner),
				 errhint("Only the lease's owner role and its members may acquire, renew, release or check it; the extension's owner can hand it to another role by setting its owner in fencing.leases.")));
	}
	/* back to the extension's owner, as LeaseConnect() left it */
	FencingBecomeOwner(&as_caller);
	Assert(as_caller.userid == caller->userid);
}

/*
 * Count the end of the row's grant if it ran out before now and no call
 * counted it yet.
 */
static void
NoticeExpiry(text *name, const LeaseRow *row, TimestampTz now)
{
	if (row->found && row->granted && row->expires_at <= now)
		(void) FencingStatsLeaseEnded(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name),
									  &row->token, row->granted_at,
									  row->expires_at, true);
}

/*
 * Set the expiry of the lease to expires if token holds it, live at now,
 * and the caller acts for its owner; *granted_at (when not NULL) gets the
 * grant's start.  The decision, owner check included, is the UPDATE's, on
 * the newest row version.  When nothing was changed, a second look picks
 * the answer: 42501 when the row belongs to a role the caller does not
 * act for, else false (with the expiry the look noticed counted).
 */
static bool
SetExpiry(text *name, const Fence *token, TimestampTz now,
		  TimestampTz expires, TimestampTz *granted_at,
		  const FencingSavedUser *caller)
{
	Datum		args[7];
	bool		isnull;
	Datum		d;
	LeaseRow	row;

	if (token != NULL)
	{
		args[0] = PointerGetDatum(name);
		args[1] = Int64GetDatum(token->epoch);
		args[2] = Int64GetDatum(token->counter);
		args[3] = TimestampTzGetDatum(now);
		args[4] = TimestampTzGetDatum(expires);
		args[5] = ObjectIdGetDatum(caller->userid);
		args[6] = ObjectIdGetDatum(FencingOwnerOid());
		LeaseExecute(LQ_SET_EXPIRY, args, SPI_OK_UPDATE_RETURNING);
		if (SPI_processed > 0)
		{
			if (granted_at != NULL)
			{
				d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								  1, &isnull);
				*granted_at = isnull ? 0 : DatumGetTimestampTz(d);
			}
			return true;
		}
	}

	/* nothing changed: whose is it, and did it run out? */
	ReadLeaseRow(LQ_READ, name, NULL, &row);
	if (row.found)
		CheckLeaseOwner(name, &row, caller);
	NoticeExpiry(name, &row, now);
	return false;
}

/*
 * fencing.lease_acquire(name, holder, ttl) → fence
 *
 * Grant the lease for ttl and return its new token; NULL while another
 * holder's lease is live (the same holder gets a new token).
 */
Datum
fencing_lease_acquire(PG_FUNCTION_ARGS)
{
	text	   *name = LeaseNameArg(fcinfo, 0);
	text	   *holder;
	TimestampTz now;
	TimestampTz expires;
	FencingSavedUser caller;
	Oid			caller_id;
	Datum		epoch;
	bool		isnull;
	Fence	   *result = NULL;
	int			attempt;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease holder must not be null")));
	holder = PG_GETARG_TEXT_PP(1);
	if (VARSIZE_ANY_EXHDR(holder) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("lease holder must not be empty")));
	now = GetCurrentTimestamp();
	expires = LeaseExpiry(fcinfo, 2, now);
	caller_id = GetUserId();

	LeaseConnect(&caller);
	LeaseExecute(LQ_EPOCH, NULL, SPI_OK_SELECT);
	epoch = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		elog(ERROR, "fencing.epoch_internal() returned NULL");

	/*
	 * Normally one round: the row is there, or the insert makes it.  An
	 * insert that loses to a concurrent one goes round to lock the
	 * winner's row.
	 */
	for (attempt = 0;; attempt++)
	{
		LeaseRow	row;
		Datum		args[6];
		bool		live;
		Datum		token;

		if (attempt >= 10)
			elog(ERROR, "lease \"%s\" keeps disappearing", text_to_cstring(name));

		ReadLeaseRow(LQ_LOCK, name, holder, &row);
		args[0] = PointerGetDatum(name);
		args[1] = PointerGetDatum(holder);
		args[2] = epoch;
		args[3] = TimestampTzGetDatum(now);
		args[4] = TimestampTzGetDatum(expires);
		if (!row.found)
		{
			args[5] = ObjectIdGetDatum(caller_id);
			LeaseExecute(LQ_INSERT, args, SPI_OK_INSERT_RETURNING);
			if (SPI_processed == 0)
				continue;		/* inserted by another meanwhile */
		}
		else
		{
			CheckLeaseOwner(name, &row, &caller);
			live = row.granted && row.expires_at > now;
			if (live && !row.same_holder)
				break;			/* another holder's lease is live */
			if (row.granted)
				(void) FencingStatsLeaseEnded(VARDATA_ANY(name),
											  VARSIZE_ANY_EXHDR(name),
											  &row.token, row.granted_at,
											  live ? now : row.expires_at,
											  !live);
			LeaseExecute(LQ_GRANT, args, SPI_OK_UPDATE_RETURNING);
		}
		token = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
							  &isnull);
		/* in the caller's memory: SPI_finish() frees SPI's */
		result = (Fence *) SPI_palloc(sizeof(Fence));
		memcpy(result, DatumGetFenceP(token), sizeof(Fence));
		break;
	}
	LeaseFinish(&caller);

	if (result == NULL)
	{
		FencingStatsCountLease(FENCING_LEASE_ACQUIRE_REFUSED);
		PG_RETURN_NULL();
	}
	FencingStatsCountLease(FENCING_LEASE_ACQUIRED);
	PG_RETURN_FENCE_P(result);
}

/*
 * fencing.lease_renew(name, token, ttl) → boolean
 *
 * Extend a live lease held with token to now + ttl; false once it
 * expired, was released or was taken over.
 */
Datum
fencing_lease_renew(PG_FUNCTION_ARGS)
{
	text	   *name = LeaseNameArg(fcinfo, 0);
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz expires = LeaseExpiry(fcinfo, 2, now);
	Fence	   *token = PG_ARGISNULL(1) ? NULL : PG_GETARG_FENCE_P(1);
	FencingSavedUser caller;
	bool		ok;

	LeaseConnect(&caller);
	ok = SetExpiry(name, token, now, expires, NULL, &caller);
	LeaseFinish(&caller);

	FencingStatsCountLease(ok ? FENCING_LEASE_RENEWED : FENCING_LEASE_RENEW_FAILED);
	PG_RETURN_BOOL(ok);
}

/*
 * fencing.lease_release(name, token) → boolean
 *
 * Give up a live lease held with token, so that the next lease_acquire
 * succeeds at once; false when token does not hold it.  The row and its
 * token stay: the next grant must beat the token.
 */
Datum
fencing_lease_release(PG_FUNCTION_ARGS)
{
	text	   *name = LeaseNameArg(fcinfo, 0);
	TimestampTz now = GetCurrentTimestamp();
	Fence	   *token = PG_ARGISNULL(1) ? NULL : PG_GETARG_FENCE_P(1);
	FencingSavedUser caller;
	TimestampTz granted_at = 0;
	bool		ok;

	LeaseConnect(&caller);
	ok = SetExpiry(name, token, now, now, &granted_at, &caller);
	if (ok)
		(void) FencingStatsLeaseEnded(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name),
									  token, granted_at, now, false);
	LeaseFinish(&caller);

	FencingStatsCountLease(ok ? FENCING_LEASE_RELEASED : FENCING_LEASE_RELEASE_FAILED);
	PG_RETURN_BOOL(ok);
}

/*
 * fencing.lease_check(name, token) → boolean
 *
 * True while token is the lease's current token and the lease is live.
 */
Datum
fencing_lease_check(PG_FUNCTION_ARGS)
{
	text	   *name = LeaseNameArg(fcinfo, 0);
	Fence	   *token = PG_ARGISNULL(1) ? NULL : PG_GETARG_FENCE_P(1);
	TimestampTz now;
	FencingSavedUser caller;
	LeaseRow	row;
	bool		ok;

	LeaseConnect(&caller);
	ReadLeaseRow(LQ_READ, name, NULL, &row);
	if (row.found)
		CheckLeaseOwner(name, &row, &caller);
	now = GetCurrentTimestamp();
	ok = token != NULL && row.found && row.granted &&
		FenceCmp(&row.token, token) == 0 && row.expires_at > now;
	if (!ok)
		NoticeExpiry(name, &row, now);
	LeaseFinish(&caller);

	PG_RETURN_BOOL(ok);
}

/*
 * fencing.lease_next(name, token, ttl) → fence
 *
 * A new token of the live lease held with token, greater than every token
 * granted for the name, and the lease renewed to now + ttl when ttl is
 * given; NULL once the lease expired, was released or was taken over.  A
 * holder that writes many transactions under one lease takes one per
 * transaction: a strict table accepts each once.
 */
Datum
fencing_lease_next(PG_FUNCTION_ARGS)
{
	text	   *name = LeaseNameArg(fcinfo, 0);
	TimestampTz now = GetCurrentTimestamp();
	bool		renew = !PG_ARGISNULL(2);
	TimestampTz expires = renew ? LeaseExpiry(fcinfo, 2, now) : now;
	Fence	   *token = PG_ARGISNULL(1) ? NULL : PG_GETARG_FENCE_P(1);
	FencingSavedUser caller;
	Fence	   *result = NULL;
	LeaseRow	row;
	bool		isnull;

	LeaseConnect(&caller);
	if (token != NULL)
	{
		Datum		args[9];
		Datum		epoch;

		LeaseExecute(LQ_EPOCH, NULL, SPI_OK_SELECT);
		epoch = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		if (isnull)
			elog(ERROR, "fencing.epoch_internal() returned NULL");
		args[0] = PointerGetDatum(name);
		args[1] = Int64GetDatum(token->epoch);
		args[2] = Int64GetDatum(token->counter);
		args[3] = TimestampTzGetDatum(now);
		args[4] = TimestampTzGetDatum(expires);
		args[5] = ObjectIdGetDatum(caller.userid);
		args[6] = ObjectIdGetDatum(FencingOwnerOid());
		args[7] = epoch;
		args[8] = BoolGetDatum(renew);
		LeaseExecute(LQ_NEXT, args, SPI_OK_UPDATE_RETURNING);
		if (SPI_processed > 0)
		{
			Datum		d = SPI_getbinval(SPI_tuptable->vals[0],
										  SPI_tuptable->tupdesc, 1, &isnull);

			/* in the caller's memory: SPI_finish() frees SPI's */
			result = (Fence *) SPI_palloc(sizeof(Fence));
			memcpy(result, DatumGetFenceP(d), sizeof(Fence));
		}
	}
	if (result == NULL)
	{
		/* nothing changed: whose is it, and did it run out? */
		ReadLeaseRow(LQ_READ, name, NULL, &row);
		if (row.found)
			CheckLeaseOwner(name, &row, &caller);
		NoticeExpiry(name, &row, now);
	}
	LeaseFinish(&caller);

	FencingStatsCountLease(result != NULL ? FENCING_LEASE_RENEWED : FENCING_LEASE_RENEW_FAILED);
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_FENCE_P(result);
}
