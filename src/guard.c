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
 * FencingScopeCheckAndAdvance locks, so it is atomic with the write.
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
#include "miscadmin.h"
#include "replication/logicalworker.h"
#include "storage/itemptr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/acl.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "cluster.h"
#include "compat.h"
#include "fence.h"
#include "guard_config.h"
#include "lease.h"
#include "provenance.h"
#include "scopes.h"
#include "scopes_1_0.h"
#include "settings.h"
#include "stats.h"
#include "visibility.h"

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

/*
 * One token, one transaction: the relations and commands in which this
 * transaction's guard accepted writes, (relid, command id).  A row version
 * that this transaction wrote carries a token the guard accepted for it
 * only when it was written in such a command: a table rewrite, a write
 * before protect() or under fencing.bypass leave row versions of this
 * transaction whose fences no guard checked.
 */
typedef struct AcceptedWriteKey
{
	Oid			relid;
	CommandId	cid;
} AcceptedWriteKey;

/*
 * Most transactions write a few relations in a few commands: those pairs
 * sit in a small array, and only a transaction with more of them builds a
 * hash table (in TopTransactionContext, gone with the transaction).
 */
#define ACCEPTED_WRITES_INLINE	8

static LocalTransactionId accepted_writes_lxid = InvalidLocalTransactionId;
static AcceptedWriteKey accepted_inline[ACCEPTED_WRITES_INLINE];
static int	accepted_ninline = 0;
static HTAB *accepted_writes = NULL;

/*
 * The pair recorded last, wherever it went: a COPY in key scope records
 * many (each new key's scope row is written in a command of its own, see
 * scopes.c), and the next row must not search them all.
 */
static AcceptedWriteKey accepted_last;
static bool accepted_have_last = false;

/* Forget the pairs of an earlier transaction. */
static inline void
AcceptedWritesOfThisTransaction(void)
{
	if (accepted_writes_lxid != CurrentLocalTransactionId())
	{
		accepted_writes_lxid = CurrentLocalTransactionId();
		accepted_ninline = 0;
		accepted_writes = NULL;
		accepted_have_last = false;
	}
}

/* Is (relid, cid) recorded? */
static bool
AcceptedWriteKnown(const AcceptedWriteKey *key)
{
	int			i;

	for (i = accepted_ninline - 1; i >= 0; i--)
		if (accepted_inline[i].relid == key->relid &&
			accepted_inline[i].cid == key->cid)
			return true;
	return accepted_writes != NULL &&
		hash_search(accepted_writes, key, HASH_FIND, NULL) != NULL;
}

/*
 * Record that the guard accepted a write of rel in command cid: the
 * command as the guard was called, which is the command the row version
 * is written in.  Not the command after the check: in key or table scope
 * the check writes the scope row in a command of its own (scopes.c), so a
 * row checked there would never be known as the guard's.
 */
