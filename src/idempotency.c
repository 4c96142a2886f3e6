/*-------------------------------------------------------------------------
 *
 * idempotency.c
 *	  Idempotency keys: idem_begin(), idem_checkpoint(), idem_complete()
 *	  and idem_abandon() over the table fencing.idempotency_keys.
 *
 * Each logical request names a key.  The first caller claims the key and
 * gets a claim token, a fence; a retry of the same request gets the
 * recorded result instead of running again; a caller whose predecessor
 * lost its lease takes the key over with a higher claim token, so that
 * the predecessor can no longer record a result (SF001).
 *
 * Serialisation.  idem_begin() inserts with ON CONFLICT DO NOTHING and,
 * when the key exists, reads its row; to change it (resume, or replace
 * an expired key) it locks the row with SELECT ... FOR UPDATE and
 * decides again on the locked version.  Two calls for one key therefore
 * never both claim it and never surface a unique violation: under READ
 * COMMITTED the second waits in the unique index for the first
 * inserter's transaction, or on the row lock of an updater, and then
 * reads what the first left behind (done, running with a live lease, or
 * nothing after a rollback).  Replays take no lock.  No advisory locks:
 * a transaction may begin any number of keys without filling the lock
 * table.  With wait => false the row is locked with NOWAIT and the
 * insertion runs with lock_timeout = 1ms, so that any wait for another
 * transaction turns into SF004 at once.
 *
 * Claim tokens.  A claim token is (E, n): E is drawn from the sequence
 * fencing.idempotency_claim_seq whenever a claim is issued (and kept
 * above the epoch of the claim it replaces), n counts the claims of the
 * key's current incarnation: 1 when started, 2 after the first resume,
 * and so on.  So the claims of one key only grow, and no claim token is
 * ever issued twice in a database: not after a rolled-back begin (the
 * sequence does not roll back), not after a key expired, was purged and
 * was used again, and not after pg_dump and restore (the sequence is
 * dumped with the table).
 *
 * Privileges.  The table is not accessible to PUBLIC; the functions run
 * their statements as the extension's owner, switching to it around SPI
 * (as PostgreSQL's RI triggers do, and as the guard does) rather than
 * being SECURITY DEFINER: every name in the statements below is qualified
 * (operators included), the arguments are evaluated by the caller, and no
 * other SQL runs inside, so a hostile search_path has nothing to resolve,
 * and no SET clause's per-call GUC save and restore is paid on the hot
 * path.  Plans are prepared once per backend and kept.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "fencing.h"

PG_FUNCTION_INFO_V1(idem_begin);
PG_FUNCTION_INFO_V1(idem_checkpoint);
PG_FUNCTION_INFO_V1(idem_complete);
PG_FUNCTION_INFO_V1(idem_abandon);

/* lock_timeout of the insertion with wait => false */
#define IDEM_NOWAIT_LOCK_TIMEOUT	"1ms"

/* The statements, prepared once per backend */
typedef enum IdemQuery
{
	IDEM_Q_INSERT,
	IDEM_Q_PEEK,
	IDEM_Q_SELECT,
	IDEM_Q_SELECT_NOWAIT,
	IDEM_Q_RECREATE,
	IDEM_Q_RESUME,
	IDEM_Q_CHECKPOINT,
	IDEM_Q_COMPLETE,
	IDEM_Q_ABANDON,
	IDEM_Q_LOOKUP,
	IDEM_NUM_QUERIES
} IdemQuery;

typedef struct IdemQueryDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[6];
} IdemQueryDef;

/*
 * The claim token travels as two bigints ($2, $3) and is rebuilt with
 * fencing.fence(), so that no plan depends on the type's OID.
 */
#define IDEM_CLAIM_MATCHES \
	" WHERE key OPERATOR(pg_catalog.=) $1" \
	"   AND claim OPERATOR(fencing.=) fencing.fence($2, $3)" \
	"   AND state OPERATOR(pg_catalog.=) 'running'" \
	"   AND locked_until IS NOT NULL" \
	"   AND expires_at OPERATOR(pg_catalog.>) $4"

