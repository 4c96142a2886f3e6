/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The server APIs that differ between the PostgreSQL releases fencing
 *	  builds against (15 to 18; built and tested on 15 and 18), each shim
 *	  with the release that changed it.  Included by fence.h and by the files that need it alone.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_COMPAT_H
#define FENCING_COMPAT_H

#include "access/genam.h"
#include "access/heapam.h"
#include "storage/proc.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"

#if PG_VERSION_NUM < 150000
#error "fencing needs PostgreSQL 15 or later"
#endif

/* 16 replaced pg_class_ownercheck() by object_ownercheck() */
#if PG_VERSION_NUM >= 160000
#define FencingOwnsRelation(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define FencingOwnsRelation(relid, roleid) pg_class_ownercheck((relid), (roleid))
#endif

/* ... and pg_extension_ownercheck() likewise */
#if PG_VERSION_NUM >= 160000
#define FencingOwnsExtension(extoid, roleid) \
	object_ownercheck(ExtensionRelationId, (extoid), (roleid))
#else
#define FencingOwnsExtension(extoid, roleid) pg_extension_ownercheck((extoid), (roleid))
#endif

/*
 * 16 moved the settings' memory into a memory context of its own: the
 * "extra" that a check hook hands back is freed with guc_free() (a pfree()
 * that asserts the context), so it must come from guc_malloc().  Up to 15
 * it came from malloc() and was freed with free().  A malloc()ed extra on
 * 16 or later makes the server pfree() memory it never palloc()ed at the
 * end of every transaction that set the value (on an assert-enabled 18:
 * "GetMemoryChunkContext called with invalid pointer" during COMMIT, then
 * TRAP TransactionIdIsValid(proc->xid) or "cannot abort transaction").
 * guc_malloc(LOG, ...) returns NULL when out of memory, as malloc() does.
 */
#if PG_VERSION_NUM >= 160000
#define FencingGucMalloc(size) guc_malloc(LOG, (size))
#else
#define FencingGucMalloc(size) malloc(size)
#endif

/* 17 moved the local transaction id into MyProc->vxid */
#if PG_VERSION_NUM >= 170000
#define CurrentLocalTransactionId() (MyProc->vxid.lxid)
#else
#define CurrentLocalTransactionId() (MyProc->lxid)
#endif

/*
 * 17 lets an extension name its wait events (pg_stat_activity shows the
 * name; the same name gives the same event); before, every wait of an
 * extension is "Extension".  Needs utils/wait_event.h.
 */
#if PG_VERSION_NUM >= 170000
#define FencingWaitEventNew(name) WaitEventExtensionNew(name)
#else
#define FencingWaitEventNew(name) ((void) (name), PG_WAIT_EXTENSION)
#endif

/*
 * 18 removed pg_attribute_noreturn(), written after a function declaration,
 * in favour of pg_noreturn (C11's _Noreturn), written before it.  Before
 * 18, pg_noreturn is GCC's attribute in the same place.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/* 18 gave index_beginscan() an instrumentation argument */
#if PG_VERSION_NUM >= 180000
#define FencingIndexBeginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define FencingIndexBeginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * simple_heap_update(); true when the new version needs index entries
 * (16 made it report which indexes through TU_UpdateIndexes).
 */
static inline bool
FencingSimpleHeapUpdate(Relation rel, ItemPointer otid, HeapTuple tup)
{
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;

	simple_heap_update(rel, otid, tup, &update_indexes);
	return update_indexes != TU_None;
#else
	simple_heap_update(rel, otid, tup);
	return !HeapTupleIsHeapOnly(tup);
#endif
}

/*
 * heap_update() as the executor would call it; *need_indexes: the new
 * version needs index entries (16 made heap_update() say which; every
 * index of the extension's tables is a B-tree, so TU_Summarizing cannot
 * happen).
 */
static inline TM_Result
FencingHeapUpdate(Relation rel, ItemPointer otid, HeapTuple newtup,
				  CommandId cid, TM_FailureData *tmfd, LockTupleMode *lockmode,
				  bool *need_indexes)
{
	TM_Result	result;
#if PG_VERSION_NUM >= 160000
	TU_UpdateIndexes update_indexes;

	result = heap_update(rel, otid, newtup, cid, InvalidSnapshot, true,
						 tmfd, lockmode, &update_indexes);
	*need_indexes = (result == TM_Ok && update_indexes == TU_All);
#else
	result = heap_update(rel, otid, newtup, cid, InvalidSnapshot, true,
						 tmfd, lockmode);
	*need_indexes = (result == TM_Ok && !HeapTupleIsHeapOnly(newtup));
#endif
	return result;
}

/* 18 gave RelationGetPrimaryKeyIndex() deferrable_ok (false: ours is not) */
#if PG_VERSION_NUM >= 180000
#define FencingRelationGetPrimaryKeyIndex(rel) RelationGetPrimaryKeyIndex((rel), false)
#else
#define FencingRelationGetPrimaryKeyIndex(rel) RelationGetPrimaryKeyIndex(rel)
#endif

/*
 * Soft error reporting arrived in 16; before that an input function
 * reports every error as a hard one.
 */
#if PG_VERSION_NUM < 160000
#define ereturn(context, dummy_value, ...)	\
	do { \
		(void) (context); \
		ereport(ERROR, __VA_ARGS__); \
		return dummy_value; \
	} while (0)
#else
#include "nodes/miscnodes.h"
#endif

/*
 * 18 dropped ExecutorRun's execute_once argument (the executor no longer
 * tells a portal run once from one run again); a hook takes and passes on
 * the arguments of its release.
 */
#if PG_VERSION_NUM >= 180000
#define FENCING_EXECUTOR_RUN_PARAMS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count
#define FENCING_EXECUTOR_RUN_ARGS queryDesc, direction, count
#else
#define FENCING_EXECUTOR_RUN_PARAMS \
	QueryDesc *queryDesc, ScanDirection direction, uint64 count, bool execute_once
#define FENCING_EXECUTOR_RUN_ARGS queryDesc, direction, count, execute_once
#endif

/*
 * The settings' entry of a parameter: PostgreSQL 16 exported find_option()
 * and changed get_guc_variables() to return the count.
 */
#if PG_VERSION_NUM >= 160000
#define FencingFindGuc(name) find_option((name), false, true, ERROR)
#else
static inline struct config_generic *
FencingFindGuc(const char *name)
{
	struct config_generic **vars = get_guc_variables();
	int			n = GetNumConfigOptions();
	int			i;

	for (i = 0; i < n; i++)
		if (strcmp(vars[i]->name, name) == 0)
			return vars[i];
	return NULL;
}
#endif

#endif							/* FENCING_COMPAT_H */