static void
RememberAcceptedWrite(Relation rel, CommandId cid)
{
	AcceptedWriteKey key;

	AcceptedWritesOfThisTransaction();
	key.relid = RelationGetRelid(rel);
	key.cid = cid;
	/* the usual case: the same statement again */
	if (accepted_have_last &&
		accepted_last.relid == key.relid && accepted_last.cid == key.cid)
		return;
	accepted_last = key;
	accepted_have_last = true;
	if (AcceptedWriteKnown(&key))
		return;
	if (accepted_ninline < ACCEPTED_WRITES_INLINE)
	{
		accepted_inline[accepted_ninline++] = key;
		return;
	}
	if (accepted_writes == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(AcceptedWriteKey);
		ctl.entrysize = sizeof(AcceptedWriteKey);
		ctl.hcxt = TopTransactionContext;
		accepted_writes = hash_create("fencing accepted writes", 64, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	(void) hash_search(accepted_writes, &key, HASH_ENTER, NULL);
}

/*
 * Did the guard of this transaction write this row version of rel, so
 * that its fence is a token the guard accepted for this very row?
 */
static bool
GuardWroteVersion(Relation rel, HeapTuple tuple)
{
	AcceptedWriteKey key;

	if (!TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)))
		return false;
	AcceptedWritesOfThisTransaction();
	key.relid = RelationGetRelid(rel);
	key.cid = HeapTupleHeaderGetCmin(tuple->t_data);
	return AcceptedWriteKnown(&key);
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

/*
 * Count a refused token in the table's statistics by its reason: equal to
 * the fence it lost to (strict: already used), or older (stale).
 */
static inline void
CountLost(GuardConfig *cfg, const Fence *token, const Fence *lost_to)
{
	FencingStatsCount(cfg->stats, FenceCmp(token, lost_to) == 0 ?
					  FENCING_STAT_REJECTED_ALREADY_USED :
					  FENCING_STAT_REJECTED_STALE);
}

/* The key or table scope a row writes, for CheckScopes() */
typedef struct RowKey
{
	Datum		values[INDEX_MAX_KEYS];
	bool		nulls[INDEX_MAX_KEYS];
} RowKey;

/*
 * Raise SF001 for a token that lost to a scope's key: the key and the
 * fence are shown to writers that may read them (visibility.c).
 */
static void
ReportScopeLost(GuardConfig *cfg, Relation rel, RowKey *key,
				const Fence *token, const Fence *lost_to)
{
	if (!FencingMayReadGuardedKeys(rel, cfg))
		FencingReportStaleTokenHidden(token, rel, cfg->scope_name);
	FencingReportStaleToken(token, lost_to, rel,
					 psprintf("scope \"%s\" key %s", cfg->scope_name,
							  FencingScopeKeyToText(cfg->scope, key->values, key->nulls)));
}

/*
 * Does row security apply to the writer of rel?  Then a refusal of a key
 * it may not see must not come before the policy's own: it is deferred
 * until the row passed (or failed) the policy's WITH CHECK.
 */
static bool
RowSecurityAppliesToWriter(Relation rel)
{
	return rel->rd_rel->relrowsecurity &&
		check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED;
}

/*
 * ReportScopeLost() for a writer that row security applies to: the error
 * is kept (provenance.c) and raised at the next row the guard judges, at
 * the end of the statement or before the commit, whichever comes first.
 * By then the executor has checked this row against the policies' WITH
 * CHECK, whose refusal comes first: a probe with another tenant's key
 * learns nothing from the guard.
 */
static void
DeferScopeLost(GuardConfig *cfg, Relation rel, RowKey *key,
			   const Fence *token, const Fence *lost_to)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		ReportScopeLost(cfg, rel, key, token, lost_to);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FencingDeferError();
	}
	PG_END_TRY();
}

/* Raise SF001 for a token that lost to the fence of the row it writes. */
static void
ReportRowLost(GuardConfig *cfg, Relation rel, const Fence *token,
			  const Fence *lost_to)
{
	if (!FencingMayReadGuardedKeys(rel, cfg))
		FencingReportStaleTokenHidden(token, rel, NULL);
	FencingReportStaleToken(token, lost_to, rel, NULL);
}

/*
 * The keys of a write in key or table scope: the old row's, the new row's,
 * or both when an UPDATE moves the row to another key (then in btree
 * order, so that two moves cannot deadlock on them).  Returns how many.
 */
static int
WriteKeys(GuardConfig *cfg, TupleDesc desc, HeapTuple oldtup, HeapTuple newtup,
		  RowKey *keys)
{
	int			n = 0;

	if (oldtup != NULL)
		FencingScopeKeyOf(cfg->scope, cfg->key_attnums, oldtup, desc, keys[n].values, keys[n].nulls), n++;
	if (newtup != NULL)
	{
		FencingScopeKeyOf(cfg->scope, cfg->key_attnums, newtup, desc, keys[n].values, keys[n].nulls);
		if (n == 0)
			n++;
		else
		{
			int			c = FencingScopeKeyCompare(cfg->scope,
											keys[0].values, keys[0].nulls,
											keys[1].values, keys[1].nulls);

			if (c > 0)
			{
				RowKey		swap = keys[0];

				keys[0] = keys[1];
				keys[1] = swap;
			}
			if (c != 0)
				n++;
		}
	}
	return n;
}

/*
 * Check a key or table scope write; raise SF001 when the token lost.
 * Returns false when the refusal was deferred (row security applies to
 * the writer, see DeferScopeLost): the row must then go on unchanged,
 * and nothing was advanced.
 */