static const IdemQueryDef IdemQueries[IDEM_NUM_QUERIES] = {
	/* IDEM_Q_INSERT: $1 key, $2 hash, $3 now, $4 locked_until, $5 expires_at */
	{
		"INSERT INTO fencing.idempotency_keys"
		" (key, request_hash, state, result, claim, recovery_point,"
		"  locked_until, expires_at, created_at, updated_at)"
		" VALUES ($1, $2, 'running', NULL,"
		"  fencing.fence(pg_catalog.nextval('fencing.idempotency_claim_seq'::pg_catalog.regclass), 1),"
		"  NULL, $4, $5, $3, $3)"
		" ON CONFLICT (key) DO NOTHING"
		" RETURNING claim",
		5, {TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	/* IDEM_Q_PEEK: $1 key; the row as committed, without a lock */
	{
		"SELECT request_hash, state, result, claim, recovery_point,"
		" locked_until, expires_at"
		" FROM fencing.idempotency_keys"
		" WHERE key OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
	/* IDEM_Q_SELECT: $1 key */
	{
		"SELECT request_hash, state, result, claim, recovery_point,"
		" locked_until, expires_at"
		" FROM fencing.idempotency_keys"
		" WHERE key OPERATOR(pg_catalog.=) $1"
		" FOR UPDATE",
		1, {TEXTOID}
	},
	/* IDEM_Q_SELECT_NOWAIT: $1 key */
	{
		"SELECT request_hash, state, result, claim, recovery_point,"
		" locked_until, expires_at"
		" FROM fencing.idempotency_keys"
		" WHERE key OPERATOR(pg_catalog.=) $1"
		" FOR UPDATE NOWAIT",
		1, {TEXTOID}
	},
	/* IDEM_Q_RECREATE: an expired row becomes a new incarnation */
	{
		"UPDATE fencing.idempotency_keys"
		" SET request_hash = $2, state = 'running', result = NULL,"
		"  claim = fencing.fence(GREATEST("
		"   pg_catalog.nextval('fencing.idempotency_claim_seq'::pg_catalog.regclass),"
		"   fencing.epoch(claim) OPERATOR(pg_catalog.+) 1), 1),"
		"  recovery_point = NULL, locked_until = $4, expires_at = $5,"
		"  created_at = $3, updated_at = $3"
		" WHERE key OPERATOR(pg_catalog.=) $1"
		" RETURNING claim",
		5, {TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},
	/* IDEM_Q_RESUME: $1 key, $2 now, $3 locked_until, $4 expires_at */
	{
		"UPDATE fencing.idempotency_keys"
		" SET claim = fencing.fence(GREATEST("
		"   pg_catalog.nextval('fencing.idempotency_claim_seq'::pg_catalog.regclass),"
		"   fencing.epoch(claim) OPERATOR(pg_catalog.+) 1),"
		"   fencing.counter(claim) OPERATOR(pg_catalog.+) 1),"
		"  locked_until = $3,"
		"  expires_at = GREATEST(expires_at, $4), updated_at = $2"
		" WHERE key OPERATOR(pg_catalog.=) $1"
		" RETURNING claim, expires_at",
		4, {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},

	/*
	 * IDEM_Q_CHECKPOINT: $1 key, $2 $3 claim, $4 now, $5 recovery point,
	 * $6 lease.  Without a lease the lease keeps its length: locked_until
	 * and updated_at are always written together.
	 */
	{
		"UPDATE fencing.idempotency_keys"
		" SET recovery_point = COALESCE($5, recovery_point),"
		"  locked_until = $4 OPERATOR(pg_catalog.+)"
		"   COALESCE($6, locked_until OPERATOR(pg_catalog.-) updated_at),"
		"  updated_at = $4"
		IDEM_CLAIM_MATCHES,
		6, {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID, TEXTOID, INTERVALOID}
	},
	/* IDEM_Q_COMPLETE: $1 key, $2 $3 claim, $4 now, $5 result */
	{
		"UPDATE fencing.idempotency_keys"
		" SET state = 'done', result = $5, locked_until = NULL, updated_at = $4"
		IDEM_CLAIM_MATCHES,
		5, {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID, JSONBOID}
	},
	/* IDEM_Q_ABANDON: $1 key, $2 $3 claim, $4 now */
	{
		"UPDATE fencing.idempotency_keys"
		" SET locked_until = NULL, updated_at = $4"
		IDEM_CLAIM_MATCHES,
		4, {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID}
	},
	/* IDEM_Q_LOOKUP: $1 key; explains a refused claim */
	{
		"SELECT state, claim, locked_until, expires_at"
		" FROM fencing.idempotency_keys"
		" WHERE key OPERATOR(pg_catalog.=) $1",
		1, {TEXTOID}
	},
};

static SPIPlanPtr IdemPlans[IDEM_NUM_QUERIES];

/* Columns of IDEM_Q_PEEK and IDEM_Q_SELECT */
#define SEL_REQUEST_HASH	1
#define SEL_STATE			2
#define SEL_RESULT			3
#define SEL_CLAIM			4
#define SEL_RECOVERY_POINT	5
#define SEL_LOCKED_UNTIL	6
#define SEL_EXPIRES_AT		7

/* Columns of the result of idem_begin() */
#define BEGIN_NCOLS			5

/* Count one outcome of idem_begin() in fencing.idempotency_stats. */
static void
CountOutcome(FencingIdemCounter counter)
{
	FencingStatsCountIdem(counter);
}

/* The prepared plan of a statement, prepared on first use. */
static SPIPlanPtr
IdemPlan(IdemQuery q)
{
	if (IdemPlans[q] == NULL)
	{
		const IdemQueryDef *def = &IdemQueries[q];
		SPIPlanPtr	plan;

		plan = SPI_prepare(def->sql, def->nargs, (Oid *) def->argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 def->sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		IdemPlans[q] = plan;
	}
	return IdemPlans[q];
}

/* Run a prepared statement; nulls as SPI wants them (' ' or 'n'). */
static void
IdemExecute(IdemQuery q, Datum *values, const char *nulls, int expected)
{
	int			rc;

	rc = SPI_execute_plan(IdemPlan(q), values, nulls, false, 0);
	if (rc != expected)
		elog(ERROR, "unexpected SPI result %s for \"%s\"",
			 SPI_result_code_string(rc), IdemQueries[q].sql);
}

/* A column of the first result row, or 0 and *isnull. */
static Datum
IdemColumn(int col, bool *isnull)
{
	return SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
						 col, isnull);
}

/* Raise 22004 for a NULL argument that needs a value. */
static void
RequireArgument(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", name)));
}

/* Check an idempotency key: 1 to 255 characters. */
static void
CheckKey(text *key)
{
	int			len = pg_mbstrlen_with_len(VARDATA_ANY(key),
										   VARSIZE_ANY_EXHDR(key));

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idempotency key must not be empty")));
	if (len > FENCING_IDEM_KEY_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("idempotency key is too long"),
				 errdetail("The key has %d characters; the maximum is %d.",
						   len, FENCING_IDEM_KEY_MAXLEN)));
}

/* Check that an interval is positive; name says which argument it is. */
static void
CheckPositiveInterval(Interval *iv, const char *name)
{
	Interval	zero;

	memset(&zero, 0, sizeof(zero));
	if (!DatumGetBool(DirectFunctionCall2(interval_gt,
										  IntervalPGetDatum(iv),
										  IntervalPGetDatum(&zero))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a positive interval", name),
				 errdetail("The %s was %s.", name,
						   DatumGetCString(DirectFunctionCall1(interval_out,
															   IntervalPGetDatum(iv))))));
}

/* now + iv, with the usual overflow error. */
static TimestampTz
AddInterval(TimestampTz now, Interval *iv)
{
	return DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval,
												   TimestampTzGetDatum(now),
												   IntervalPGetDatum(iv)));
}

/*
 * The request's fingerprint: SHA-256 of the jsonb's text in UTF-8, that
 * is pg_catalog.sha256(convert_to(request::text, 'UTF8')).  jsonb's text
 * form sorts object keys and drops insignificant white space.
 */
static bytea *
RequestFingerprint(Jsonb *request)
{
	char	   *str;
	char	   *utf8;
	int			len;
	bytea	   *buf;

	str = JsonbToCString(NULL, &request->root, VARSIZE(request));
	utf8 = pg_server_to_any(str, strlen(str), PG_UTF8);
	len = strlen(utf8);
	buf = (bytea *) palloc(VARHDRSZ + len);
	SET_VARSIZE(buf, VARHDRSZ + len);
	memcpy(VARDATA(buf), utf8, len);
	return DatumGetByteaPP(DirectFunctionCall1(sha256_bytea,
											   PointerGetDatum(buf)));
}

/* Raise SF004: the key is being worked on. */
static void
ReportInProgress(const char *key, const Fence *claim)
{
	CountOutcome(FENCING_IDEM_IN_PROGRESS_REJECTED);
	ereport(ERROR,
			(errcode(ERRCODE_IDEMPOTENCY_KEY_IN_PROGRESS),
			 errmsg("idempotency key \"%s\" is in progress", key),
			 claim ?
			 errdetail("Claim %s holds the key and its lease has not run out.",
					   FenceToCString(claim)) :
			 errdetail("Another transaction is working on the key and has not finished yet."),
			 errhint("Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.")));
}

/* Raise SF003: the key was used for another request. */
static void
ReportReused(const char *key)
{
	CountOutcome(FENCING_IDEM_REUSED_REJECTED);
	ereport(ERROR,
			(errcode(ERRCODE_IDEMPOTENCY_KEY_REUSED),
			 errmsg("idempotency key \"%s\" was already used with a different request",
					key),
			 errdetail("The fingerprint of this request differs from the one recorded for the key."),
			 errhint("A retry must send exactly the same request; a new request needs a new key.")));
}

/*
 * Run a statement of idem_begin(); without wait, any wait for another
 * transaction's lock is cut short (lock_timeout, NOWAIT) and reported as
 * SF004, since only a transaction working on the key holds its row or
 * its place in the unique index.
 */
static void
IdemExecuteNoWait(IdemQuery q, Datum *args, int expected, bool wait,
				  text *key)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	int			save_nestlevel;

	if (wait)
	{
		IdemExecute(q, args, NULL, expected);
		return;
	}

	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("lock_timeout", IDEM_NOWAIT_LOCK_TIMEOUT,
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	PG_TRY();
	{
		IdemExecute(q, args, NULL, expected);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		/* the transaction is aborting: raise SF004 in place of 55P03 */
		FlushErrorState();
		ReportInProgress(text_to_cstring(key), NULL);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, save_nestlevel);
}

/*
 * Raise SF001: token is not the key's current running claim.  Called
 * connected to SPI, with the key locked; looks the row up to say why.
 */
static void
ReportLostClaim(text *key, const Fence *token, TimestampTz now)
{
	char	   *key_s = text_to_cstring(key);
	char	   *token_s = FenceToCString(token);
	Datum		values[1];
	bool		isnull;
	char	   *detail;
	Relation	rel;

	values[0] = PointerGetDatum(key);
	IdemExecute(IDEM_Q_LOOKUP, values, NULL, SPI_OK_SELECT);

	if (SPI_processed == 0 ||
		DatumGetTimestampTz(IdemColumn(4, &isnull)) <= now)
		detail = psprintf("Idempotency key \"%s\" does not exist or has expired.",
						  key_s);
	else
	{
		char	   *state = TextDatumGetCString(IdemColumn(1, &isnull));
		Fence	   *claim = DatumGetFenceP(IdemColumn(2, &isnull));
		bool		same = !isnull && FenceCmp(claim, token) == 0;

		if (strcmp(state, "done") == 0)
			detail = same ?
				pstrdup("The claim has already completed the key.") :
				psprintf("The key was completed under claim %s.",
						 FenceToCString(claim));
		else if (!same)
			detail = isnull ?
				pstrdup("The key has no claim.") :
				psprintf("The key's current claim is %s.",
						 FenceToCString(claim));
		else
			detail = pstrdup("The claim was abandoned.");
	}

	rel = relation_openrv_extended(makeRangeVar("fencing", "idempotency_keys", -1),
								   AccessShareLock, true);
	ereport(ERROR,
			(errcode(ERRCODE_STALE_FENCE_TOKEN),
			 errmsg("stale fence token %s for idempotency key \"%s\"",
					token_s, key_s),
			 errdetail_internal("%s", detail),
			 errhint("The claim with token %s was lost: stop, record no result, and call fencing.idem_begin() again to learn the key's state.",
					 token_s),
			 rel ? errtable(rel) : 0));
}

/*
 * Connect to SPI and run as the extension's owner until IdemFinish().  An
 * error in between needs no cleanup: (sub)transaction abort restores the
 * user and security context.
 */
static void
IdemConnect(FencingSavedUser *caller)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	FencingBecomeOwner(caller);
}

/* Back to the caller, and out of SPI. */
static void
IdemFinish(FencingSavedUser *caller)
{
	FencingRestoreUser(caller);
	SPI_finish();
}

/*
 * The work of idem_begin(): decide the outcome and fill values/nulls
 * (columns of the result, allocated in outcxt).
 */
static void
IdemBegin(text *key, Jsonb *request, Interval *lease, Interval *retention,
		  bool wait, Datum *values, bool *nulls, MemoryContext outcxt)
{
	char	   *key_s = NULL;
	bytea	   *hash = RequestFingerprint(request);
	const char *outcome = NULL;
	TimestampTz now = 0;
	TimestampTz locked_until;
	TimestampTz expires_at = 0;
	Datum		claim = (Datum) 0;
	Datum		result = (Datum) 0;
	Datum		recovery_point = (Datum) 0;
	bool		result_null = true;
	bool		recovery_point_null = true;
	int			attempt;
	FencingSavedUser caller;

	IdemConnect(&caller);

	/*
	 * Normally one round: insert, or find the row.  A row deleted by
	 * idem_purge() between the two sends us round again.
	 */
	for (attempt = 0; outcome == NULL; attempt++)
	{
		Datum		args[5];
		Datum		resume_args[4];
		bool		isnull;
		bool		locked;
		bytea	   *row_hash;
		char	   *state;
		Datum		lu;
		bool		lu_null;

		recovery_point_null = true;
		result_null = true;
		if (attempt >= 10)
			elog(ERROR, "idempotency key \"%s\" keeps disappearing",
				 text_to_cstring(key));

		now = GetCurrentTimestamp();
		locked_until = AddInterval(now, lease);
		expires_at = AddInterval(now, retention);
		args[0] = PointerGetDatum(key);
		args[1] = PointerGetDatum(hash);
		args[2] = TimestampTzGetDatum(now);
		args[3] = TimestampTzGetDatum(locked_until);
		args[4] = TimestampTzGetDatum(expires_at);

		IdemExecuteNoWait(IDEM_Q_INSERT, args, SPI_OK_INSERT_RETURNING,
						  wait, key);
		if (SPI_processed == 1)
		{
			outcome = "started";
			claim = IdemColumn(1, &isnull);
			break;
		}

		/*
		 * The key exists.  Read its row; lock it only to change it (a
		 * replay or a refusal needs no lock, and replays of one key must
		 * not queue behind each other), then decide again on the locked
		 * version, which may have moved on meanwhile.
		 */
		for (locked = false;; locked = true)
		{
			if (!locked)
				IdemExecute(IDEM_Q_PEEK, args, NULL, SPI_OK_SELECT);
			else if (wait)
				IdemExecute(IDEM_Q_SELECT, args, NULL, SPI_OK_SELECT);
			else
				IdemExecuteNoWait(IDEM_Q_SELECT_NOWAIT, args, SPI_OK_SELECT,
								  false, key);
			if (SPI_processed == 0)
				break;			/* purged meanwhile: insert again */

			/* An expired key counts as absent: a new incarnation replaces it */
			if (DatumGetTimestampTz(IdemColumn(SEL_EXPIRES_AT, &isnull)) <= now)
			{
				if (!locked)
					continue;
				IdemExecute(IDEM_Q_RECREATE, args, NULL,
							SPI_OK_UPDATE_RETURNING);
				outcome = "started";
				claim = IdemColumn(1, &isnull);
				break;
			}

			key_s = text_to_cstring(key);
			row_hash = DatumGetByteaPP(IdemColumn(SEL_REQUEST_HASH, &isnull));
			if (VARSIZE_ANY_EXHDR(row_hash) != VARSIZE_ANY_EXHDR(hash) ||
				memcmp(VARDATA_ANY(row_hash), VARDATA_ANY(hash),
					   VARSIZE_ANY_EXHDR(hash)) != 0)
				ReportReused(key_s);

			state = TextDatumGetCString(IdemColumn(SEL_STATE, &isnull));
			recovery_point = IdemColumn(SEL_RECOVERY_POINT,
										&recovery_point_null);
			if (strcmp(state, "done") == 0)
			{
				outcome = "done";
				result = IdemColumn(SEL_RESULT, &result_null);
				expires_at = DatumGetTimestampTz(IdemColumn(SEL_EXPIRES_AT,
															&isnull));
				break;
			}

			/* Running: a live lease keeps the key; a lapsed one frees it */
			lu = IdemColumn(SEL_LOCKED_UNTIL, &lu_null);
			if (!lu_null && DatumGetTimestampTz(lu) > now)
				ReportInProgress(key_s,
								 DatumGetFenceP(IdemColumn(SEL_CLAIM, &isnull)));
			if (!locked)
				continue;

			resume_args[0] = PointerGetDatum(key);
			resume_args[1] = TimestampTzGetDatum(now);
			resume_args[2] = TimestampTzGetDatum(locked_until);
			resume_args[3] = TimestampTzGetDatum(expires_at);
			IdemExecute(IDEM_Q_RESUME, resume_args, NULL,
						SPI_OK_UPDATE_RETURNING);
			outcome = "resumed";
			claim = IdemColumn(1, &isnull);
			expires_at = DatumGetTimestampTz(IdemColumn(2, &isnull));
			break;
		}
	}

	/* Copy the answer out of SPI's memory before SPI_finish() frees it. */
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(outcxt);

		values[0] = CStringGetTextDatum(outcome);
		nulls[0] = false;
		if (strcmp(outcome, "done") == 0)
		{
			nulls[1] = true;
			nulls[2] = result_null;
			if (!result_null)
				values[2] = datumCopy(result, false, -1);
		}
		else
		{
			values[1] = FencePGetDatum(FenceCopy(DatumGetFenceP(claim)));
			nulls[1] = false;
			nulls[2] = true;
		}
		nulls[3] = recovery_point_null;
		if (!recovery_point_null)
			values[3] = datumCopy(recovery_point, false, -1);
		values[4] = TimestampTzGetDatum(expires_at);
		nulls[4] = false;
		MemoryContextSwitchTo(oldcxt);
	}

	if (strcmp(outcome, "started") == 0)
		CountOutcome(FENCING_IDEM_STARTED);
	else if (strcmp(outcome, "done") == 0)
		CountOutcome(FENCING_IDEM_REPLAYED);
	else
		CountOutcome(FENCING_IDEM_RESUMED);

	IdemFinish(&caller);
}

