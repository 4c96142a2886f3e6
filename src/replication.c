/*-------------------------------------------------------------------------
 *
 * replication.c
 *	  The extension's own tables under logical replication of a whole
 *	  database: fencing.local_state(), the trigger that keeps each server's
 *	  own fencing state its own.
 *
 * A publication FOR ALL TABLES includes the extension's tables.  Some of
 * them say what this server protects and how far its fences have come:
 * fencing.protected (whose regclass column names the publisher's tables),
 * the registry fencing.scope_storage, the scopes' storage tables and
 * fencing.epoch_state.  A subscriber keeps its own: it protects its own
 * tables, and its guard advances its own scope fences from the writes it
 * replays (guard.c).  Applied as they are, the publisher's rows would
 * collide with the subscriber's (a unique violation in a storage table
 * stops the apply worker, and every later change with it) or replace them.
 *
 * So each of those tables has two triggers, enabled ALWAYS (the apply
 * worker runs with session_replication_role = replica):
 *
 *   fencing_local_state           BEFORE INSERT OR UPDATE OR DELETE, ROW
 *   fencing_local_state_truncate  BEFORE TRUNCATE, STATEMENT
 *
 * In any other session they let everything through.  In a logical
 * replication worker (the apply worker, and the table synchronisation
 * worker of a new subscription), a row is skipped: the subscriber keeps
 * its protections, scopes and epochs.  A storage table's row (its trigger
 * has the argument 'storage') first advances the subscriber's fence of
 * that key to the publisher's, when that is newer, as the guard does for
 * replayed writes (FencingScopeFollow): the subscriber is fenced at least as far
 * as its publisher, also for keys whose last write was a DELETE, and
 * nothing is ever lowered.  A replicated TRUNCATE of one of these tables
 * would remove this server's state: it is refused (SF001), and
 * PostgreSQL's handling of a failed apply takes over.
 *
 * The guard writes the storage tables without the executor (scopes.c), so
 * these triggers never fire on its path and cost it nothing; scopes.c
 * accepts them on a storage table (FencingIsLocalStateTrigger) where it
 * refuses any other trigger.  Idempotency keys and leases replicate as
 * they are (they are keyed by text, and only a subscriber that writes them
 * itself can meet a conflict); their tables get no trigger, which keeps
 * the helpers' direct path (direct.c).  A scope's storage is distributed
 * without these triggers on Citus, whose shard moves replicate it.
 *
 * Storage tables are REPLICA IDENTITY FULL: a replicated UPDATE of a
 * table without a replica identity would stop the apply worker before
 * any trigger is asked.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_language.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "replication/logicalworker.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "compat.h"
#include "fence.h"
#include "scope_storage.h"
#include "scopes.h"

PG_FUNCTION_INFO_V1(fencing_local_state);


/*
 * The storage tables followed in the current replicated transaction, so
 * that each is opened once for all its rows (their memory goes with the
 * transaction).
 */
typedef struct FollowedStorage
{
	Oid			relid;
	ScopeStorage *scope;
	struct FollowedStorage *next;
} FollowedStorage;

static LocalTransactionId followed_lxid = InvalidLocalTransactionId;
static FollowedStorage *followed = NULL;
static MemoryContext followed_cxt = NULL;

/*
 * The subscriber's fence of the key of a replicated storage row tup of
 * rel advances to the row's fence when that is newer.
 */
static void
FollowReplicatedFence(Relation rel, HeapTuple tup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum		key[INDEX_MAX_KEYS];
	bool		nulls[INDEX_MAX_KEYS];
	Datum		fence;
	bool		fence_null;
	Fence		current;
	int			i;

	FollowedStorage *f;

	if (followed_lxid != CurrentLocalTransactionId())
	{
		followed = NULL;
		followed_cxt = AllocSetContextCreate(TopTransactionContext,
											 "fencing replicated storage",
											 ALLOCSET_SMALL_SIZES);
		followed_lxid = CurrentLocalTransactionId();
	}
	for (f = followed; f != NULL; f = f->next)
		if (f->relid == RelationGetRelid(rel))
			break;
	if (f == NULL)
	{
		bool		table_scope = desc->natts == 2 &&
			strcmp(NameStr(TupleDescAttr(desc, 0)->attname), "table_scope") == 0;

		f = MemoryContextAllocZero(followed_cxt, sizeof(FollowedStorage));
		f->relid = RelationGetRelid(rel);
		f->scope = FencingScopeStorageOpenRelation(RelationGetRelid(rel),
											RelationGetRelationName(rel),
											table_scope, followed_cxt);
		if (f->scope == NULL || f->scope->nkeys != desc->natts - 1)
			elog(ERROR, "table \"%s\" is not a fence storage",
				 RelationGetRelationName(rel));
		f->next = followed;
		followed = f;
	}

	fence = heap_getattr(tup, desc->natts, desc, &fence_null);
	if (fence_null)
		return;
	for (i = 0; i < f->scope->nkeys; i++)
		key[i] = heap_getattr(tup, i + 1, desc, &nulls[i]);
	(void) FencingScopeFollow(f->scope, key, nulls, DatumGetFenceP(fence), &current);
}

/*
 * fencing.local_state(): the triggers of the extension's tables that
 * keep this server's fencing state its own under logical replication.
 */
Datum
fencing_local_state(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TriggerEvent event;
	Relation	rel;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencing.local_state() was not called by trigger manager")));
	event = trigdata->tg_event;
	if (!TRIGGER_FIRED_BEFORE(event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencing.local_state() must be fired BEFORE")));
	rel = trigdata->tg_relation;

	if (!IsLogicalWorker())
	{
		/* every other session: as if there were no trigger */
		if (!TRIGGER_FIRED_FOR_ROW(event))
			return PointerGetDatum(NULL);
		if (TRIGGER_FIRED_BY_UPDATE(event))
			return PointerGetDatum(trigdata->tg_newtuple);
		return PointerGetDatum(trigdata->tg_trigtuple);
	}

	if (TRIGGER_FIRED_BY_TRUNCATE(event))
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(FENCING_REASON_STALE_TOKEN),
				 errmsg("replicated TRUNCATE of table \"%s\" is refused",
						RelationGetRelationName(rel)),
				 errdetail("Table \"%s\" keeps this server's own protections, scopes, fences or epochs, which the TRUNCATE would remove: a fence is never lowered.",
						   RelationGetRelationName(rel)),
				 errhint("Leave the tables of schema fencing out of publications (publish FOR TABLE or FOR TABLES IN SCHEMA your own schemas), or skip this transaction with ALTER SUBSCRIPTION ... SKIP."),
				 errtable(rel)));
	if (!TRIGGER_FIRED_FOR_ROW(event))
		return PointerGetDatum(NULL);

	/* a storage row: follow its fence first */
	if (trigdata->tg_trigger->tgnargs >= 1 &&
		strcmp(trigdata->tg_trigger->tgargs[0], "storage") == 0 &&
		!TRIGGER_FIRED_BY_DELETE(event))
		FollowReplicatedFence(rel, TRIGGER_FIRED_BY_UPDATE(event) ?
							  trigdata->tg_newtuple : trigdata->tg_trigtuple);

	/* the subscriber keeps its own row */
	return PointerGetDatum(NULL);
}