static bool
CheckScopes(GuardConfig *cfg, Relation rel, HeapTuple oldtup,
			HeapTuple newtup, const Fence *token)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Fence		lost_to;

	/* the update from 1.0 committed while we waited: typed storage now */
	if (cfg->legacy_scopes && !FencingLegacyScopesStillHere())
		cfg = FencingGetGuardConfig(rel);

	if (cfg->legacy_scopes)
	{
		/* extension objects at 1.0: text keys (scopes_1_0.c) */
		char	   *oldkey = oldtup ? FencingLegacyScopeKey(cfg, oldtup, desc) : NULL;
		char	   *newkey = newtup ? FencingLegacyScopeKey(cfg, newtup, desc) : NULL;
		char	   *keys[2];
		int			n = 0;
		int			i;

		if (oldkey != NULL)
			keys[n++] = oldkey;
		if (newkey != NULL && (oldkey == NULL || strcmp(oldkey, newkey) != 0))
			keys[n++] = newkey;
		if (n == 2 && strcmp(keys[0], keys[1]) > 0)
		{
			keys[0] = newkey;
			keys[1] = oldkey;
		}
		for (i = 0; i < n; i++)
			if (!FencingLegacyScopeCheckAndAdvance(cfg->scope_name, keys[i], token,
											cfg->strict, &lost_to))
			{
				CountLost(cfg, token, &lost_to);
				if (!FencingMayReadGuardedKeys(rel, cfg))
					FencingReportStaleTokenHidden(token, rel, cfg->scope_name);
				FencingReportStaleToken(token, &lost_to, rel,
								 psprintf("scope \"%s\" key %s",
										  cfg->scope_name, keys[i]));
			}
	}
	else
	{
		RowKey		keys[2];
		int			n = WriteKeys(cfg, desc, oldtup, newtup, keys);
		int			i;

		for (i = 0; i < n; i++)
			if (!FencingScopeCheckAndAdvance(cfg->scope, keys[i].values, keys[i].nulls,
									  token, cfg->strict, &lost_to))
			{
				CountLost(cfg, token, &lost_to);
				if (newtup != NULL && RowSecurityAppliesToWriter(rel))
				{
					DeferScopeLost(cfg, rel, &keys[i], token, &lost_to);
					return false;
				}
				ReportScopeLost(cfg, rel, &keys[i], token, &lost_to);
			}
	}
	return true;
}

/*
 * A replayed row version may not lower (or remove) the fence of the row
 * it replaces: row scope, fence column fence_attnum, the counters of
 * table stats_relid.
 */
static void
FollowRowFence(Relation rel, AttrNumber fence_attnum, Oid stats_relid,
			   HeapTuple oldtup, HeapTuple newtup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Fence		token;
	Fence		current;
	bool		have_token;
	bool		isnull;
	Datum		d;

	if (oldtup == NULL || newtup == NULL)
		return;
	d = heap_getattr(oldtup, fence_attnum, desc, &isnull);
	if (isnull)
		return;
	current = *DatumGetFenceP(d);
	d = heap_getattr(newtup, fence_attnum, desc, &isnull);
	have_token = !isnull;
	if (have_token)
	{
		token = *DatumGetFenceP(d);
		if (FenceCmp(&token, &current) >= 0)
			return;
	}
	if (OidIsValid(stats_relid))
		FencingStatsCount(FencingStatsGetEntry(stats_relid), FENCING_STAT_REJECTED_STALE);
	if (!have_token)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(FENCING_REASON_STALE_TOKEN),
				 errmsg("replicated UPDATE of table \"%s\" would remove a row's fence",
						RelationGetRelationName(rel)),
				 errdetail("The row has accepted fence token %s, and the replicated row version has none.",
						   FenceToCString(&current)),
				 errhint("A fence is never lowered: find out why the publisher wrote this row without a token."),
				 errtable(rel)));
	FencingReportStaleToken(&token, &current, rel, NULL);
}

