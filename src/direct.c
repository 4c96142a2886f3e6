/*-------------------------------------------------------------------------
 *
 * direct.c
 *	  Writing a row of one of the extension's own tables without the
 *	  executor: an index look-up, then heap_insert or heap_update and the
 *	  index entries, as ExecInsert and ExecUpdate would do them.
 *
 * The extension's helpers write one row per call into tables that only
 * they write.  Through SPI each such statement pays the executor's
 * start-up and shut-down (range table, ModifyTable node, projections,
 * the result relation's indexes), which for a one-row write costs more
 * than the write.  The functions here do the same work directly, for a
 * table that qualifies: a plain heap table with no triggers, rules, row
 * security, CHECK constraints, generated columns or partitioning, whose
 * indexes are all plain column indexes (no expressions, predicates or
 * exclusion constraints) with at most one unique index, the arbiter, and
 * no more of them than the caller expects.  Anything else, typically a
 * table a DBA has added a trigger or an index to, makes FencingDirectTableOpen
 * return false, and the caller runs its SQL through SPI, where all of
 * that is honoured.
 *
 * FencingDirectInsert is INSERT ... ON CONFLICT (arbiter) DO NOTHING: a
 * speculative insertion (as nodeModifyTable.c does it), so that two
 * callers inserting the same key at the same time never both insert it,
 * and neither sees a unique violation: the second waits for the first
 * and then finds its row, or inserts after a rollback.  FencingDirectUpdate is
 * heap_update plus index entries when the update is not HOT.
 *
 * Used by the idempotency helpers (idempotency.c).  The scopes' storage
 * (scopes.c) is written without the executor too, in a way of its own,
 * on purpose: it runs on every guarded write, its first writers of a key
 * are already serialised by a lock on the key's hash (so it inserts with
 * simple_heap_insert, without the speculative insertion's second WAL
 * record and index pass), and it updates in place, HOT, the fence being
 * in no index.  The idempotency tables have no such lock and need the
 * arbiter's guarantee from the insertion itself.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "direct.h"

/* How the unique check waits for transactions that are still open */
typedef enum DirectWaitMode
{
	DIRECT_WAIT,				/* wait for them (the pre-check) */
	DIRECT_WAIT_OLDER,			/* wait only for a younger speculative
								 * inserter (the re-check: no livelock) */
	DIRECT_NO_WAIT				/* never wait: report them */
} DirectWaitMode;

/* What the unique check found */
typedef enum DirectCheck
{
	DIRECT_CHECK_NONE,			/* no row with the key */
	DIRECT_CHECK_FOUND,			/* a row with the key */
	DIRECT_CHECK_BUSY			/* an open transaction is writing the key */
} DirectCheck;

/*
 * The equality functions of the arbiters' key columns, per index, as
 * BuildSpeculativeIndexInfo would look them up (two catalog look-ups per
 * column on every call): kept until a relcache invalidation of the index.
 */
#define DIRECT_ARBITER_CACHE_SIZE	4

typedef struct DirectArbiterProcs
{
	Oid			indexoid;		/* InvalidOid: a free entry */
	int			nkeys;
	Oid			procs[INDEX_MAX_KEYS];
} DirectArbiterProcs;

static DirectArbiterProcs arbiter_cache[DIRECT_ARBITER_CACHE_SIZE];
static int	arbiter_cache_next = 0;
static bool arbiter_callback_registered = false;

/* Relcache invalidation: forget the entries of that index (or all). */
static void
DirectInvalidateArbiters(Datum arg pg_attribute_unused(), Oid relid)
{
	int			i;

	for (i = 0; i < DIRECT_ARBITER_CACHE_SIZE; i++)
		if (!OidIsValid(relid) || arbiter_cache[i].indexoid == relid)
			arbiter_cache[i].indexoid = InvalidOid;
}