/*
 * fencing.idem_begin(key, request, lease, retention, wait)
 *		RETURNS TABLE(state, token, result, recovery_point, expires_at)
 *
 * Claim a key, or replay its result.  One row, always.
 */
Datum
idem_begin(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;

	if (SRF_IS_FIRSTCALL())
	{
		MemoryContext oldcxt;
		TupleDesc	tupdesc;
		Datum		values[BEGIN_NCOLS];
		bool		nulls[BEGIN_NCOLS];
		text	   *key;
		Interval   *lease;
		Interval   *retention;

		RequireArgument(fcinfo, 0, "idempotency key");
		RequireArgument(fcinfo, 1, "request");
		RequireArgument(fcinfo, 2, "lease");
		RequireArgument(fcinfo, 3, "retention");
		RequireArgument(fcinfo, 4, "wait");
		key = PG_GETARG_TEXT_PP(0);
		lease = PG_GETARG_INTERVAL_P(2);
		retention = PG_GETARG_INTERVAL_P(3);
		CheckKey(key);
		CheckPositiveInterval(lease, "lease");
		CheckPositiveInterval(retention, "retention");

		funcctx = SRF_FIRSTCALL_INIT();
		oldcxt = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
			elog(ERROR, "return type must be a row type");
		tupdesc = BlessTupleDesc(tupdesc);
		MemoryContextSwitchTo(oldcxt);

		IdemBegin(key, PG_GETARG_JSONB_P(1), lease, retention,
				  PG_GETARG_BOOL(4), values, nulls,
				  funcctx->multi_call_memory_ctx);

		oldcxt = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		funcctx->user_fctx = heap_form_tuple(tupdesc, values, nulls);
		MemoryContextSwitchTo(oldcxt);
	}

	funcctx = SRF_PERCALL_SETUP();
	if (funcctx->call_cntr == 0)
		SRF_RETURN_NEXT(funcctx,
						HeapTupleGetDatum((HeapTuple) funcctx->user_fctx));
	SRF_RETURN_DONE(funcctx);
}

