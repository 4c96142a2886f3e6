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
 * Owners.  A key belongs to the role that began it (current_user then),
 * recorded in the column owner.  Any other role that is not a member of
 * it gets 42501 from every helper on the key, before anything else is
 * looked at, so no message shows it the key's claim, result or recovery
 * point (or whether its request matched).  The owner's own messages do
 * show the claim (SF001, SF004): the role is the unit of trust, and its
 * sessions share the key.  A key whose expires_at has passed counts as
 * absent, for its owner and for everyone else: whoever begins it next
 * owns the new incarnation.  Keys begun under fencing 1.0 belong to the
 * extension's owner after the update, who hands them to the application's
 * role; nothing belongs to PUBLIC.  A key of owner 0 (the released 1.1 gave
 * the 1.0 keys to PUBLIC so, and the update to 1.2 gives them to the
 * extension's owner) is the extension's owner's here too, for the time
 * between installing this library and that update.  A 1.0 table (no owner
 * column) still works with this library: its keys then have no owners, as
 * in 1.0, until ALTER EXTENSION fencing UPDATE.
 *
 * Serialisation.  idem_begin() inserts with ON CONFLICT DO NOTHING
 * semantics and, when the key exists, reads its row; to change it (resume,
 * or replace an expired key) it locks the row with SELECT ... FOR UPDATE
 * and decides again on the locked version.  Two calls for one key
 * therefore never both claim it and never surface a unique violation:
 * under READ COMMITTED the second waits for the first inserter's
 * transaction, or on the row lock of an updater, and then reads what the
 * first left behind (done, running with a live lease, or nothing after a
 * rollback).  Replays take no lock.  No advisory locks: a transaction may
 * begin any number of keys without filling the lock table.  With wait =>
 * false any wait for another transaction turns into SF004 at once.
 *
 * The direct path.  A new key (idem_begin's common case) and the claim
 * updates (checkpoint, complete, abandon) are written without SPI when
 * the table qualifies (direct.c: no triggers, rules, row security or
 * indexes of its own added to it): a speculative insertion, as INSERT ...
 * ON CONFLICT DO NOTHING does it, and a heap_update found through the
 * primary key.  Through SPI each of them paid the executor's start-up and
 * shut-down for one row, about two thirds of an idempotent request's cost
 * (test/bench/profile.sh).  Everything else (replay, resume, refusals,
 * the re-creation of an expired key), and every call on a table that does
 * not qualify, runs the SQL below through SPI, which the direct path
 * mirrors statement for statement.
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
 * Privileges.  The table is not accessible to PUBLIC; the SPI statements
 * run as the extension's owner, switching to it around SPI (as
 * PostgreSQL's RI triggers do, and as the guard does) rather than being
 * SECURITY DEFINER: every name in the statements below is qualified
 * (operators included), the arguments are evaluated by the caller, and no
 * other SQL runs inside, so a hostile search_path has nothing to resolve,
 * and no SET clause's per-call GUC save and restore is paid on the hot
 * path.  The direct path checks no privilege on the table (it is the
 * helpers' own) and runs no SQL.  Plans are prepared once per backend and
 * kept.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "direct.h"
#include "extension.h"
#include "fence.h"
#include "stats.h"

/* the longest idempotency key, in characters */
#define FENCING_IDEM_KEY_MAXLEN		255

PG_FUNCTION_INFO_V1(idem_begin);
PG_FUNCTION_INFO_V1(idem_checkpoint);
PG_FUNCTION_INFO_V1(idem_complete);
PG_FUNCTION_INFO_V1(idem_abandon);

/* lock_timeout of the SPI insertion with wait => false */
#define IDEM_NOWAIT_LOCK_TIMEOUT	"1ms"

/* The table's indexes: the primary key and the one on expires_at */
#define IDEM_NUM_INDEXES	2

/*
 * The columns of fencing.idempotency_keys.  owner is new in 1.1; the
 * others are 1.0's.
 */
typedef enum IdemTableColumn
{
	IC_KEY,
	IC_REQUEST_HASH,
	IC_STATE,
	IC_RESULT,
	IC_CLAIM,
	IC_RECOVERY_POINT,
	IC_LOCKED_UNTIL,
	IC_EXPIRES_AT,
	IC_CREATED_AT,
	IC_UPDATED_AT,
	IC_OWNER,
	IC_NCOLUMNS
} IdemTableColumn;

static const char *const IdemColumnNames[IC_NCOLUMNS] = {
	"key", "request_hash", "state", "result", "claim", "recovery_point",
	"locked_until", "expires_at", "created_at", "updated_at", "owner"
};

/* Their types; InvalidOid: fencing.fence, whose OID is not fixed */
static const Oid IdemColumnTypes[IC_NCOLUMNS] = {
	TEXTOID, BYTEAOID, TEXTOID, JSONBOID, InvalidOid, TEXTOID,
	TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, REGROLEOID
};

/*
 * What this backend knows of the table and its sequence, until a relcache
 * invalidation of either (ALTER EXTENSION UPDATE, DROP EXTENSION, ALTER
 * TABLE by a DBA).
 */
typedef struct IdemTableInfo
{
	bool		valid;
	Oid			relid;
	Oid			seqid;
	bool		has_owner;		/* 1.1's table: keys have owners */
	bool		direct_shape;	/* exactly the known columns, of their types */
	AttrNumber	attnum[IC_NCOLUMNS];	/* 0: no such column */
	int			natts;
} IdemTableInfo;

static IdemTableInfo idem_table;
static bool idem_callback_registered = false;

/*
 * The row this transaction last wrote for a key, by the TID its index
 * entries point to: the claim update that usually follows in the same
 * transaction (begin, business write, complete) finds the row there
 * without descending the primary key.  Only a hint: the row found must
 * still be visible and carry the key, else the index is asked.  Reset at
 * the end of every transaction, and tied to the table's file, so that the
 * TID always lies in the table (VACUUM cannot truncate it while the
 * transaction's lock is held; TRUNCATE gives it a new file).
 */
#define IDEM_HINT_KEYLEN	(FENCING_IDEM_KEY_MAXLEN * 4)

typedef struct IdemRowHint
{
	bool		valid;
	Oid			relid;
	Oid			relfilenode;	/* TRUNCATE in between makes a new one */
	ItemPointerData tid;
	int			keylen;
	char		key[IDEM_HINT_KEYLEN];
} IdemRowHint;

static IdemRowHint idem_hint;
static bool idem_xact_callback_registered = false;

/* The row type of idem_begin()'s result, built once per backend */
static Oid	idem_begin_fn_oid = InvalidOid;
static TupleDesc idem_begin_tupdesc = NULL;

/* The SPI statements, prepared once per backend and table version */
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
	const char *sql[2];			/* [0] 1.0's table, [1] with owner */
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

/* The columns read by IDEM_Q_PEEK and IDEM_Q_SELECT */
#define IDEM_SELECT_10 \
	"SELECT request_hash, state, result, claim, recovery_point," \
	" locked_until, expires_at, NULL::pg_catalog.regrole" \
	" FROM fencing.idempotency_keys" \
	" WHERE key OPERATOR(pg_catalog.=) $1"
#define IDEM_SELECT_11 \
	"SELECT request_hash, state, result, claim, recovery_point," \
	" locked_until, expires_at, owner" \
	" FROM fencing.idempotency_keys" \
	" WHERE key OPERATOR(pg_catalog.=) $1"

#define IDEM_INSERT(owner_col, owner_val) \
	"INSERT INTO fencing.idempotency_keys" \
	" (key, request_hash, state, result, claim, recovery_point," \
	"  locked_until, expires_at, created_at, updated_at" owner_col ")" \
	" VALUES ($1, $2, 'running', NULL," \
	"  fencing.fence(pg_catalog.nextval('fencing.idempotency_claim_seq'::pg_catalog.regclass), 1)," \
	"  NULL, $4, $5, $3, $3" owner_val ")" \
	" ON CONFLICT (key) DO NOTHING" \
	" RETURNING claim"

#define IDEM_RECREATE(owner_set) \
	"UPDATE fencing.idempotency_keys" \
	" SET request_hash = $2, state = 'running', result = NULL," \
	"  claim = fencing.fence(GREATEST(" \
	"   pg_catalog.nextval('fencing.idempotency_claim_seq'::pg_catalog.regclass)," \
	"   fencing.epoch(claim) OPERATOR(pg_catalog.+) 1), 1)," \
	"  recovery_point = NULL, locked_until = $4, expires_at = $5," \
	"  created_at = $3, updated_at = $3" owner_set \
	" WHERE key OPERATOR(pg_catalog.=) $1" \
	" RETURNING claim"

/*
 * The lease of a checkpoint: $6, or without one the lease's current
 * length.  The key never expires before its lease runs out.
 */
#define IDEM_CHECKPOINT_LEASE \
	"$4 OPERATOR(pg_catalog.+)" \
	" COALESCE($6, locked_until OPERATOR(pg_catalog.-) updated_at)"
#define IDEM_CHECKPOINT(returning) \
	"UPDATE fencing.idempotency_keys" \
	" SET recovery_point = COALESCE($5, recovery_point)," \
	"  locked_until = " IDEM_CHECKPOINT_LEASE "," \
	"  expires_at = GREATEST(expires_at, " IDEM_CHECKPOINT_LEASE ")," \
	"  updated_at = $4" \
	IDEM_CLAIM_MATCHES returning

#define IDEM_COMPLETE(returning) \
	"UPDATE fencing.idempotency_keys" \
	" SET state = 'done', result = $5, locked_until = NULL, updated_at = $4" \
	IDEM_CLAIM_MATCHES returning

#define IDEM_ABANDON(returning) \
	"UPDATE fencing.idempotency_keys" \
	" SET locked_until = NULL, updated_at = $4" \
	IDEM_CLAIM_MATCHES returning

#define IDEM_RETURNING_10	" RETURNING NULL::pg_catalog.regrole"
#define IDEM_RETURNING_11	" RETURNING owner"

static const IdemQueryDef IdemQueries[IDEM_NUM_QUERIES] = {
	/*
	 * IDEM_Q_INSERT: $1 key, $2 hash, $3 now, $4 locked_until, $5
	 * expires_at, $6 owner
	 */
	{
		{IDEM_INSERT("", ""), IDEM_INSERT(", owner", ", $6")},
		6, {TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, REGROLEOID}
	},
	/* IDEM_Q_PEEK: $1 key; the row as committed, without a lock */
	{
		{IDEM_SELECT_10, IDEM_SELECT_11},
		1, {TEXTOID}
	},
	/* IDEM_Q_SELECT: $1 key */
	{
		{IDEM_SELECT_10 " FOR UPDATE", IDEM_SELECT_11 " FOR UPDATE"},
		1, {TEXTOID}
	},
	/* IDEM_Q_SELECT_NOWAIT: $1 key */
	{
		{IDEM_SELECT_10 " FOR UPDATE NOWAIT", IDEM_SELECT_11 " FOR UPDATE NOWAIT"},
		1, {TEXTOID}
	},
	/* IDEM_Q_RECREATE: an expired row becomes a new incarnation (as INSERT) */
	{
		{IDEM_RECREATE(""), IDEM_RECREATE(", owner = $6")},
		6, {TEXTOID, BYTEAOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID, REGROLEOID}
	},
	/* IDEM_Q_RESUME: $1 key, $2 now, $3 locked_until, $4 expires_at */
	{
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
			NULL				/* the same */
		},
		4, {TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, TIMESTAMPTZOID}
	},

	/*
	 * IDEM_Q_CHECKPOINT: $1 key, $2 $3 claim, $4 now, $5 recovery point,
	 * $6 lease.  Without a lease the lease keeps its length: locked_until
	 * and updated_at are always written together.
	 */
	{
		{IDEM_CHECKPOINT(IDEM_RETURNING_10), IDEM_CHECKPOINT(IDEM_RETURNING_11)},
		6, {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID, TEXTOID, INTERVALOID}
	},
	/* IDEM_Q_COMPLETE: $1 key, $2 $3 claim, $4 now, $5 result */
	{
		{IDEM_COMPLETE(IDEM_RETURNING_10), IDEM_COMPLETE(IDEM_RETURNING_11)},
		5, {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID, JSONBOID}
	},
	/* IDEM_Q_ABANDON: $1 key, $2 $3 claim, $4 now */
	{
		{IDEM_ABANDON(IDEM_RETURNING_10), IDEM_ABANDON(IDEM_RETURNING_11)},
		4, {TEXTOID, INT8OID, INT8OID, TIMESTAMPTZOID}
	},
	/* IDEM_Q_LOOKUP: $1 key; explains a refused claim */
	{
		{
			"SELECT state, claim, locked_until, expires_at, NULL::pg_catalog.regrole"
			" FROM fencing.idempotency_keys"
			" WHERE key OPERATOR(pg_catalog.=) $1",
			"SELECT state, claim, locked_until, expires_at, owner"
			" FROM fencing.idempotency_keys"
			" WHERE key OPERATOR(pg_catalog.=) $1"
		},
		1, {TEXTOID}
	},
};

static SPIPlanPtr IdemPlans[2][IDEM_NUM_QUERIES];

/* Columns of IDEM_Q_PEEK and IDEM_Q_SELECT */
#define SEL_REQUEST_HASH	1
#define SEL_STATE			2
#define SEL_RESULT			3
#define SEL_CLAIM			4
#define SEL_RECOVERY_POINT	5
#define SEL_LOCKED_UNTIL	6
#define SEL_EXPIRES_AT		7
#define SEL_OWNER			8

/* Columns of IDEM_Q_LOOKUP */
#define LOOKUP_STATE		1
#define LOOKUP_CLAIM		2
#define LOOKUP_EXPIRES_AT	4
#define LOOKUP_OWNER		5

/* Columns of the result of idem_begin() */
#define BEGIN_NCOLS			5

/* The claim updates */
typedef enum IdemClaimOp
{
	IDEM_OP_CHECKPOINT,
	IDEM_OP_COMPLETE,
	IDEM_OP_ABANDON
} IdemClaimOp;

/* The outcome of a direct write */
typedef enum IdemDirectResult
{
	IDEM_DIRECT_UNAVAILABLE,	/* the table does not qualify: use SPI */
	IDEM_DIRECT_DONE,			/* written */
	IDEM_DIRECT_EXISTS,			/* idem_begin: the key has a row */
	IDEM_DIRECT_BUSY,			/* idem_begin, no wait: the key is being
								 * inserted by an open transaction */
	IDEM_DIRECT_LOST			/* a claim update: not the running claim */
} IdemDirectResult;

/* What explains a refused claim update (SF001) */
typedef struct IdemLostClaim
{
	bool		exists;			/* a live (unexpired) row */
	char	   *state;
	Fence	   *claim;			/* NULL: none */
} IdemLostClaim;

/* Relcache invalidation: forget what we knew of the table. */
static void
IdemInvalidateTable(Datum arg pg_attribute_unused(), Oid relid)
{
	if (!OidIsValid(relid) || relid == idem_table.relid ||
		relid == idem_table.seqid)
		idem_table.valid = false;
}

/*
 * The table as it is now: its columns (1.0's, or 1.1's with owner), and
 * whether they are exactly the known ones with their types, as the direct
 * path needs (a column added by hand would need its default).
 */
static IdemTableInfo *
IdemGetTable(void)
{
	Oid			nspid;
	Relation	rel;
	TupleDesc	desc;
	Oid			fence_type;
	int			i;
	int			known = 0;
	int			live = 0;

	if (idem_table.valid)
		return &idem_table;

	if (!idem_callback_registered)
	{
		CacheRegisterRelcacheCallback(IdemInvalidateTable, (Datum) 0);
		idem_callback_registered = true;
	}

	nspid = FencingSchemaOid();
	memset(&idem_table, 0, sizeof(idem_table));
	idem_table.relid = get_relname_relid("idempotency_keys", nspid);
	idem_table.seqid = get_relname_relid("idempotency_claim_seq", nspid);
	if (!OidIsValid(idem_table.relid) || !OidIsValid(idem_table.seqid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("table fencing.idempotency_keys or sequence fencing.idempotency_claim_seq is missing"),
				 errhint("Drop and create the extension fencing again.")));

	fence_type = FencingTypeOid();
	rel = table_open(idem_table.relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		int			c;

		if (att->attisdropped)
			continue;
		live++;
		for (c = 0; c < IC_NCOLUMNS; c++)
		{
			Oid			want = OidIsValid(IdemColumnTypes[c]) ?
				IdemColumnTypes[c] : fence_type;

			if (strcmp(NameStr(att->attname), IdemColumnNames[c]) == 0)
			{
				if (att->atttypid == want)
				{
					idem_table.attnum[c] = att->attnum;
					known++;
				}
				break;
			}
		}
	}
	idem_table.natts = desc->natts;
	table_close(rel, AccessShareLock);

	idem_table.has_owner = idem_table.attnum[IC_OWNER] != 0;
	idem_table.direct_shape = (known == live);
	for (i = 0; i < IC_OWNER; i++)
		if (idem_table.attnum[i] == 0)
			idem_table.direct_shape = false;
	idem_table.valid = true;
	return &idem_table;
}

/* Transaction end: the hint's TID is no longer ours. */
static void
IdemXactCallback(XactEvent event pg_attribute_unused(),
				 void *arg pg_attribute_unused())
{
	idem_hint.valid = false;
}

/* Remember where this transaction wrote the row of key. */
static void
IdemRememberRow(Relation rel, text *key, ItemPointer tid)
{
	int			len = VARSIZE_ANY_EXHDR(key);

	if (!idem_xact_callback_registered)
	{
		RegisterXactCallback(IdemXactCallback, NULL);
		idem_xact_callback_registered = true;
	}
	if (len > IDEM_HINT_KEYLEN)
	{
		idem_hint.valid = false;
		return;
	}
	idem_hint.relid = RelationGetRelid(rel);
	idem_hint.relfilenode = rel->rd_rel->relfilenode;
	idem_hint.tid = *tid;
	idem_hint.keylen = len;
	memcpy(idem_hint.key, VARDATA_ANY(key), len);
	idem_hint.valid = true;
}

/* Does the hint name a row of key in rel? */
static bool
IdemHintFor(Relation rel, text *key)
{
	return idem_hint.valid && idem_hint.relid == RelationGetRelid(rel) &&
		idem_hint.relfilenode == rel->rd_rel->relfilenode &&
		idem_hint.keylen == (int) VARSIZE_ANY_EXHDR(key) &&
		memcmp(idem_hint.key, VARDATA_ANY(key), idem_hint.keylen) == 0;
}

/* Is value (a text of the table) the key? */
static bool
IdemKeyEquals(Datum value, text *key)
{
	text	   *v = DatumGetTextPP(value);

	return VARSIZE_ANY_EXHDR(v) == VARSIZE_ANY_EXHDR(key) &&
		memcmp(VARDATA_ANY(v), VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key)) == 0;
}

/* Count one outcome of idem_begin() in fencing.idempotency_stats. */
static void
CountOutcome(FencingIdemCounter counter)
{
	FencingStatsCountIdem(counter);
}

/* The prepared plan of a statement, prepared on first use. */
static SPIPlanPtr
IdemPlan(IdemQuery q, bool has_owner)
{
	int			v = has_owner ? 1 : 0;

	if (IdemPlans[v][q] == NULL)
	{
		const IdemQueryDef *def = &IdemQueries[q];
		const char *sql = def->sql[v] ? def->sql[v] : def->sql[0];
		SPIPlanPtr	plan;

		plan = SPI_prepare(sql, def->nargs, (Oid *) def->argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for \"%s\": %s",
				 sql, SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		IdemPlans[v][q] = plan;
	}
	return IdemPlans[v][q];
}

/* Run a prepared statement; nulls as SPI wants them (' ' or 'n'). */
static void
IdemExecute(IdemQuery q, Datum *values, const char *nulls, int expected)
{
	bool		has_owner = IdemGetTable()->has_owner;
	int			rc;

	rc = SPI_execute_plan(IdemPlan(q, has_owner), values, nulls, false, 0);
	if (rc != expected)
		elog(ERROR, "unexpected SPI result %s for \"%s\"",
			 SPI_result_code_string(rc),
			 IdemQueries[q].sql[has_owner && IdemQueries[q].sql[1] ? 1 : 0]);
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

/* The text form of an interval, for messages. */
static char *
IntervalToCString(Interval *iv)
{
	return DatumGetCString(DirectFunctionCall1(interval_out,
											   IntervalPGetDatum(iv)));
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
				 errdetail("The %s was %s.", name, IntervalToCString(iv))));
}

/*
 * A key must outlive its claim's lease: a key that expired while its
 * owner still held the lease would count as absent, and could be begun
 * and executed again by another caller.
 */
static void
CheckRetentionCoversLease(Interval *retention, Interval *lease)
{
	if (DatumGetBool(DirectFunctionCall2(interval_lt,
										 IntervalPGetDatum(retention),
										 IntervalPGetDatum(lease))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("retention must not be shorter than the lease"),
				 errdetail("The retention was %s and the lease %s.",
						   IntervalToCString(retention),
						   IntervalToCString(lease)),
				 errhint("A key that expired while its claim's lease was still running could be begun again by another caller.")));
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

/*
 * May role (the caller, whoever we run as now) use a key owned by owner?
 * A key of a 1.0 table without the column (NULL) may be used by every
 * role, as under 1.0; a key of owner 0 (given to PUBLIC by the released
 * update to 1.1) belongs to the extension's owner.
 */
static bool
RoleMayUseKey(Oid role, bool owner_null, Oid owner)
{
	FencingSavedUser saved;
	bool		ok;

	if (owner_null)
		return true;
	if (!OidIsValid(owner))
		owner = FencingOwnerOid();
	FencingBecomeRole(role, &saved);
	ok = FencingActsFor(owner);
	FencingRestoreUser(&saved);
	return ok;
}

/*
 * Raise 42501: the key belongs to another role.  Says nothing of the
 * key's state, claim, result or recovery point.
 */
static void
ReportNotOwner(const char *key, Oid owner)
{
	char	   *name;

	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for idempotency key \"%s\"", key),
				 errdetail("The key was begun under fencing 1.0 and belongs to the extension's owner, role \"%s\", until it gives the key to another role.",
						   GetUserNameFromId(FencingOwnerOid(), false)),
				 errhint("The extension's owner gives the keys begun under fencing 1.0 to the role of their application.")));
	name = GetUserNameFromId(owner, true);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for idempotency key \"%s\"", key),
			 name ?
			 errdetail("The key belongs to role \"%s\"; only that role and its members may use it.",
					   name) :
			 errdetail("The key belongs to a role that was dropped (OID %u); it can be used again once it expires.",
					   owner),
			 errhint("Keys are global to the database: each role must use keys of its own.")));
}

