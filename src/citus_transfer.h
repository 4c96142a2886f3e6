/*-------------------------------------------------------------------------
 *
 * citus_transfer.h
 *	  Citus shard transfers of a table in key scope (citus_transfer.c):
 *	  what the Citus integration (citus.c) asks of them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_CITUS_TRANSFER_H
#define FENCING_CITUS_TRANSFER_H

#include "postgres.h"

#include "utils/rel.h"

extern void FencingCitusTransferInit(void);
extern bool FencingCitusFollowReplay(Relation rel, AttrNumber *fence_attnum);
extern void FencingCitusAwaitTransferDdl(Oid relid);

#endif							/* FENCING_CITUS_TRANSFER_H */
