/*-------------------------------------------------------------------------
 *
 * citus_shard.c
 *	  What a Citus shard says of itself: whether Citus is installed, the
 *	  distributed table a shard belongs to (pg_dist_shard, by the shard id
 *	  in its name), and the settings that its guard trigger carries in its
 *	  arguments (fencing.protected lives on the coordinator only).
 *
 * The bottom of the Citus integration: citus.c and citus_transfer.c both
 * ask these questions, and neither calls the other for them.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/partition.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "citus_shard.h"
#include "compat.h"
#include "extension.h"

/* Is Citus installed in this database? */
bool
FencingCitusPresent(void)
{
	return OidIsValid(get_extension_oid("citus", true));
}

/*
 * The shard id in the name of relation relid (Citus names a shard
 * <table>_<shardid>), or 0.  pg_dist_shard must confirm it.
 */
int64
FencingCitusShardIdInName(Oid relid)
{
	char	   *relname = get_rel_name(relid);
	char	   *us;
	char	   *end;
	int64		shardid;

	if (relname == NULL || (us = strrchr(relname, '_')) == NULL || us[1] == '\0')
		return 0;
	errno = 0;
	shardid = strtoi64(us + 1, &end, 10);
	if (errno != 0 || *end != '\0' || shardid <= 0)
		return 0;
	return shardid;
}

/*
 * If relid is a shard placement of a Citus table on this node, the Citus
 * table (the shell of the shard's topmost partition ancestor, for a shard
 * of a partition); else InvalidOid.  Citus names a shard <table>_<shardid>
 * and lists it in pg_dist_shard, synced to every node.
 */
Oid
FencingCitusShardOf(Oid relid)
{
	Oid			top = relid;
	int64		shardid;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1];
	Oid			shell = InvalidOid;
	int			rc;

	if (!FencingCitusPresent())
		return InvalidOid;
	if (get_rel_relispartition(relid))
		top = llast_oid(get_partition_ancestors(relid));
	shardid = FencingCitusShardIdInName(top);
	if (shardid == 0)
		return InvalidOid;

	values[0] = Int64GetDatum(shardid);
	FencingSpiConnect();
	rc = SPI_execute_with_args("SELECT logicalrelid::pg_catalog.oid FROM pg_catalog.pg_dist_shard "
							   "WHERE shardid OPERATOR(pg_catalog.=) $1",
							   1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_dist_shard: %s", SPI_result_code_string(rc));
	if (SPI_processed > 0)
	{
		bool		isnull;

		shell = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
											   SPI_tuptable->tupdesc, 1, &isnull));
	}
	SPI_finish();

	/* a shard lives in its table's schema; the shell is not its own shard */
	if (!OidIsValid(shell) || shell == top ||
		get_rel_namespace(shell) != get_rel_namespace(top))
		return InvalidOid;
	return shell;
}

/* Does trigger function funcoid be fencing.<name>()? */
bool
FencingCitusIsFencingFunction(Oid funcoid, const char *name)
{
	char	   *fname = get_func_name(funcoid);

	return fname != NULL && strcmp(fname, name) == 0 &&
		get_func_namespace(funcoid) == FencingSchemaOid();
}

/* The guard row trigger of rel that carries Citus settings, or NULL. */
Trigger *
FencingCitusGuardTrigger(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	int			i;

	if (td == NULL)
		return NULL;
	for (i = 0; i < td->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[i];

		if (t->tgnargs >= 1 && strcmp(t->tgargs[0], CITUS_ARGS_TAG) == 0 &&
			TRIGGER_FOR_ROW(t->tgtype) && TRIGGER_FOR_BEFORE(t->tgtype) &&
			FencingCitusIsFencingFunction(t->tgfoid, "guard"))
			return t;
	}
	return NULL;
}

/*
 * Parse the settings carried by a guard trigger's arguments; false on
 * anything not understood (a newer format: the guard fails closed).
 * Row scope: 'fence_column=<c>', 'strict=on|off'.  Key scope adds
 * 'key=<column>' per key column in order, 'scope=<scope_name>' and
 * 'storage=<table of schema fencing>'.  The strings point into t.
 */
