/*-------------------------------------------------------------------------
 *
 * extension.h
 *	  The extension's own objects (its schema, type and owner), running as
 *	  its owner or as another role, and its SPI helpers (extension.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_EXTENSION_H
#define FENCING_EXTENSION_H

#include "postgres.h"

typedef struct FencingSavedUser
{
	Oid			userid;
	int			sec_context;
} FencingSavedUser;

extern Oid	FencingSchemaOid(void);
extern Oid	FencingTypeOid(void);
extern Oid	FencingOwnerOid(void);
extern void FencingBecomeOwner(FencingSavedUser *saved);
extern void FencingBecomeRole(Oid role, FencingSavedUser *saved);
extern void FencingRestoreUser(const FencingSavedUser *saved);
extern bool FencingActsFor(Oid owner);
extern char *FencingQualifiedName(Oid relid);
extern Oid	FencingRelOwner(Oid relid);
extern void FencingSpiConnect(void);
extern void FencingRunUtility(const char *sql);
extern int	FencingExecuteLatest(const char *sql, int nargs, Oid *argtypes,
								 Datum *values, const char *nulls,
								 bool read_only, long tcount);

#endif							/* FENCING_EXTENSION_H */
