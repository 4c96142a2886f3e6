/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The server APIs that differ between the PostgreSQL releases fencing
 *	  builds against (15 to 18), each shim with the release that changed it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_COMPAT_H
#define FENCING_COMPAT_H

#include "access/genam.h"
#include "access/heapam.h"
#include "storage/proc.h"

/* 16 replaced pg_class_ownercheck() by object_ownercheck() */
#if PG_VERSION_NUM >= 160000
#define FencingOwnsRelation(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define FencingOwnsRelation(relid, roleid) pg_class_ownercheck((relid), (roleid))
#endif

/* 17 moved the local transaction id into MyProc->vxid */
#if PG_VERSION_NUM >= 170000
#define CurrentLocalTransactionId() (MyProc->vxid.lxid)
#else
#define CurrentLocalTransactionId() (MyProc->lxid)
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

#endif							/* FENCING_COMPAT_H */