bool
FencingCitusParseGuardArgs(Trigger *t, FencingCitusGuardTriggerArgs *a)
{
	int			i;

	memset(a, 0, sizeof(FencingCitusGuardTriggerArgs));
	a->strict = true;
	for (i = 1; i < t->tgnargs; i++)
	{
		char	   *arg = t->tgargs[i];

		if (strncmp(arg, "fence_column=", 13) == 0 && arg[13] != '\0')
			a->fence_column = arg + 13;
		else if (strcmp(arg, "strict=on") == 0)
			a->strict = true;
		else if (strcmp(arg, "strict=off") == 0)
			a->strict = false;
		else if (strncmp(arg, "key=", 4) == 0 && arg[4] != '\0' &&
				 a->nkeys < INDEX_MAX_KEYS)
			a->keys[a->nkeys++] = arg + 4;
		else if (strncmp(arg, "scope=", 6) == 0 && arg[6] != '\0')
			a->scope_name = arg + 6;
		else if (strncmp(arg, "storage=", 8) == 0 && arg[8] != '\0')
			a->storage = arg + 8;
		else
			return false;
	}
	if (a->fence_column == NULL)
		return false;
	/* key scope names its scope and storage; row scope neither */
	return (a->nkeys > 0) == (a->scope_name != NULL) &&
		(a->nkeys > 0) == (a->storage != NULL);
}

/*
 * The settings that the Citus guard trigger of rel carries, for the
 * replay of a shard transfer (citus_transfer.c), where the shard may not
 * be in Citus' metadata yet: its fence column, and in key scope its scope
 * and storage table in schema fencing (*storage NULL in row scope).  The
 * strings point into rel's trigger data.  False when rel has no such
 * trigger, its settings cannot be read, or Citus is absent.
 */
bool
FencingCitusGuardSettings(Relation rel, const char **fence_column,
						  const char **scope_name, const char **storage)
{
	Trigger    *t = FencingCitusGuardTrigger(rel);
	FencingCitusGuardTriggerArgs args;

	if (t == NULL || !FencingCitusParseGuardArgs(t, &args) || !FencingCitusPresent())
		return false;
	*fence_column = args.fence_column;
	*scope_name = args.scope_name;
	*storage = args.storage;
	return true;
}

/*
 * The guard row trigger of relid with Citus settings, from the catalog
 * (no relation opened, no lock taken), as a Trigger with its name and
 * arguments only; false when there is none.
 */
bool
FencingCitusCatalogGuardTrigger(Oid relid, Trigger *t)
{
	Relation	tgrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	memset(t, 0, sizeof(Trigger));
	ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(tgrel, TriggerRelidNameIndexId, true, NULL, 1, &key);
	while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_trigger trig = (Form_pg_trigger) GETSTRUCT(tup);
		bool		isnull;
		Datum		d;
		char	   *p;
		int			i;

		if (trig->tgnargs < 1 || !TRIGGER_FOR_ROW(trig->tgtype) ||
			!TRIGGER_FOR_BEFORE(trig->tgtype) ||
			!FencingCitusIsFencingFunction(trig->tgfoid, "guard"))
			continue;
		d = heap_getattr(tup, Anum_pg_trigger_tgargs, RelationGetDescr(tgrel), &isnull);
		if (isnull)
			continue;
		p = VARDATA_ANY(DatumGetByteaPP(d));
		t->tgnargs = trig->tgnargs;
		t->tgargs = palloc(sizeof(char *) * trig->tgnargs);
		for (i = 0; i < trig->tgnargs; i++)
		{
			t->tgargs[i] = pstrdup(p);
			p += strlen(p) + 1;
		}
		if (strcmp(t->tgargs[0], CITUS_ARGS_TAG) != 0)
			continue;
		t->tgname = pstrdup(NameStr(trig->tgname));
		found = true;
	}
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);
	return found;
}

/*
 * The same from the catalog, for a relation not opened: in key scope its
 * scope and storage (*storage NULL in row scope), palloc'd.
 */
bool
FencingCitusCatalogGuardSettings(Oid relid, const char **scope_name,
								 const char **storage)
{
	Trigger		t;
	FencingCitusGuardTriggerArgs args;

	if (!FencingCitusCatalogGuardTrigger(relid, &t) || !FencingCitusParseGuardArgs(&t, &args))
		return false;
	*scope_name = args.scope_name;
	*storage = args.storage;
	return true;
}
