/*-------------------------------------------------------------------------
 *
 * scopes_1_0.h
 *	  Key scopes of a database whose extension is still at 1.0, read and
 *	  advanced in their 1.0 form until ALTER EXTENSION fencing UPDATE
 *	  (scopes_1_0.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_SCOPES_1_0_H
#define FENCING_SCOPES_1_0_H

#include "guard_config.h"

extern char *FencingLegacyScopeKey(GuardConfig *cfg, HeapTuple tuple, TupleDesc desc);
extern bool FencingLegacyScopesStillHere(void);
extern bool FencingLegacyScopeCheckAndAdvance(const char *scope_name, const char *key,
									   const Fence *token, bool strict,
									   Fence *lost_to);


#endif							/* FENCING_SCOPES_1_0_H */