/* Fill dt->arbiter_procs for the B-tree index: its columns' equality. */
static void
DirectArbiterEqualityProcs(Relation index, DirectTable *dt)
{
	Oid			indexoid = RelationGetRelid(index);
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	DirectArbiterProcs *e;
	int			i;

	for (i = 0; i < DIRECT_ARBITER_CACHE_SIZE; i++)
	{
		e = &arbiter_cache[i];
		if (e->indexoid == indexoid && e->nkeys == nkeys)
		{
			memcpy(dt->arbiter_procs, e->procs, sizeof(Oid) * nkeys);
			return;
		}
	}

	for (i = 0; i < nkeys; i++)
	{
		Oid			op = get_opfamily_member(index->rd_opfamily[i],
											 index->rd_opcintype[i],
											 index->rd_opcintype[i],
											 BTEqualStrategyNumber);

		if (!OidIsValid(op))
			elog(ERROR, "missing equality operator (%u,%u) in opfamily %u",
				 index->rd_opcintype[i], index->rd_opcintype[i],
				 index->rd_opfamily[i]);
		dt->arbiter_procs[i] = get_opcode(op);
	}

	if (!arbiter_callback_registered)
	{
		CacheRegisterRelcacheCallback(DirectInvalidateArbiters, (Datum) 0);
		arbiter_callback_registered = true;
	}
	e = &arbiter_cache[arbiter_cache_next];
	arbiter_cache_next = (arbiter_cache_next + 1) % DIRECT_ARBITER_CACHE_SIZE;
	e->indexoid = indexoid;
	e->nkeys = nkeys;
	memcpy(e->procs, dt->arbiter_procs, sizeof(Oid) * nkeys);
}

/*
 * Is index a plain B-tree column index the direct path can maintain?  (Only
 * B-trees: a unique check needs one, and heap_update's report of which
 * indexes need new entries then never means the summarizing ones alone.)
 */
static bool
DirectIndexQualifies(Relation index, IndexInfo *info)
{
	int			i;

	if (index->rd_rel->relam != BTREE_AM_OID ||
		!index->rd_index->indisvalid || !index->rd_index->indisready ||
		!index->rd_index->indislive)
		return false;
	if (info->ii_Expressions != NIL || info->ii_Predicate != NIL ||
		info->ii_ExclusionOps != NULL)
		return false;
	for (i = 0; i < info->ii_NumIndexAttrs; i++)
		if (info->ii_IndexAttrNumbers[i] <= 0)
			return false;
	return true;
}

/*
 * Close what FencingDirectTableOpen opened, from index n down.  The locks stay
 * until the transaction ends, as the executor keeps them.
 */
static void
DirectCloseIndexes(DirectTable *dt, int n)
{
	while (--n >= 0)
		index_close(dt->indexes[n], NoLock);
}

/*
 * Open the indexes of rel (opened by the caller with RowExclusiveLock)
 * for direct writes, with arbiter (InvalidOid: the primary key) as the
 * unique index that decides conflicts.  Returns false, with nothing left
 * open, when the table does not qualify or has more than max_indexes
 * indexes: the caller then writes through SPI.
 */
bool
FencingDirectTableOpen(Relation rel, Oid arbiter, int max_indexes, DirectTable *dt)
{
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *indexlist;
	ListCell   *lc;
	int			n = 0;

	memset(dt, 0, sizeof(*dt));
	dt->rel = rel;
	dt->arbiter = -1;

	if (rel->rd_rel->relkind != RELKIND_RELATION ||
		rel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		rel->rd_rel->relispartition ||
		rel->rd_rel->relrowsecurity ||
		rel->trigdesc != NULL || rel->rd_rules != NULL)
		return false;
	if (desc->constr != NULL &&
		(desc->constr->num_check > 0 || desc->constr->has_generated_stored))
		return false;

	indexlist = RelationGetIndexList(rel);
	if (!OidIsValid(arbiter))
		arbiter = rel->rd_pkindex;
	if (!OidIsValid(arbiter) || list_length(indexlist) > max_indexes ||
		list_length(indexlist) > DIRECT_MAX_INDEXES)
	{
		list_free(indexlist);
		return false;
	}

	foreach(lc, indexlist)
	{
		Oid			indexoid = lfirst_oid(lc);
		Relation	index = index_open(indexoid, RowExclusiveLock);
		IndexInfo  *info = BuildIndexInfo(index);

		dt->indexes[n] = index;
		dt->index_info[n] = info;
		n++;
		if (!DirectIndexQualifies(index, info) ||
			(index->rd_index->indisunique &&
			 (indexoid != arbiter || !index->rd_index->indimmediate)))
		{
			DirectCloseIndexes(dt, n);
			list_free(indexlist);
			return false;
		}
		if (indexoid == arbiter)
		{
			dt->arbiter = n - 1;
			DirectArbiterEqualityProcs(index, dt);
		}
	}
	list_free(indexlist);
	dt->nindexes = n;
	if (dt->arbiter < 0)
	{
		DirectCloseIndexes(dt, n);
		return false;
	}
	dt->slot = table_slot_create(rel, NULL);
	return true;
}