/*
 * A write that the logical replication apply worker replays: not checked
 * against tokens (the publisher did that), but it never lowers a fence.
 *
 * Row scope: the fence column replicates with the row; a change that
 * would lower it (or empty it) is refused.  Key and table scope: the
 * fences live in this server's scope storage, which does not replicate;
 * the replayed token advances it, so that local writers on the subscriber
 * are fenced against what was replicated, and a token older than the
 * scope's fence is refused.  The refusal is SF001, and PostgreSQL's
 * handling of a failed apply takes over.
 *
 * citus: a shard that a shard transfer fills goes by its trigger's
 * settings (a split's new shards are not in Citus' metadata yet); in key
 * scope the storage shard is filled by a stream of its own, and the
 * replayed transaction waits for it before it commits, a DELETE too
 * (citus_transfer.c, behind cluster.h).
 */
static void
FollowReplicatedWrite(Relation rel, HeapTuple oldtup, HeapTuple newtup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	GuardConfig *cfg;
	Fence		token;
	Fence		current;
	AttrNumber	fence_attnum;
	Oid			stats_relid;

	if (FencingClusterFollowReplay(rel, &fence_attnum, &stats_relid))
	{
		if (fence_attnum != InvalidAttrNumber)
			FollowRowFence(rel, fence_attnum, stats_relid, oldtup, newtup);
		return;
	}
	if (newtup == NULL)
		return;					/* a DELETE carries no token */
	cfg = FencingGetGuardConfig(rel);

	if (cfg->nkeys < 0)
	{
		FollowRowFence(rel, cfg->fence_attnum, cfg->protected_relid, oldtup, newtup);
		return;
	}
	if (!GetFenceColumn(cfg, newtup, desc, &token))
		return;

	if (cfg->legacy_scopes && !FencingLegacyScopesStillHere())
		cfg = FencingGetGuardConfig(rel);
	if (cfg->legacy_scopes)
	{
		Fence		lost_to;
		char	   *key = FencingLegacyScopeKey(cfg, newtup, desc);

		/* 1.0 objects: advance the new key, as 1.0 did */
		(void) FencingLegacyScopeCheckAndAdvance(cfg->scope_name, key, &token, true,
										  &lost_to);
	}
	else
	{
		RowKey		keys[2];
		int			n = WriteKeys(cfg, desc, oldtup, newtup, keys);
		int			i;

		for (i = 0; i < n; i++)
			if (!FencingScopeFollow(cfg->scope, keys[i].values, keys[i].nulls,
							 &token, &current))
			{
				FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_STALE);
				ReportScopeLost(cfg, rel, &keys[i], &token, &current);
			}
	}
}

/*
 * A write that a foreign key's action makes (ON UPDATE/ON DELETE CASCADE,
 * SET NULL, SET DEFAULT: the action's statements run as the referencing
 * table's owner) is refused (42501) unless the role whose change started
 * it may make that write itself: a member of the table's owner, or a
 * role with the privilege.  Otherwise a role with no right on a protected
 * table could move its fences, with its own token, by changing rows of its
 * own table that the protected table references.  Refused rather than
 * judged without that role's token: the write is the role's doing, and a
 * DBA would rather meet a permission error naming the foreign key's
 * starter than a fence token error naming a token nobody set.
 */
static void
CheckForeignKeyAction(GuardConfig *cfg, Relation rel, TriggerEvent event)
{
	Oid			starter = FencingForeignKeyInitiator();
	Oid			relid = OidIsValid(cfg->protected_relid) ?
		cfg->protected_relid : RelationGetRelid(rel);
	AclMode		mode = TRIGGER_FIRED_BY_DELETE(event) ? ACL_DELETE :
		TRIGGER_FIRED_BY_INSERT(event) ? ACL_INSERT : ACL_UPDATE;
	char	   *starter_name;

	if (has_privs_of_role(starter, cfg->table_owner) ||
		pg_class_aclcheck(relid, starter, mode) == ACLCHECK_OK)
		return;
	starter_name = GetUserNameFromId(starter, true);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("a foreign key's action cannot write protected table \"%s\" for role \"%s\"",
					get_rel_name(relid), starter_name ? starter_name : "?"),
			 errdetail("Role \"%s\" changed a row that table \"%s\" references, and the foreign key's action would %s rows of the protected table, which the role may not %s itself; its token would move the table's fences.",
					   starter_name ? starter_name : "?", RelationGetRelationName(rel),
					   WriteName(event), WriteName(event)),
			 errhint("Grant the role %s on table \"%s\" if it may write it, or declare the foreign key ON UPDATE/ON DELETE RESTRICT or NO ACTION.",
					 WriteName(event), get_rel_name(relid)),
			 errtable(rel)));
}

