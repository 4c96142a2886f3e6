/*-------------------------------------------------------------------------
 *
 * protection.h
 *	  Which tables are protected, and through which table (protection.c),
 *	  and the names of the triggers that protect them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_PROTECTION_H
#define FENCING_PROTECTION_H

#include "postgres.h"

/* the names of the two triggers protect() installs */
#define FENCING_GUARD_TRIGGER		"zz_fencing_guard"
#define FENCING_TRUNCATE_TRIGGER	"zz_fencing_truncate"

/*
 * protection.c: is relid protected, and through which table?  The table
 * named in fencing.protected (relid itself or its nearest partition or
 * inheritance ancestor), else InvalidOid.  Cached, invalidation-driven.
 */
extern Oid	FencingProtectedBy(Oid relid);
extern bool FencingProtectionColumns(Oid relid, char **fence_column, int *nkeys,
									 char ***key_columns);
extern Oid	FencingProtectedTableOid(void);
extern void FencingProtectionReset(void);

#endif							/* FENCING_PROTECTION_H */