/* Close the indexes; the caller closes the table. */
void
FencingDirectTableClose(DirectTable *dt)
{
	if (dt->slot != NULL)
		ExecDropSingleTupleTableSlot(dt->slot);
	DirectCloseIndexes(dt, dt->nindexes);
	dt->nindexes = 0;
	dt->slot = NULL;
}

/* The values of index i's columns in tup. */
static void
DirectIndexValues(DirectTable *dt, int i, HeapTuple tup, Datum *values,
				  bool *isnull)
{
	IndexInfo  *info = dt->index_info[i];
	TupleDesc	desc = RelationGetDescr(dt->rel);
	int			k;

	for (k = 0; k < info->ii_NumIndexAttrs; k++)
		values[k] = heap_getattr(tup, info->ii_IndexAttrNumbers[k], desc,
								 &isnull[k]);
}

/* Equality scan keys on the arbiter's key columns. */
static int
DirectArbiterScanKeys(DirectTable *dt, const Datum *keyvals, ScanKey skeys)
{
	Relation	index = dt->indexes[dt->arbiter];
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	int			k;

	for (k = 0; k < nkeys; k++)
		ScanKeyEntryInitialize(&skeys[k], 0, k + 1,
							   BTEqualStrategyNumber, InvalidOid,
							   index->rd_indcollation[k],
							   dt->arbiter_procs[k], keyvals[k]);
	return nkeys;
}

/*
 * Look for rows with the arbiter key keyvals that are live or being
 * written, other than self (the row we just inserted, or invalid), as
 * check_exclusion_or_unique_constraint does.  A row of an open
 * transaction is waited for (and looked for again) as mode says, or
 * reported as busy.  On DIRECT_CHECK_FOUND, *found is the row's TID.
 */
static DirectCheck
DirectCheckUnique(DirectTable *dt, const Datum *keyvals, ItemPointer self,
				  DirectWaitMode mode, ItemPointer found)
{
	Relation	index = dt->indexes[dt->arbiter];
	ScanKeyData skeys[INDEX_MAX_KEYS];
	int			nkeys = DirectArbiterScanKeys(dt, keyvals, skeys);
	SnapshotData dirty;

	InitDirtySnapshot(dirty);
	for (;;)
	{
		IndexScanDesc scan;
		DirectCheck result = DIRECT_CHECK_NONE;
		TransactionId xwait = InvalidTransactionId;
		uint32		spec_token = 0;

		scan = FencingIndexBeginscan(dt->rel, index, &dirty, nkeys, 0);
		index_rescan(scan, skeys, nkeys, NULL, 0);
		while (index_getnext_slot(scan, ForwardScanDirection, dt->slot))
		{
			if (self != NULL && ItemPointerIsValid(self) &&
				ItemPointerEquals(self, &dt->slot->tts_tid))
				continue;
			xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
			spec_token = dirty.speculativeToken;
			if (found != NULL)
				*found = dt->slot->tts_tid;
			result = DIRECT_CHECK_FOUND;
			break;
		}
		index_endscan(scan);

		if (result == DIRECT_CHECK_NONE || !TransactionIdIsValid(xwait))
			return result;

		/* the row is being inserted or deleted by an open transaction */
		if (mode == DIRECT_NO_WAIT)
			return DIRECT_CHECK_BUSY;
		if (mode == DIRECT_WAIT_OLDER &&
			!(spec_token != 0 &&
			  TransactionIdPrecedes(GetCurrentTransactionId(), xwait)))
			return DIRECT_CHECK_FOUND;
		if (spec_token != 0)
			SpeculativeInsertionWait(dirty.xmin, spec_token);
		else
			XactLockTableWait(xwait, dt->rel, &dt->slot->tts_tid,
							  XLTW_InsertIndex);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Raise 23502 for a NULL in a NOT NULL column, as the executor would. */
static void
DirectCheckNotNull(Relation rel, HeapTuple tup)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	if (desc->constr == NULL || !desc->constr->has_not_null)
		return;
	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attnotnull && heap_attisnull(tup, i + 1, desc))
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
							NameStr(att->attname), RelationGetRelationName(rel)),
					 errtablecol(rel, i + 1)));
	}
}

