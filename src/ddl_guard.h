/*-------------------------------------------------------------------------
 *
 * ddl_guard.h
 *	  What protect() and unprotect() ask of the DDL guard (ddl_guard.c),
 *	  and its one switch.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_DDL_GUARD_H
#define FENCING_DDL_GUARD_H

#include "postgres.h"

#include "utils/rel.h"

extern void FencingCheckProtectable(Relation rel, const char *fence_column,
									int nkeys, Datum *keynames);
extern void FencingGuardTree(Oid relid);
extern void FencingUnguardTree(Oid relid);
extern void FencingRunWithDdlGuardSuspended(void (*fn) (Oid, void *), Oid relid,
											void *arg);

#endif							/* FENCING_DDL_GUARD_H */
