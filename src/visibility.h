/*-------------------------------------------------------------------------
 *
 * visibility.h
 *	  Who may read a key value or a fence (visibility.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_VISIBILITY_H
#define FENCING_VISIBILITY_H

#include "guard_config.h"

extern bool FencingMayReadGuardedKeys(Relation rel, GuardConfig *cfg);

#endif							/* FENCING_VISIBILITY_H */
