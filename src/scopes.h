/*-------------------------------------------------------------------------
 *
 * scopes.h
 *	  Key and table scopes: what the guard knows of a scope's storage
 *	  table, and the check-and-advance of a scope's fence, atomic with the
 *	  write (scopes.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_SCOPES_H
#define FENCING_SCOPES_H

#include "fence.h"

/*
 * A key or table scope's fences live in a table
 * of their own, created by protect(): the key columns with the types and
 * collations of the protected table's key columns (table scope: one
 * boolean column, always true), a fence column, and a unique index on the
 * key columns, NULLS NOT DISTINCT.  Two rows have the same key exactly
 * when that index says so.  This is what the guard needs of it, cached
 * per protected relation.
 */
typedef struct ScopeStorage
{
	char	   *scope_name;
	Oid			relid;			/* the storage table */
	Oid			indexid;		/* its unique index on the key columns */
	bool		table_scope;	/* one fence: the key is the constant true */
	int			nkeys;			/* key columns of the storage table */
	Oid		   *types;			/* their types and collations */
	Oid		   *collations;
	int16	   *typlen;
	bool	   *typbyval;
	RegProcedure *eqprocs;		/* the equality of the index's opfamily */
	FmgrInfo   *eq;				/* the same, for comparing two keys */
	FmgrInfo   *cmp;			/* btree order, for locking keys in order */
	FmgrInfo   *hash;			/* a hash consistent with eq, when the */
	bool		hashable;		/* type has a hash opclass */
	FmgrInfo   *out;			/* output functions, for people */
} ScopeStorage;

/* scopes.c: check and advance a scope's fence, atomically with the write */
extern bool FencingScopeCheckAndAdvance(ScopeStorage *scope, Datum *key, bool *nulls,
								 const Fence *token, bool strict, Fence *lost_to);
extern bool FencingScopeFollow(ScopeStorage *scope, Datum *key, bool *nulls,
						const Fence *fence, Fence *current);
extern void FencingScopeSeed(ScopeStorage *scope, Datum *key, bool *nulls,
					  const Fence *fence);
extern void FencingScopeKeyOf(ScopeStorage *scope, const AttrNumber *key_attnums,
					   HeapTuple tuple, TupleDesc desc, Datum *key, bool *nulls);
extern int	FencingScopeKeyCompare(ScopeStorage *scope, Datum *a, bool *anulls,
							Datum *b, bool *bnulls);
extern char *FencingScopeKeyToText(ScopeStorage *scope, Datum *key, bool *nulls);
extern void FencingScopesInit(void);
extern bool FencingIsLocalStateTrigger(const Trigger *t);


#endif							/* FENCING_SCOPES_H */
