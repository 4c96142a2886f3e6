/*-------------------------------------------------------------------------
 *
 * guard_config.h
 *	  What the guard knows of a protected relation, cached per relation
 *	  (guard_config.c), and of its scope's storage table.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_GUARD_CONFIG_H
#define FENCING_GUARD_CONFIG_H

#include "scopes.h"

/* guard_config.c: what fencing.protected says of a relation, cached */
typedef struct GuardConfig
{
	Oid			relid;			/* hash key: the relation the trigger fired on */
	bool		valid;			/* false once a relcache invalidation hit it */
	bool		protected;		/* false: relation is not protected */
	Oid			protected_relid;	/* the table named in fencing.protected */
	AttrNumber	fence_attnum;	/* fence column in this relation */
	int			nkeys;			/* -1: row scope, 0: table scope, >0: key */
	AttrNumber *key_attnums;	/* key columns in this relation */
	bool		strict;
	char	   *scope_name;
	ScopeStorage *scope;		/* key or table scope: its storage */
	bool		legacy_scopes;	/* extension objects still at 1.0 */
	FmgrInfo   *key_out;		/* 1.0: output functions of the key columns */
	char	   *lease;			/* fencing.lease_check() must pass, or NULL */
	Oid			table_owner;	/* owner of protected_relid, for the lease */
	struct FencingTableStats *stats;	/* counters of protected_relid, or NULL */
	/* a trigger whose code its owner no longer controls, or NULL */
	char	   *foreign_trigger;
	Oid			foreign_function;
	Oid			foreign_owner;
} GuardConfig;

extern GuardConfig *FencingGetGuardConfig(Relation rel);

#endif							/* FENCING_GUARD_CONFIG_H */