/* Index entries of a new heap tuple in every index but skip (or -1). */
static void
DirectInsertIndexEntries(DirectTable *dt, HeapTuple tup, int skip)
{
	int			i;

	for (i = 0; i < dt->nindexes; i++)
	{
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];

		if (i == skip)
			continue;
		DirectIndexValues(dt, i, tup, values, isnull);
		/* the only unique index is the arbiter, checked by the caller */
		(void) index_insert(dt->indexes[i], values, isnull, &tup->t_self,
							dt->rel, UNIQUE_CHECK_NO, false,
							dt->index_info[i]);
	}
}

/*
 * Under REPEATABLE READ or SERIALIZABLE, a row that conflicts with an
 * insertion must be visible to the transaction's snapshot, as ON CONFLICT
 * DO NOTHING requires (ExecCheckTIDVisible): else 40001.
 */
static void
DirectCheckConflictVisible(DirectTable *dt, ItemPointer tid)
{
	Snapshot	snapshot;
	bool		visible;

	if (!IsolationUsesXactSnapshot())
		return;
	PushActiveSnapshot(GetTransactionSnapshot());
	UpdateActiveSnapshotCommandId();
	snapshot = GetActiveSnapshot();
	if (!table_tuple_fetch_row_version(dt->rel, tid, SnapshotAny, dt->slot))
		elog(ERROR, "failed to fetch conflicting tuple of relation \"%s\"",
			 RelationGetRelationName(dt->rel));
	visible = table_tuple_satisfies_snapshot(dt->rel, dt->slot, snapshot);
	PopActiveSnapshot();
	if (!visible)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update")));
}

/*
 * INSERT ... ON CONFLICT (arbiter) DO NOTHING of tup, without the
 * executor.
 *
 * Returns DIRECT_INSERTED (tup->t_self is the new row), DIRECT_CONFLICT
 * when a row with the key exists (*conflict is its TID), or, only when
 * !wait, DIRECT_BUSY when an open transaction is inserting or deleting a
 * row with the key (with wait, the call waits for that transaction and
 * looks again).  The insertion is speculative: concurrent callers of
 * either this or INSERT ... ON CONFLICT wait for each other's decision,
 * never both insert, and never raise a unique violation.
 */
DirectInsertResult
FencingDirectInsert(DirectTable *dt, HeapTuple tup, bool wait, ItemPointer conflict)
{
	Relation	rel = dt->rel;
	TransactionId xid = GetCurrentTransactionId();
	CommandId	cid = GetCurrentCommandId(true);
	Datum		keyvals[INDEX_MAX_KEYS];
	bool		keynulls[INDEX_MAX_KEYS];
	int			k;

	DirectCheckNotNull(rel, tup);
	DirectIndexValues(dt, dt->arbiter, tup, keyvals, keynulls);
	for (k = 0; k < IndexRelationGetNumberOfKeyAttributes(dt->indexes[dt->arbiter]); k++)
		if (keynulls[k])
			elog(ERROR, "direct insertion needs a key without nulls");

	for (;;)
	{
		uint32		token;
		bool		maybe_conflict;
		bool		lost = false;
		ItemPointerData self;

		CHECK_FOR_INTERRUPTS();

		/*
		 * A non-conclusive check first, as ExecInsert does: it finds a
		 * committed row without leaving a killed speculative tuple behind,
		 * and waits for an open transaction that is writing the key.
		 */
		switch (DirectCheckUnique(dt, keyvals, NULL,
								  wait ? DIRECT_WAIT : DIRECT_NO_WAIT,
								  conflict))
		{
			case DIRECT_CHECK_FOUND:
				DirectCheckConflictVisible(dt, conflict);
				return DIRECT_CONFLICT;
			case DIRECT_CHECK_BUSY:
				return DIRECT_BUSY;
			case DIRECT_CHECK_NONE:
				break;
		}

		/* insert speculatively: others wait for our decision, not our xact */
		token = SpeculativeInsertionLockAcquire(xid);
		HeapTupleHeaderSetSpeculativeToken(tup->t_data, token);
		heap_insert(rel, tup, cid, HEAP_INSERT_SPECULATIVE, NULL);
		self = tup->t_self;

		/* the arbiter's entry, checked without waiting or raising */
		maybe_conflict = !index_insert(dt->indexes[dt->arbiter], keyvals,
									   keynulls, &self, rel,
									   UNIQUE_CHECK_PARTIAL, false,
									   dt->index_info[dt->arbiter]);
		DirectInsertIndexEntries(dt, tup, dt->arbiter);

		/* a possible conflict: decide it (ExecInsertIndexTuples' re-check) */
		if (maybe_conflict)
			lost = DirectCheckUnique(dt, keyvals, &self,
									 wait ? DIRECT_WAIT_OLDER : DIRECT_NO_WAIT,
									 NULL) != DIRECT_CHECK_NONE;

		if (lost)
			heap_abort_speculative(rel, &self);
		else
			heap_finish_speculative(rel, &self);
		SpeculativeInsertionLockRelease(xid);
		if (!lost)
			return DIRECT_INSERTED;
		/* the other one won: the pre-check waits for it, then finds it */
	}
}

