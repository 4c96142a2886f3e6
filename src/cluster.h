/*-------------------------------------------------------------------------
 *
 * cluster.h
 *	  The interface through which the core of the extension asks a
 *	  distributed database (Citus) what it must know of a table, and lets
 *	  it act at the few points where a distributed table differs.
 *
 * The core (protect(), the DDL guard, the guard's settings, the scopes'
 * storage) calls only the FencingCluster* functions below.  With no
 * integration registered they answer as for a plain PostgreSQL table; the
 * Citus integration (citus.c) registers its functions from _PG_init and
 * answers for distributed and reference tables and their shards, itself
 * deciding whether Citus is present.  The core never calls citus.c, and
 * citus.c uses the core's public functions only.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_CLUSTER_H
#define FENCING_CLUSTER_H

#include "guard_config.h"
#include "scopes.h"

typedef struct FencingClusterHooks
{
	/* protect(): refuse what a distributed table cannot be protected with */
	void		(*check_protect) (Relation rel, const char *fence_column,
								  int nkeys, Datum *keynames, bool strict,
								  const char *scope_name, const char *lease);
	/* extra arguments of the guard trigger of relid ("" for none) */
	const char *(*guard_args) (Oid relid);
	/* around the extension's own trigger DDL on relid */
	int			(*begin_trigger_ddl) (Oid relid);
	void		(*end_trigger_ddl) (int level);
	/* the guard's settings of a shard, from its distributed table */
	void		(*shard_guard_config) (Relation rel, GuardConfig *cfg,
									   MemoryContext cxt);
	/* is relid a shard of a protected table, and how is it protected */
	bool		(*shard_protection) (Oid relid, Oid *shell, char **guard_name,
									 char **fence_column, int *nkeys,
									 char ***key_columns);
	/* a new storage table of a scope of distributed table rel */
	void		(*prepare_storage) (Relation rel, Oid storage);
	/* does relid's scope storage live in shards next to relid's? */
	bool		(*distributes_storage) (Oid relid);
	/* seed a scope from a distributed table; false: not distributed */
	bool		(*seed_scope) (const char *scope_name, const char *fence_column,
							   int nkeys, Datum *keynames, Oid source_relid);
	/* a shard's guard about to use the scope's storage on this node */
	void		(*check_local_storage) (Relation rel, ScopeStorage *scope);
	/*
	 * a write that the logical replication apply worker replays into a
	 * shard that a shard transfer fills: true when the integration follows
	 * it (*fence_attnum: the fence column to keep from being lowered, in
	 * row scope, else InvalidAttrNumber; *stats_relid: whose counters)
	 */
	bool		(*follow_replay) (Relation rel, AttrNumber *fence_attnum,
								  Oid *stats_relid);
} FencingClusterHooks;

extern void FencingClusterRegister(const FencingClusterHooks *hooks);

extern void FencingClusterCheckProtect(Relation rel, const char *fence_column,
									   int nkeys, Datum *keynames, bool strict,
									   const char *scope_name, const char *lease);
extern const char *FencingClusterGuardArgs(Oid relid);
extern int	FencingClusterBeginTriggerDdl(Oid relid);
extern void FencingClusterEndTriggerDdl(int level);
extern void FencingClusterShardGuardConfig(Relation rel, GuardConfig *cfg,
										   MemoryContext cxt);
extern bool FencingClusterShardProtection(Oid relid, Oid *shell, char **guard_name,
										  char **fence_column, int *nkeys,
										  char ***key_columns);
extern void FencingClusterPrepareStorage(Relation rel, Oid storage);
extern bool FencingClusterDistributesStorage(Oid relid);
extern bool FencingClusterSeedScope(const char *scope_name, const char *fence_column,
									int nkeys, Datum *keynames, Oid source_relid);
extern void FencingClusterCheckLocalStorage(Relation rel, ScopeStorage *scope);
extern bool FencingClusterFollowReplay(Relation rel, AttrNumber *fence_attnum,
									   Oid *stats_relid);

#endif							/* FENCING_CLUSTER_H */
