/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  The guard triggers of a protected table: fencing.guard(), a BEFORE
 *	  ROW trigger for INSERT, UPDATE and DELETE, and
 *	  fencing.guard_truncate(), a BEFORE TRUNCATE statement trigger.
 *
 * Being a row trigger enabled ALWAYS, the guard sees every write path:
 * plain DML, COPY, ON CONFLICT, MERGE, writes from functions and other
 * triggers, FK cascades, and sessions with session_replication_role =
 * replica.  Only the logical replication apply worker is let through (its
 * publisher checked the writes already); its tokens still advance the key
 * and table scope fences of this server.
 *
 * The check runs on the row version the executor has locked (OLD is the
 * newest version under READ COMMITTED; REPEATABLE READ fails with 40001 on
 * a concurrent update), and in key scope on the scope row that
 * ScopeCheckAndAdvance locks, so it is atomic with the write.
 *
 * Hot path: settings come from the per-relation cache (guard_config.c),
 * the token setting is parsed when it is set, and all per-row allocations
 * happen in the executor's per-tuple memory context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "replication/logicalworker.h"
#include "storage/itemptr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "fencing.h"

PG_FUNCTION_INFO_V1(fencing_guard);
PG_FUNCTION_INFO_V1(fencing_guard_truncate);

/*
 * An UPDATE that moves a row to another partition runs as BEFORE UPDATE
 * and BEFORE DELETE on the old partition, then BEFORE INSERT on the new
 * one.  It is one write: the UPDATE is checked, and the DELETE and INSERT
 * that follow it for the same row are let through.
 *
 * The state outlives the statement (an UPDATE that did not move its row,
 * or failed after the check, leaves it behind), so it is tied to the
 * (sub)transaction that set it: command ids start again at 0 in every
 * transaction and are not rolled back with a savepoint, so they alone
 * cannot tell a later write from the move.  The DELETE is matched by its
 * row version, not by command id, because a user trigger that runs SQL
 * before ours advances the command counter; the INSERT, which carries no
 * row version to match, must come in the same command as the DELETE.
 */
typedef enum PendingMoveState
{
	MOVE_NONE,
	MOVE_AFTER_UPDATE,			/* checked UPDATE of a partition's row */
	MOVE_AFTER_DELETE			/* and its DELETE: the INSERT comes next */
} PendingMoveState;

static struct
{
	PendingMoveState state;
	Oid			relid;			/* the partition updated */
	ItemPointerData tid;		/* the row version updated */
	Oid			root;			/* the protected table of the tree */
	LocalTransactionId lxid;	/* the transaction that updated it */
	SubTransactionId subxid;	/* and its subtransaction */
	CommandId	cid;			/* the command of the DELETE */
} pending_move = {MOVE_NONE};

#if PG_VERSION_NUM >= 170000
#define CurrentLocalTransactionId() (MyProc->vxid.lxid)
#else
#define CurrentLocalTransactionId() (MyProc->lxid)
#endif

/* Is the pending move one of this (sub)transaction? */
static inline bool
MoveOfThisTransaction(void)
{
	return pending_move.lxid == CurrentLocalTransactionId() &&
		pending_move.subxid == GetCurrentSubTransactionId();
}

/* Does this DELETE or INSERT continue a checked cross-partition UPDATE? */
static bool
ContinuesMove(TriggerData *trigdata, GuardConfig *cfg)
{
	bool		match = false;

	if (pending_move.state == MOVE_NONE)
		return false;
	if (!MoveOfThisTransaction() ||
		pending_move.root != cfg->protected_relid)
		match = false;
	else if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
	{
		match = pending_move.state == MOVE_AFTER_UPDATE &&
			pending_move.relid == RelationGetRelid(trigdata->tg_relation) &&
			ItemPointerEquals(&pending_move.tid, &trigdata->tg_trigtuple->t_self);
		if (match)
		{
			pending_move.state = MOVE_AFTER_DELETE;
			pending_move.cid = GetCurrentCommandId(false);
			return true;
		}
	}
	else if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		match = pending_move.state == MOVE_AFTER_DELETE &&
			pending_move.cid == GetCurrentCommandId(false);
	pending_move.state = MOVE_NONE;
	return match;
}

/* Read the fence column of tuple into *out; false when it is NULL. */
static inline bool
GetFenceColumn(GuardConfig *cfg, HeapTuple tuple, TupleDesc desc, Fence *out)
{
	bool		isnull;
	Datum		d = heap_getattr(tuple, cfg->fence_attnum, desc, &isnull);

	if (isnull)
		return false;
	*out = *DatumGetFenceP(d);
	return true;
}

