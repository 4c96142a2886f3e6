/*-------------------------------------------------------------------------
 *
 * trigger_code.h
 *	  The code a trigger runs and who may own it (trigger_code.c): used by
 *	  the DDL guard when a trigger or function changes, and by the guard's
 *	  settings when a write happens.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_TRIGGER_CODE_H
#define FENCING_TRIGGER_CODE_H

#include "postgres.h"

#include "nodes/pg_list.h"

extern bool FencingCodeOwnerTrusted(Oid role, Oid member, Oid root);
extern Oid	FencingFunctionOwner(Oid fn, bool lock);
extern List *FencingTriggerCode(Oid trigoid, Oid tgfoid);

#endif							/* FENCING_TRIGGER_CODE_H */
