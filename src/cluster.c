/*-------------------------------------------------------------------------
 *
 * cluster.c
 *	  The core's calls into a distributed database's integration (see
 *	  cluster.h): each passes to the registered function, or answers as
 *	  for a plain PostgreSQL table when none is registered.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "cluster.h"
#include "guard_config.h"
#include "scopes.h"

static const FencingClusterHooks *cluster = NULL;

/* Called once, from _PG_init, by the integration. */
void
FencingClusterRegister(const FencingClusterHooks *hooks)
{
	cluster = hooks;
}

void
FencingClusterCheckProtect(Relation rel, const char *fence_column, int nkeys,
						   Datum *keynames, bool strict, const char *scope_name,
						   const char *lease)
{
	if (cluster != NULL)
		cluster->check_protect(rel, fence_column, nkeys, keynames, strict,
							   scope_name, lease);
}

const char *
FencingClusterGuardArgs(Oid relid)
{
	return cluster != NULL ? cluster->guard_args(relid) : "";
}

/* -1: nothing to undo */
int
FencingClusterBeginTriggerDdl(Oid relid)
{
	return cluster != NULL ? cluster->begin_trigger_ddl(relid) : -1;
}

void
FencingClusterEndTriggerDdl(int level)
{
	if (cluster != NULL)
		cluster->end_trigger_ddl(level);
}

void
FencingClusterShardGuardConfig(Relation rel, GuardConfig *cfg, MemoryContext cxt)
{
	if (cluster != NULL)
		cluster->shard_guard_config(rel, cfg, cxt);
}

bool
FencingClusterShardProtection(Oid relid, Oid *shell, char **guard_name,
							  char **fence_column, int *nkeys, char ***key_columns)
{
	return cluster != NULL &&
		cluster->shard_protection(relid, shell, guard_name, fence_column,
								  nkeys, key_columns);
}

void
FencingClusterPrepareStorage(Relation rel, Oid storage)
{
	if (cluster != NULL)
		cluster->prepare_storage(rel, storage);
}

bool
FencingClusterDistributesStorage(Oid relid)
{
	return cluster != NULL && cluster->distributes_storage(relid);
}

bool
FencingClusterSeedScope(const char *scope_name, const char *fence_column,
						int nkeys, Datum *keynames, Oid source_relid)
{
	return cluster != NULL &&
		cluster->seed_scope(scope_name, fence_column, nkeys, keynames,
							source_relid);
}

void
FencingClusterCheckLocalStorage(Relation rel, ScopeStorage *scope)
{
	if (cluster != NULL)
		cluster->check_local_storage(rel, scope);
}

bool
FencingClusterFollowReplay(Relation rel, AttrNumber *fence_attnum, Oid *stats_relid)
{
	return cluster != NULL &&
		cluster->follow_replay(rel, fence_attnum, stats_relid);
}
