/*-------------------------------------------------------------------------
 *
 * direct.h
 *	  One-row writes of the extension's own tables without the executor
 *	  (direct.c): for the idempotency helpers, and for any module whose
 *	  hot path writes one row of a table only the extension writes.
 *
 * Usage: open the table with RowExclusiveLock, then FencingDirectTableOpen(); if
 * it returns false the table does not qualify (triggers, rules, row
 * security, more indexes, ...) and the write must go through SPI.  Else
 * FencingDirectInsert / FencingDirectFetch / FencingDirectUpdate, then FencingDirectTableClose() and
 * close the table (NoLock: the locks are kept until the transaction ends).
 * No executor runs, so the caller checks what ExecutorStart would have:
 * that the transaction may write (PreventCommandIfReadOnly), and that the
 * caller may write the table at all (these are the extension's tables,
 * written only by its own functions).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_DIRECT_H
#define FENCING_DIRECT_H

#include "access/htup.h"
#include "access/tableam.h"
#include "nodes/execnodes.h"
#include "utils/rel.h"
#include "utils/snapshot.h"

#define DIRECT_MAX_INDEXES	8

typedef struct DirectTable
{
	Relation	rel;			/* opened by the caller */
	int			nindexes;
	int			arbiter;		/* position of the unique index in indexes[] */
	Relation	indexes[DIRECT_MAX_INDEXES];
	IndexInfo  *index_info[DIRECT_MAX_INDEXES];
	Oid			arbiter_procs[INDEX_MAX_KEYS];	/* its columns' equality */
	TupleTableSlot *slot;		/* rows fetched, and their TIDs */
} DirectTable;

typedef enum DirectInsertResult
{
	DIRECT_INSERTED,			/* the row is in */
	DIRECT_CONFLICT,			/* a row with its key exists */
	DIRECT_BUSY					/* !wait: an open transaction writes the key */
} DirectInsertResult;

extern bool FencingDirectTableOpen(Relation rel, Oid arbiter, int max_indexes,
							DirectTable *dt);
extern void FencingDirectTableClose(DirectTable *dt);
extern DirectInsertResult FencingDirectInsert(DirectTable *dt, HeapTuple tup,
									   bool wait, ItemPointer conflict);
extern bool FencingDirectFetch(DirectTable *dt, const Datum *keyvals,
						Snapshot snapshot);
extern bool FencingDirectFetchTid(DirectTable *dt, ItemPointer tid,
						   Snapshot snapshot);
extern TM_Result FencingDirectUpdate(DirectTable *dt, ItemPointer otid,
							  HeapTuple newtup);

#endif							/* FENCING_DIRECT_H */
