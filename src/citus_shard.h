/*-------------------------------------------------------------------------
 *
 * citus_shard.h
 *	  What a Citus shard says of itself (citus_shard.c): whether Citus is
 *	  here, the distributed table a shard belongs to, and the settings
 *	  that its guard trigger carries.  Used by the Citus integration
 *	  (citus.c) and by shard transfers (citus_transfer.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_CITUS_SHARD_H
#define FENCING_CITUS_SHARD_H

#include "postgres.h"

#include "utils/rel.h"

/* The first argument of a guard trigger that carries its settings. */
#define CITUS_ARGS_TAG		"citus:1"

/* What the arguments of a shard's guard trigger say. */
typedef struct FencingCitusGuardTriggerArgs
{
	char	   *fence_column;
	bool		strict;
	int			nkeys;			/* 0: row scope */
	char	   *keys[INDEX_MAX_KEYS];
	char	   *scope_name;		/* key scope: the scope */
	char	   *storage;		/* and its storage table in schema fencing */
} FencingCitusGuardTriggerArgs;

extern bool FencingCitusPresent(void);
extern int64 FencingCitusShardIdInName(Oid relid);
extern Oid	FencingCitusShardOf(Oid relid);
extern bool FencingCitusIsFencingFunction(Oid funcoid, const char *name);
extern Trigger *FencingCitusGuardTrigger(Relation rel);
extern bool FencingCitusParseGuardArgs(Trigger *t, FencingCitusGuardTriggerArgs *a);
extern bool FencingCitusCatalogGuardTrigger(Oid relid, Trigger *t);
extern bool FencingCitusGuardSettings(Relation rel, const char **fence_column,
									  const char **scope_name, const char **storage);
extern bool FencingCitusCatalogGuardSettings(Oid relid, const char **scope_name,
											 const char **storage);

#endif							/* FENCING_CITUS_SHARD_H */