/*
 * Apply one of the claim updates (checkpoint, complete, abandon) to the
 * key's row; SF001 when token is not its current running claim.
 * extra holds the statement's arguments from $5 on.
 */
static void
IdemUpdateClaim(FunctionCallInfo fcinfo, IdemQuery q, int nextra,
				Datum *extra, const char *extra_nulls)
{
	text	   *key;
	Fence	   *token;
	TimestampTz now;
	Datum		args[6];
	char		nulls[6];
	int			i;
	FencingSavedUser caller;

	RequireArgument(fcinfo, 0, "idempotency key");
	RequireArgument(fcinfo, 1, "token");
	key = PG_GETARG_TEXT_PP(0);
	token = PG_GETARG_FENCE_P(1);
	CheckKey(key);

	IdemConnect(&caller);

	now = GetCurrentTimestamp();
	args[0] = PointerGetDatum(key);
	args[1] = Int64GetDatum(token->epoch);
	args[2] = Int64GetDatum(token->counter);
	args[3] = TimestampTzGetDatum(now);
	memset(nulls, ' ', sizeof(nulls));
	for (i = 0; i < nextra; i++)
	{
		args[4 + i] = extra[i];
		nulls[4 + i] = extra_nulls[i];
	}

	IdemExecute(q, args, nulls, SPI_OK_UPDATE);
	if (SPI_processed == 0)
		ReportLostClaim(key, token, now);

	IdemFinish(&caller);
}