/*
 * The once-per-session WARNING for a write whose token was set for the
 * session (SET without LOCAL, set_config(..., false), a connection
 * option): it stays on the connection, and behind a connection pooler the
 * next client's writes carry it.
 */
static bool session_token_warned = false;

static void
WarnSessionToken(Relation rel, const Fence *token)
{
	session_token_warned = true;
	ereport(WARNING,
			(errcode(ERRCODE_WARNING),
			 errmsg("fencing.token %s was set for the whole session, not for the transaction",
					FenceToCString(token)),
			 errdetail("The write to table \"%s\" is judged by it. A session-level token stays on the connection after the transaction: behind a connection pooler the next client's writes would carry it. This warning is shown once per session.",
					   RelationGetRelationName(rel)),
			 errhint("Set the token for the transaction with SET LOCAL fencing.token = '...' or SELECT fencing.set_token($1).")));
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
	/* the command this row is written in, before a check of ours moves on */
	CommandId	cid = GetCurrentCommandId(false);

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

	/* a refusal deferred for an earlier row (row security) comes first */
	FencingRaiseDeferredError();

	cfg = FencingGetGuardConfig(rel);

	/* a foreign key's action: its starter must be allowed to write rel */
	if (InNoForceRLSOperation())
		CheckForeignKeyAction(cfg, rel, event);

	if (!TRIGGER_FIRED_BY_UPDATE(event) && ContinuesMove(trigdata, cfg))
	{
		/* the moved row carries the token its UPDATE was accepted with */
		if (newtup != NULL)
			RememberAcceptedWrite(rel, cid);
		return PointerGetDatum(result);
	}
	pending_move.state = MOVE_NONE;

	/* the setting as the statement began (55P02 if its code changed it) */
	setting = FencingTokenSetting();
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
	if (TRIGGER_FIRED_BY_INSERT(event))
		have_column = GetFenceColumn(cfg, newtup, desc, &column);
	else if (TRIGGER_FIRED_BY_UPDATE(event))
	{
		Fence		old;
		bool		have_old = GetFenceColumn(cfg, oldtup, desc, &old);

		have_column = GetFenceColumn(cfg, newtup, desc, &column);
		if (have_column && have_old && FenceCmp(&old, &column) == 0 &&
			!GuardWroteVersion(rel, oldtup))
			have_column = false;	/* not changed: carries no token */
	}
	if (setting != NULL && have_column && FenceCmp(setting, &column) != 0)
	{
		FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_MISSING);
		FencingReportConflictingTokens(setting, &column, rel);
	}
	have_token = setting != NULL || have_column;
	if (setting != NULL)
	{
		token = *setting;
		if (unlikely(!session_token_warned) && FencingTokenSetForSession())
			WarnSessionToken(rel, setting);
	}
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
		FencingReportTokenRequired(rel, WriteName(event));
	}

	/* with a lease, only its current, live token may write (lease.c) */
	if (cfg->lease != NULL && !FencingLeaseHeldWith(cfg->lease, &token, cfg->table_owner))
	{
		FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_LEASE);
		FencingReportLeaseLost(cfg->lease, &token, rel);
	}

	if (cfg->nkeys < 0)
	{
		/* row scope: beat the fence of the row version being replaced */
		Fence		old;

		if (oldtup != NULL && GetFenceColumn(cfg, oldtup, desc, &old))
		{
			int			cmp = FenceCmp(&token, &old);

			if (cmp < 0 || (cmp == 0 && cfg->strict && !GuardWroteVersion(rel, oldtup)))
			{
				CountLost(cfg, &token, &old);
				ReportRowLost(cfg, rel, &token, &old);
			}
		}
	}
	else
	{
		/* key or table scope: beat the scope's fence, of both keys on a move */
		if (!CheckScopes(cfg, rel, oldtup, newtup, &token))
			return PointerGetDatum(result);		/* refused, deferred */
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

	if (newtup != NULL)
		RememberAcceptedWrite(rel, cid);
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
	cfg = FencingGetGuardConfig(rel);
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