/*
 * Find the row whose arbiter key is keyvals, as snapshot sees it, into
 * dt->slot (its TID in dt->slot->tts_tid).  False when there is none.
 */
bool
FencingDirectFetch(DirectTable *dt, const Datum *keyvals, Snapshot snapshot)
{
	ScanKeyData skeys[INDEX_MAX_KEYS];
	int			nkeys = DirectArbiterScanKeys(dt, keyvals, skeys);
	IndexScanDesc scan;
	bool		found;

	scan = FencingIndexBeginscan(dt->rel, dt->indexes[dt->arbiter], snapshot,
								 nkeys, 0);
	index_rescan(scan, skeys, nkeys, NULL, 0);
	found = index_getnext_slot(scan, ForwardScanDirection, dt->slot);
	index_endscan(scan);
	return found;
}

/*
 * Fetch into dt->slot the version of the row whose index entries point to
 * tid (a HOT chain's root, as FencingDirectInsert and FencingDirectUpdate leave in
 * t_self) that snapshot sees; false when it sees none.  A cheap way back
 * to a row this transaction wrote, without the index descent: the caller
 * must check that the row found is the one it wants (the line pointer
 * may have been reused), and tid must lie in the table (a TID this
 * transaction wrote does: the table cannot be truncated while our lock
 * is held).
 */
bool
FencingDirectFetchTid(DirectTable *dt, ItemPointer tid, Snapshot snapshot)
{
	IndexFetchTableData *fetch;
	ItemPointerData t = *tid;
	bool		call_again = false;
	bool		all_dead = false;
	bool		found;

	fetch = table_index_fetch_begin(dt->rel);
	found = table_index_fetch_tuple(fetch, &t, snapshot, dt->slot,
									&call_again, &all_dead);
	table_index_fetch_end(fetch);
	return found;
}

/*
 * Replace the row at otid, as the current command, by newtup, which
 * keeps the arbiter key of the old row; index entries are made when the
 * update is not HOT.  Waits for a transaction updating the row at the
 * same time, and returns heap_update's result: TM_Ok, or TM_Updated or
 * TM_Deleted when that transaction changed the row (the caller looks
 * again under READ COMMITTED, or raises 40001), or TM_SelfModified.
 */
TM_Result
FencingDirectUpdate(DirectTable *dt, ItemPointer otid, HeapTuple newtup)
{
	TM_Result	result;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool		need_indexes;

	DirectCheckNotNull(dt->rel, newtup);
	/* a table published for updates needs a replica identity */
	CheckCmdReplicaIdentity(dt->rel, CMD_UPDATE);
	result = FencingHeapUpdate(dt->rel, otid, newtup, GetCurrentCommandId(true),
							   &tmfd, &lockmode, &need_indexes);
	if (need_indexes)
	{
		/*
		 * The arbiter key is unchanged and the old row is ours until we
		 * end: its new entry needs no unique check.
		 */
		DirectInsertIndexEntries(dt, newtup, -1);
	}
	return result;
}
