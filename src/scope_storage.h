/*-------------------------------------------------------------------------
 *
 * scope_storage.h
 *	  The scopes' owners and storage tables: creating, opening, seeding and
 *	  forgetting them (scope_storage.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_SCOPE_STORAGE_H
#define FENCING_SCOPE_STORAGE_H

#include "scopes.h"

#define FENCING_SCOPE_NAME_MAXLEN	255 /* bytes */
extern bool FencingScopeStorageLayout(void);
extern ScopeStorage *FencingScopeStorageOpen(const char *scope_name, MemoryContext cxt);
extern Oid	FencingScopeStorageRegistered(const char *scope_name);
extern ScopeStorage *FencingScopeStorageOpenRelation(Oid storage, const char *scope_name,
											  bool table_scope, MemoryContext cxt);
extern Oid	FencingScopeStorageFor(const char *scope_name, Relation rel, int nkeys,
							const AttrNumber *key_attnums, const char *const *key_names,
							bool protected_here);
extern void FencingCheckScopeName(const char *scope_name);
extern void FencingCheckKeyColumnType(Relation rel, AttrNumber attnum, const char *name);
extern void FencingSeedScopesFrom(Oid protected_relid, Oid source_relid);
extern void FencingScopeStorageInvalidateAll(void);


#endif							/* FENCING_SCOPE_STORAGE_H */