/* Did this transaction write this row version? */
static inline bool
WrittenByUs(HeapTuple tuple)
{
	return TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
}

/* The name of the write, for messages. */
static const char *
WriteName(TriggerEvent event)
{
	if (TRIGGER_FIRED_BY_INSERT(event))
		return "INSERT";
	if (TRIGGER_FIRED_BY_UPDATE(event))
		return "UPDATE";
	return "DELETE";
}

/* Check a key or table scope; raise SF001 when the token lost. */
static void
CheckScope(GuardConfig *cfg, Relation rel, const char *key, const Fence *token)
{
	Fence		lost_to;

	if (!ScopeCheckAndAdvance(cfg->scope_name, key, token, cfg->strict, &lost_to))
	{
		FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_STALE);
		ReportStaleToken(token, &lost_to, rel,
						 psprintf("scope \"%s\" key %s", cfg->scope_name, key));
	}
}

/*
 * Carry the token of a replicated write into this server's key or table
 * scope fences, never lowering them.
 *
 * The apply worker is not checked (the publisher did that), but in key and
 * table scope the fence lives in fencing.scopes, which does not replicate:
 * without this, a local writer on the subscriber would only have to beat
 * the subscriber's own writes.  Row scope needs nothing: the fence column
 * replicates with the row.
 */
static void
FollowReplicatedWrite(Relation rel, HeapTuple oldtup, HeapTuple newtup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	GuardConfig *cfg;
	Fence		token;
	Fence		lost_to;
	char	   *oldkey;
	char	   *newkey;

	if (newtup == NULL)
		return;					/* a DELETE carries no token */
	cfg = GetGuardConfig(rel);
	if (cfg->nkeys < 0 || !GetFenceColumn(cfg, newtup, desc, &token))
		return;

	newkey = BuildScopeKey(cfg, newtup, desc);
	oldkey = oldtup ? BuildScopeKey(cfg, oldtup, desc) : NULL;
	if (oldkey != NULL && strcmp(oldkey, newkey) != 0)
	{
		/* the order of CheckScope's callers, against deadlocks */
		if (strcmp(oldkey, newkey) > 0)
		{
			char	   *swap = oldkey;

			oldkey = newkey;
			newkey = swap;
		}
		(void) ScopeCheckAndAdvance(cfg->scope_name, oldkey, &token, true,
									&lost_to);
	}
	/* false only when the scope is already at or past the token */
	(void) ScopeCheckAndAdvance(cfg->scope_name, newkey, &token, true,
								&lost_to);
}

/*
 * fencing.guard(): check the token of a row write against the fence it
 * must beat, and write the accepted token into the fence column.
 */