/*
 * fencing.idem_checkpoint(key, token, recovery_point, lease) → void
 *
 * Record progress and renew the lease (by lease, or by the lease's
 * current length when NULL).  A NULL recovery_point keeps the last one.
 */
Datum
idem_checkpoint(PG_FUNCTION_ARGS)
{
	Datum		extra[2];
	char		extra_nulls[2] = {' ', ' '};

	if (PG_ARGISNULL(2))
		extra_nulls[0] = 'n';
	else
		extra[0] = PG_GETARG_DATUM(2);
	if (PG_ARGISNULL(3))
		extra_nulls[1] = 'n';
	else
	{
		CheckPositiveInterval(PG_GETARG_INTERVAL_P(3), "lease");
		extra[1] = PG_GETARG_DATUM(3);
	}

	IdemUpdateClaim(fcinfo, IDEM_Q_CHECKPOINT, 2, extra, extra_nulls);
	PG_RETURN_VOID();
}

/*
 * fencing.idem_complete(key, token, result) → void
 *
 * Record the final result; retries get it until the key expires.
 */
Datum
idem_complete(PG_FUNCTION_ARGS)
{
	Datum		extra[1];
	char		extra_nulls[1] = {' '};

	if (PG_ARGISNULL(2))
		extra_nulls[0] = 'n';
	else
		extra[0] = PG_GETARG_DATUM(2);

	IdemUpdateClaim(fcinfo, IDEM_Q_COMPLETE, 1, extra, extra_nulls);
	PG_RETURN_VOID();
}

/*
 * fencing.idem_abandon(key, token) → void
 *
 * Give the claim up, so that the next idem_begin() resumes at once.
 */
Datum
idem_abandon(PG_FUNCTION_ARGS)
{
	IdemUpdateClaim(fcinfo, IDEM_Q_ABANDON, 0, NULL, NULL);
	PG_RETURN_VOID();
}