/* 42501 unless the caller may use the key. */
static void
CheckKeyOwner(Oid caller, const char *key, bool owner_null, Oid owner)
{
	if (!RoleMayUseKey(caller, owner_null, owner))
		ReportNotOwner(key, owner);
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
 * Raise SF001: token is not the key's current running claim; lost says
 * what the key's row holds (the caller has checked that it may see it).
 */
static void
ReportLostClaim(text *key, const Fence *token, const IdemLostClaim *lost)
{
	char	   *key_s = text_to_cstring(key);
	char	   *token_s = FenceToCString(token);
	char	   *detail;
	Relation	rel;

	if (!lost->exists)
		detail = psprintf("Idempotency key \"%s\" does not exist or has expired.",
						  key_s);
	else
	{
		bool		same = lost->claim != NULL &&
			FenceCmp(lost->claim, token) == 0;

		if (strcmp(lost->state, "done") == 0)
			detail = same ?
				pstrdup("The claim has already completed the key.") :
				psprintf("The key was completed under claim %s.",
						 FenceToCString(lost->claim));
		else if (!same)
			detail = lost->claim == NULL ?
				pstrdup("The key has no claim.") :
				psprintf("The key's current claim is %s.",
						 FenceToCString(lost->claim));
		else
			detail = pstrdup("The claim was abandoned.");
	}

	rel = relation_openrv_extended(makeRangeVar("fencing", "idempotency_keys", -1),
								   AccessShareLock, true);
	CountOutcome(FENCING_IDEM_CLAIM_TAKEN_OVER);
	ereport(ERROR,
			(errcode(ERRCODE_STALE_FENCE_TOKEN),
			 FencingErrReason(FENCING_REASON_CLAIM_TAKEN_OVER),
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
	/*
	 * Lock the table as the statements will, first: an ALTER EXTENSION
	 * UPDATE that committed meanwhile is then seen before the statements'
	 * form (with or without owner) is chosen.
	 */
	LockRelationOid(IdemGetTable()->relid, RowExclusiveLock);
	(void) IdemGetTable();
	FencingSpiConnect();
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
 * Open the table for a direct write; false when it does not qualify (then
 * nothing is left open).  The arbiter must be the primary key on key.
 */
static bool
IdemOpenDirect(IdemTableInfo *t, DirectTable *dt)
{
	Relation	rel;
	IndexInfo  *pk;

	if (!t->direct_shape)
		return false;
	rel = table_open(t->relid, RowExclusiveLock);

	/*
	 * Locking it processed the invalidations of whatever committed before:
	 * the shape must still be the one the tuples are built for.
	 */
	t = IdemGetTable();
	if (!t->direct_shape || t->relid != RelationGetRelid(rel) ||
		t->natts != RelationGetDescr(rel)->natts ||
		!FencingDirectTableOpen(rel, InvalidOid, IDEM_NUM_INDEXES, dt))
	{
		table_close(rel, RowExclusiveLock);
		return false;
	}
	pk = dt->index_info[dt->arbiter];
	if (pk->ii_NumIndexAttrs != 1 ||
		pk->ii_IndexAttrNumbers[0] != t->attnum[IC_KEY])
	{
		FencingDirectTableClose(dt);
		table_close(rel, RowExclusiveLock);
		return false;
	}
	return true;
}

/* Close what IdemOpenDirect opened; the locks stay until the end. */
static void
IdemCloseDirect(DirectTable *dt)
{
	Relation	rel = dt->rel;

	FencingDirectTableClose(dt);
	table_close(rel, NoLock);
}

/*
 * idem_begin()'s common case without SPI: insert the key's row, claim
 * (E, 1), unless the key has a row.  The epoch is drawn first, as the SPI
 * statement draws it in VALUES.  Returns IDEM_DIRECT_DONE with *claim set,
 * IDEM_DIRECT_EXISTS, IDEM_DIRECT_BUSY (no wait, another transaction is
 * inserting the key) or IDEM_DIRECT_UNAVAILABLE.
 */
static IdemDirectResult
IdemDirectStart(text *key, bytea *hash, TimestampTz now,
				TimestampTz locked_until, TimestampTz expires_at,
				Oid owner, bool wait, Fence *claim)
{
	IdemTableInfo *t = IdemGetTable();
	DirectTable dt;
	TupleDesc	desc;
	Datum	   *values;
	bool	   *nulls;
	HeapTuple	tup;
	ItemPointerData conflict;
	IdemDirectResult result = IDEM_DIRECT_UNAVAILABLE;

	if (!IdemOpenDirect(t, &dt))
		return IDEM_DIRECT_UNAVAILABLE;

	desc = RelationGetDescr(dt.rel);
	values = palloc0(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	memset(nulls, true, sizeof(bool) * desc->natts);

	claim->epoch = nextval_internal(t->seqid, false);
	claim->counter = 1;

#define SET_COLUMN(c, v) \
	do { values[t->attnum[c] - 1] = (v); nulls[t->attnum[c] - 1] = false; } while (0)
	SET_COLUMN(IC_KEY, PointerGetDatum(key));
	SET_COLUMN(IC_REQUEST_HASH, PointerGetDatum(hash));
	SET_COLUMN(IC_STATE, CStringGetTextDatum("running"));
	SET_COLUMN(IC_CLAIM, FencePGetDatum(claim));
	SET_COLUMN(IC_LOCKED_UNTIL, TimestampTzGetDatum(locked_until));
	SET_COLUMN(IC_EXPIRES_AT, TimestampTzGetDatum(expires_at));
	SET_COLUMN(IC_CREATED_AT, TimestampTzGetDatum(now));
	SET_COLUMN(IC_UPDATED_AT, TimestampTzGetDatum(now));
	if (t->has_owner)
		SET_COLUMN(IC_OWNER, ObjectIdGetDatum(owner));
#undef SET_COLUMN

	tup = heap_form_tuple(desc, values, nulls);
	switch (FencingDirectInsert(&dt, tup, wait, &conflict))
	{
		case DIRECT_INSERTED:
			IdemRememberRow(dt.rel, key, &tup->t_self);
			result = IDEM_DIRECT_DONE;
			break;
		case DIRECT_CONFLICT:
			result = IDEM_DIRECT_EXISTS;
			break;
		case DIRECT_BUSY:
			result = IDEM_DIRECT_BUSY;
			break;
	}
	heap_freetuple(tup);
	IdemCloseDirect(&dt);
	return result;
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
	bool		direct = true;
	bool		connected = false;
	Oid			caller_id = GetUserId();
	int			attempt;
	FencingSavedUser caller;

	/*
	 * Normally one round: insert, or find the row.  A row deleted by
	 * idem_purge() between the two sends us round again.
	 */
	for (attempt = 0; outcome == NULL; attempt++)
	{
		Datum		args[6];
		Datum		resume_args[4];
		bool		isnull;
		bool		locked;
		bool		exists = false;
		bytea	   *row_hash;
		char	   *state;
		Datum		lu;
		bool		lu_null;
		bool		owner_null;
		Oid			owner;

		recovery_point_null = true;
		result_null = true;
		if (attempt >= 10)
			elog(ERROR, "idempotency key \"%s\" keeps disappearing",
				 text_to_cstring(key));

		now = GetCurrentTimestamp();
		locked_until = AddInterval(now, lease);
		expires_at = AddInterval(now, retention);

		if (direct)
		{
			Fence	   *new_claim = palloc(sizeof(Fence));

			switch (IdemDirectStart(key, hash, now, locked_until, expires_at,
									caller_id, wait, new_claim))
			{
				case IDEM_DIRECT_DONE:
					outcome = "started";
					claim = FencePGetDatum(new_claim);
					continue;
				case IDEM_DIRECT_EXISTS:
					exists = true;
					break;
				case IDEM_DIRECT_BUSY:
					ReportInProgress(text_to_cstring(key), NULL);
					break;
				case IDEM_DIRECT_UNAVAILABLE:
				default:
					direct = false;
					break;
			}
		}

		if (!connected)
		{
			IdemConnect(&caller);
			connected = true;
		}
		args[0] = PointerGetDatum(key);
		args[1] = PointerGetDatum(hash);
		args[2] = TimestampTzGetDatum(now);
		args[3] = TimestampTzGetDatum(locked_until);
		args[4] = TimestampTzGetDatum(expires_at);
		args[5] = ObjectIdGetDatum(caller_id);

		if (!exists)
		{
			IdemExecuteNoWait(IDEM_Q_INSERT, args, SPI_OK_INSERT_RETURNING,
							  wait, key);
			if (SPI_processed == 1)
			{
				outcome = "started";
				claim = IdemColumn(1, &isnull);
				break;
			}
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

			/* Another role's key: nothing more about it */
			key_s = text_to_cstring(key);
			owner = DatumGetObjectId(IdemColumn(SEL_OWNER, &owner_null));
			CheckKeyOwner(caller_id, key_s, owner_null, owner);

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

	if (connected)
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

		PreventCommandIfReadOnly("fencing.idem_begin()");
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
		CheckRetentionCoversLease(retention, lease);

		funcctx = SRF_FIRSTCALL_INIT();

		/*
		 * The result's row type, built from pg_proc once per backend rather
		 * than on every call (a tenth of the call's cost): it is fixed for
		 * this function OID, which a new CREATE EXTENSION changes.
		 */
		if (idem_begin_tupdesc == NULL ||
			idem_begin_fn_oid != fcinfo->flinfo->fn_oid)
		{
			if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
				elog(ERROR, "return type must be a row type");
			oldcxt = MemoryContextSwitchTo(CacheMemoryContext);
			tupdesc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));
			MemoryContextSwitchTo(oldcxt);
			if (idem_begin_tupdesc != NULL)
				FreeTupleDesc(idem_begin_tupdesc);
			idem_begin_tupdesc = tupdesc;
			idem_begin_fn_oid = fcinfo->flinfo->fn_oid;
		}
		tupdesc = idem_begin_tupdesc;

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

/* The arguments of a claim update beyond key and token. */
typedef struct IdemClaimArgs
{
	Datum		recovery_point; /* checkpoint */
	bool		recovery_point_null;
	Interval   *lease;			/* checkpoint; NULL: keep its length */
	Datum		result;			/* complete */
	bool		result_null;
} IdemClaimArgs;

/*
 * A snapshot that sees what this transaction has written so far: a new
 * one under READ COMMITTED (registered: PostgreSQL 18 asserts so in every
 * MVCC visibility check), the transaction's (with the current command)
 * otherwise; *pushed says which of the two IdemSnapshotEnd() must undo.
 */
static Snapshot
IdemSnapshotBegin(bool *pushed)
{
	CommandCounterIncrement();
	if (!IsolationUsesXactSnapshot())
	{
		*pushed = false;
		return RegisterSnapshot(GetTransactionSnapshot());
	}
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();
	*pushed = true;
	return GetActiveSnapshot();
}

static void
IdemSnapshotEnd(Snapshot snapshot, bool pushed)
{
	if (pushed)
		PopActiveSnapshot();
	else
		UnregisterSnapshot(snapshot);
}

/*
 * A claim update (checkpoint, complete, abandon) without SPI: find the
 * key's row, check the caller may use it (42501) and that token is its
 * running claim, and update it; what the SPI statements do.  Returns
 * IDEM_DIRECT_DONE, IDEM_DIRECT_LOST with *lost filled (SF001 to raise),
 * or IDEM_DIRECT_UNAVAILABLE.
 */
static IdemDirectResult
IdemDirectClaimUpdate(IdemClaimOp op, text *key, const Fence *token,
					  TimestampTz now, const IdemClaimArgs *a,
					  IdemLostClaim *lost)
{
	IdemTableInfo *t = IdemGetTable();
	DirectTable dt;
	TupleDesc	desc;
	Datum		keyval = PointerGetDatum(key);
	Datum	   *values;
	bool	   *nulls;
	bool	   *replace;
	int			attempt;
	IdemDirectResult result = IDEM_DIRECT_UNAVAILABLE;

	if (!IdemOpenDirect(t, &dt))
		return IDEM_DIRECT_UNAVAILABLE;

	desc = RelationGetDescr(dt.rel);
	values = palloc(sizeof(Datum) * desc->natts);
	nulls = palloc(sizeof(bool) * desc->natts);
	replace = palloc(sizeof(bool) * desc->natts);

	for (attempt = 0;; attempt++)
	{
		bool		pushed;
		bool		found = false;
		Snapshot	snapshot;
		HeapTuple	oldtup;
		HeapTuple	newtup;
		bool		shouldfree;
		ItemPointerData tid;
		Fence	   *claim;
		TimestampTz expires_at;
		TM_Result	tmres;

		/* the row this transaction wrote for the key, or the index's */
		snapshot = IdemSnapshotBegin(&pushed);
		if (attempt == 0 && IdemHintFor(dt.rel, key) &&
			FencingDirectFetchTid(&dt, &idem_hint.tid, snapshot))
		{
			bool		isnull;

			found = IdemKeyEquals(slot_getattr(dt.slot, t->attnum[IC_KEY],
											   &isnull), key);
		}
		if (!found)
			found = FencingDirectFetch(&dt, &keyval, snapshot);
		IdemSnapshotEnd(snapshot, pushed);
		if (!found)
		{
			lost->exists = false;
			result = IDEM_DIRECT_LOST;
			break;
		}
		tid = dt.slot->tts_tid;
		oldtup = ExecFetchSlotHeapTuple(dt.slot, false, &shouldfree);
		heap_deform_tuple(oldtup, desc, values, nulls);

#define COL(c)		values[t->attnum[c] - 1]
#define COLNULL(c)	nulls[t->attnum[c] - 1]
		expires_at = DatumGetTimestampTz(COL(IC_EXPIRES_AT));
		if (expires_at <= now)
		{
			lost->exists = false;
			result = IDEM_DIRECT_LOST;
			break;
		}
		if (t->has_owner)
			CheckKeyOwner(GetUserId(), text_to_cstring(key),
						  COLNULL(IC_OWNER), DatumGetObjectId(COL(IC_OWNER)));

		claim = DatumGetFenceP(COL(IC_CLAIM));
		if (FenceCmp(claim, token) != 0 || COLNULL(IC_LOCKED_UNTIL) ||
			strcmp(TextDatumGetCString(COL(IC_STATE)), "running") != 0)
		{
			lost->exists = true;
			lost->state = TextDatumGetCString(COL(IC_STATE));
			lost->claim = FenceCopy(claim);
			result = IDEM_DIRECT_LOST;
			break;
		}

		/* the new version: what the SPI statement of op sets */
		memset(replace, false, sizeof(bool) * desc->natts);
#define SET(c, v, isnull) \
	do { COL(c) = (v); COLNULL(c) = (isnull); replace[t->attnum[c] - 1] = true; } while (0)
		switch (op)
		{
			case IDEM_OP_CHECKPOINT:
				{
					Interval   *lease = a->lease;
					TimestampTz locked_until;

					if (lease == NULL)
						lease = DatumGetIntervalP(DirectFunctionCall2(timestamp_mi,
																	  COL(IC_LOCKED_UNTIL),
																	  COL(IC_UPDATED_AT)));
					locked_until = AddInterval(now, lease);
					if (!a->recovery_point_null)
						SET(IC_RECOVERY_POINT, a->recovery_point, false);
					SET(IC_LOCKED_UNTIL, TimestampTzGetDatum(locked_until), false);
					if (locked_until > expires_at)
						SET(IC_EXPIRES_AT, TimestampTzGetDatum(locked_until), false);
					break;
				}
			case IDEM_OP_COMPLETE:
				SET(IC_STATE, CStringGetTextDatum("done"), false);
				SET(IC_RESULT, a->result, a->result_null);
				SET(IC_LOCKED_UNTIL, (Datum) 0, true);
				break;
			case IDEM_OP_ABANDON:
				SET(IC_LOCKED_UNTIL, (Datum) 0, true);
				break;
		}
		SET(IC_UPDATED_AT, TimestampTzGetDatum(now), false);
#undef SET
#undef COL
#undef COLNULL

		newtup = heap_modify_tuple(oldtup, desc, values, nulls, replace);
		tmres = FencingDirectUpdate(&dt, &tid, newtup);
		/* a HOT update keeps the chain's root, else the new row is one */
		if (tmres == TM_Ok && !HeapTupleIsHeapOnly(newtup))
			IdemRememberRow(dt.rel, key, &newtup->t_self);
		heap_freetuple(newtup);
		if (shouldfree)
			heap_freetuple(oldtup);
		if (tmres == TM_Ok)
		{
			result = IDEM_DIRECT_DONE;
			break;
		}
		if (tmres != TM_Updated && tmres != TM_Deleted)
			elog(ERROR, "unexpected result %d updating idempotency key \"%s\"",
				 (int) tmres, text_to_cstring(key));
		/* changed meanwhile by a transaction that has committed */
		if (IsolationUsesXactSnapshot())
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
		/* READ COMMITTED: decide again on the newest version */
	}

	IdemCloseDirect(&dt);
	return result;
}

/*
 * Apply one of the claim updates (checkpoint, complete, abandon) to the
 * key's row: 42501 when the key belongs to another role, SF001 when token
 * is not its current running claim.
 */
static void
IdemUpdateClaim(FunctionCallInfo fcinfo, IdemClaimOp op,
				const IdemClaimArgs *a)
{
	text	   *key;
	Fence	   *token;
	TimestampTz now;
	Datum		args[6];
	char		nulls[6];
	int			nargs = 4;
	IdemQuery	q;
	Oid			caller_id = GetUserId();
	IdemLostClaim lost;
	FencingSavedUser caller;
	bool		isnull;
	bool		owner_null;
	Oid			owner;

	PreventCommandIfReadOnly(op == IDEM_OP_CHECKPOINT ? "fencing.idem_checkpoint()" :
							 op == IDEM_OP_COMPLETE ? "fencing.idem_complete()" :
							 "fencing.idem_abandon()");
	RequireArgument(fcinfo, 0, "idempotency key");
	RequireArgument(fcinfo, 1, "token");
	key = PG_GETARG_TEXT_PP(0);
	token = PG_GETARG_FENCE_P(1);
	CheckKey(key);

	now = GetCurrentTimestamp();
	memset(&lost, 0, sizeof(lost));
	switch (IdemDirectClaimUpdate(op, key, token, now, a, &lost))
	{
		case IDEM_DIRECT_DONE:
			return;
		case IDEM_DIRECT_LOST:
			ReportLostClaim(key, token, &lost);
			break;
		default:
			break;
	}

	/* the table does not qualify for the direct path: SPI */
	args[0] = PointerGetDatum(key);
	args[1] = Int64GetDatum(token->epoch);
	args[2] = Int64GetDatum(token->counter);
	args[3] = TimestampTzGetDatum(now);
	memset(nulls, ' ', sizeof(nulls));
	switch (op)
	{
		case IDEM_OP_CHECKPOINT:
			q = IDEM_Q_CHECKPOINT;
			args[4] = a->recovery_point;
			nulls[4] = a->recovery_point_null ? 'n' : ' ';
			args[5] = PointerGetDatum(a->lease);
			nulls[5] = a->lease == NULL ? 'n' : ' ';
			nargs = 6;
			break;
		case IDEM_OP_COMPLETE:
			q = IDEM_Q_COMPLETE;
			args[4] = a->result;
			nulls[4] = a->result_null ? 'n' : ' ';
			nargs = 5;
			break;
		case IDEM_OP_ABANDON:
		default:
			q = IDEM_Q_ABANDON;
			break;
	}
	(void) nargs;

	IdemConnect(&caller);
	IdemExecute(q, args, nulls, SPI_OK_UPDATE_RETURNING);
	if (SPI_processed == 1)
	{
		/*
		 * Updated: unless the caller may use the key, the error undoes
		 * the update with the (sub)transaction.
		 */
		owner = DatumGetObjectId(IdemColumn(1, &owner_null));
		CheckKeyOwner(caller_id, text_to_cstring(key), owner_null, owner);
		IdemFinish(&caller);
		return;
	}

	/* Not the running claim: look the row up to say why, to its owner */
	IdemExecute(IDEM_Q_LOOKUP, args, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0 ||
		DatumGetTimestampTz(IdemColumn(LOOKUP_EXPIRES_AT, &isnull)) <= now)
		lost.exists = false;
	else
	{
		Datum		c;

		owner = DatumGetObjectId(IdemColumn(LOOKUP_OWNER, &owner_null));
		CheckKeyOwner(caller_id, text_to_cstring(key), owner_null, owner);
		lost.exists = true;
		lost.state = TextDatumGetCString(IdemColumn(LOOKUP_STATE, &isnull));
		c = IdemColumn(LOOKUP_CLAIM, &isnull);
		lost.claim = isnull ? NULL : FenceCopy(DatumGetFenceP(c));
	}
	FencingRestoreUser(&caller);
	ReportLostClaim(key, token, &lost);
}

/*
 * fencing.idem_checkpoint(key, token, recovery_point, lease) → void
 *
 * Record progress and renew the lease (by lease, or by the lease's
 * current length when NULL).  A NULL recovery_point keeps the last one.
 * The key's expiry moves out with the lease if need be: a key never
 * expires while its claim's lease runs.
 */
Datum
idem_checkpoint(PG_FUNCTION_ARGS)
{
	IdemClaimArgs a;

	memset(&a, 0, sizeof(a));
	a.recovery_point_null = PG_ARGISNULL(2);
	if (!a.recovery_point_null)
		a.recovery_point = PG_GETARG_DATUM(2);
	if (!PG_ARGISNULL(3))
	{
		a.lease = PG_GETARG_INTERVAL_P(3);
		CheckPositiveInterval(a.lease, "lease");
	}

	IdemUpdateClaim(fcinfo, IDEM_OP_CHECKPOINT, &a);
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
	IdemClaimArgs a;

	memset(&a, 0, sizeof(a));
	a.result_null = PG_ARGISNULL(2);
	if (!a.result_null)
		a.result = PG_GETARG_DATUM(2);

	IdemUpdateClaim(fcinfo, IDEM_OP_COMPLETE, &a);
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
	IdemClaimArgs a;

	memset(&a, 0, sizeof(a));
	a.recovery_point_null = true;
	a.result_null = true;
	IdemUpdateClaim(fcinfo, IDEM_OP_ABANDON, &a);
	PG_RETURN_VOID();
}