Datum
fencing_guard(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	Relation	rel;
	TupleDesc	desc;
	GuardConfig *cfg;
	HeapTuple	oldtup = NULL;
	HeapTuple	newtup = NULL;
	HeapTuple	result;
	const Fence *setting;
	Fence		column;
	bool		have_column = false;
	Fence		token;
	bool		have_token;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencing.guard() was not called by trigger manager")));
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_BEFORE(event) || !TRIGGER_FIRED_FOR_ROW(event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencing.guard() must be fired BEFORE ROW")));

	rel = trigdata->tg_relation;
	desc = RelationGetDescr(rel);
	if (TRIGGER_FIRED_BY_INSERT(event))
		result = newtup = trigdata->tg_trigtuple;
	else if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		oldtup = trigdata->tg_trigtuple;
		result = newtup = trigdata->tg_newtuple;
	}
	else
		result = oldtup = trigdata->tg_trigtuple;

	/* the publisher checked what the apply worker replays */
	if (IsLogicalWorker())
	{
		FollowReplicatedWrite(rel, oldtup, newtup);
		return PointerGetDatum(result);
	}

	cfg = GetGuardConfig(rel);

	if (!TRIGGER_FIRED_BY_UPDATE(event) && ContinuesMove(trigdata, cfg))
		return PointerGetDatum(result);
	pending_move.state = MOVE_NONE;

	if (FencingBypass)
	{
		FencingStatsCount(cfg->stats, FENCING_STAT_BYPASSED);
		ereport(LOG,
				(errmsg("fencing bypass: %s on table \"%s\" let through without a fence check",
						WriteName(event), RelationGetRelationName(rel)),
				 errtable(rel)));
		return PointerGetDatum(result);
	}

	/* the token: the setting, else the fence column, else none */
	setting = FencingTokenSetting();
	if (TRIGGER_FIRED_BY_INSERT(event))
		have_column = GetFenceColumn(cfg, newtup, desc, &column);
	else if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		Fence		old;
		bool		have_old = GetFenceColumn(cfg, oldtup, desc, &old);

		have_column = GetFenceColumn(cfg, newtup, desc, &column);
		if (have_column && have_old && FenceCmp(&old, &column) == 0 &&
			!WrittenByUs(oldtup))
			have_column = false;	/* not changed: carries no token */
	}
	if (setting != NULL && have_column && FenceCmp(setting, &column) != 0)
	{
		FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_MISSING);
		ReportConflictingTokens(setting, &column, rel);
	}
	have_token = setting != NULL || have_column;
	if (setting != NULL)
		token = *setting;
	else if (have_column)
		token = column;

	if (!have_token)
	{
		/* row scope has nothing to check a new row against, save a lease */
		if (TRIGGER_FIRED_BY_INSERT(event) && cfg->nkeys < 0 && cfg->lease == NULL)
		{
			FencingStatsCount(cfg->stats, FENCING_STAT_ACCEPTED);
			return PointerGetDatum(result);
		}
		FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_MISSING);
		ReportTokenRequired(rel, WriteName(event));
	}

	/* with a lease, only its current, live token may write (lease.c) */
	if (cfg->lease != NULL && !LeaseHeldWith(cfg->lease, &token))
	{
		FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_STALE);
		ReportLeaseLost(cfg->lease, &token, rel);
	}

	if (cfg->nkeys < 0)
	{
		/* row scope: beat the fence of the row version being replaced */
		Fence		old;

		if (oldtup != NULL && GetFenceColumn(cfg, oldtup, desc, &old))
		{
			int			cmp = FenceCmp(&token, &old);

			if (cmp < 0 || (cmp == 0 && cfg->strict && !WrittenByUs(oldtup)))
			{
				FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_STALE);
				ReportStaleToken(&token, &old, rel, NULL);
			}
		}
	}
	else
	{
		/* key or table scope: beat the scope's fence, of both keys on a move */
		char	   *oldkey = oldtup ? BuildScopeKey(cfg, oldtup, desc) : NULL;
		char	   *newkey = newtup ? BuildScopeKey(cfg, newtup, desc) : NULL;

		if (oldkey != NULL && newkey != NULL && strcmp(oldkey, newkey) != 0)
		{
			/* a fixed order, so that two moves cannot deadlock on it */
			if (strcmp(oldkey, newkey) > 0)
			{
				char	   *swap = oldkey;

				oldkey = newkey;
				newkey = swap;
			}
			CheckScope(cfg, rel, oldkey, &token);
			CheckScope(cfg, rel, newkey, &token);
		}
		else
			CheckScope(cfg, rel, oldkey ? oldkey : newkey, &token);
	}

	/* write the accepted token into the row */
	if (newtup != NULL && (!have_column || FenceCmp(&column, &token) != 0))
	{
		int			attnum = cfg->fence_attnum;
		Datum		value = FencePGetDatum(&token);
		bool		isnull = false;

		result = heap_modify_tuple_by_cols(newtup, desc, 1, &attnum, &value, &isnull);
	}

	if (TRIGGER_FIRED_BY_UPDATE(event) && rel->rd_rel->relispartition)
	{
		pending_move.state = MOVE_AFTER_UPDATE;
		pending_move.relid = RelationGetRelid(rel);
		pending_move.tid = oldtup->t_self;
		pending_move.root = cfg->protected_relid;
		pending_move.lxid = CurrentLocalTransactionId();
		pending_move.subxid = GetCurrentSubTransactionId();
	}

	FencingStatsCount(cfg->stats, FENCING_STAT_ACCEPTED);
	return PointerGetDatum(result);
}

/* fencing.guard_truncate(): TRUNCATE of a protected table is refused. */
Datum
fencing_guard_truncate(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	Relation	rel;
	GuardConfig *cfg;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencing.guard_truncate() was not called by trigger manager")));
	if (!TRIGGER_FIRED_BY_TRUNCATE(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencing.guard_truncate() must be fired for TRUNCATE")));
	if (IsLogicalWorker())
		return PointerGetDatum(NULL);

	rel = trigdata->tg_relation;
	cfg = GetGuardConfig(rel);
	FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_MISSING);
	ereport(ERROR,
			(errcode(ERRCODE_FENCE_TOKEN_REQUIRED),
			 errmsg("cannot truncate protected table \"%s\"",
					RelationGetRelationName(rel)),
			 errdetail("TRUNCATE would remove every row and its fence at once, with no token to check."),
			 errhint("Call fencing.unprotect('%s') first if you really mean it.",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(cfg->protected_relid)),
												get_rel_name(cfg->protected_relid))),
			 errtable(rel)));
	PG_RETURN_NULL();			/* not reached */
}
