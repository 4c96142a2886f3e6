/*-------------------------------------------------------------------------
 *
 * guard_config.c
 *	  What fencing.protected says of a relation, cached per relation for
 *	  the guard trigger and invalidated by relcache callbacks.
 *
 * A partition or inheritance child is protected through its protected
 * ancestor (protection.c finds it): its entry
 * carries the ancestor's settings with the column numbers of the partition
 * itself (they may differ from the parent's).  protect() and unprotect()
 * send a relcache invalidation for every relation of the tree, which
 * reaches every backend when they commit.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/regproc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "cluster.h"
#include "compat.h"
#include "extension.h"
#include "fence.h"
#include "guard_config.h"
#include "protection.h"
#include "scope_storage.h"
#include "scopes.h"
#include "stats.h"
#include "trigger_code.h"

typedef struct GuardConfigEntry
{
	GuardConfig config;			/* config.relid is the hash key */
	MemoryContext cxt;			/* holds what the config points to */
} GuardConfigEntry;

static HTAB *guard_configs = NULL;

/*
 * The entry the last call returned: a bulk statement asks for the same
 * relation a million times.  Entries of a dynahash table never move and
 * are never removed here, so the pointer stays good; validity is the
 * entry's own flag, which the callbacks clear.
 */
static GuardConfigEntry *last_entry = NULL;

/* Relcache callback: mark the entry of relid (or all) invalid. */
static void
InvalidateGuardConfig(Datum arg pg_attribute_unused(), Oid relid)
{
	HASH_SEQ_STATUS status;
	GuardConfigEntry *entry;

	if (guard_configs == NULL)
		return;
	if (OidIsValid(relid))
	{
		entry = hash_search(guard_configs, &relid, HASH_FIND, NULL);
		if (entry != NULL)
			entry->config.valid = false;
		return;
	}
	hash_seq_init(&status, guard_configs);
	while ((entry = hash_seq_search(&status)) != NULL)
		entry->config.valid = false;
}


/*
 * Syscache callback (functions, roles, memberships): whether a trigger's
 * code is still its table owner's may have changed for any table.
 */
static void
InvalidateGuardConfigs(Datum arg pg_attribute_unused(), int cacheid pg_attribute_unused(),
					   uint32 hashvalue pg_attribute_unused())
{
	InvalidateGuardConfig((Datum) 0, InvalidOid);
}

/*
 * Find the first trigger of rel (other than the guard's own) whose code
 * belongs to a role no longer trusted with the table (trigger_code.c):
 * after REVOKE of a membership, ALTER TABLE ... OWNER TO, ALTER FUNCTION
 * ... OWNER TO or REASSIGN OWNED, none of which the DDL guard can refuse
 * in every case.  Cached with the settings; the syscache callbacks above
 * and the table's relcache invalidation make it be looked at again.
 */
static void
FindForeignTriggerCode(Relation rel, GuardConfig *cfg)
{
	TriggerDesc *td = rel->trigdesc;
	int			i;

	for (i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *trig = &td->triggers[i];
		ListCell   *lc;

		if (trig->tgisinternal ||
			strcmp(trig->tgname, FENCING_GUARD_TRIGGER) == 0 ||
			strcmp(trig->tgname, FENCING_TRUNCATE_TRIGGER) == 0)
			continue;
		foreach(lc, FencingTriggerCode(trig->tgoid, trig->tgfoid))
		{
			Oid			fn = lfirst_oid(lc);
			Oid			owner = FencingFunctionOwner(fn, false);

			if (!OidIsValid(owner) ||
				FencingCodeOwnerTrusted(owner, RelationGetRelid(rel), cfg->protected_relid))
				continue;
			cfg->foreign_trigger = pstrdup(trig->tgname);
			cfg->foreign_function = fn;
			cfg->foreign_owner = owner;
			return;
		}
	}
}

/* A role's name for messages; "?" for a role that is gone. */
static const char *
RoleName(Oid role)
{
	char	   *name = GetUserNameFromId(role, true);

	return name != NULL ? name : "?";
}

/* Raise SF005 for a write through a trigger whose code is foreign. */
static void
ReportForeignTriggerCode(Relation rel, GuardConfig *cfg)
{
	const char *table_owner = RoleName(rel->rd_rel->relowner);

	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("trigger \"%s\" on table \"%s\" runs function %s, owned by role \"%s\"",
					cfg->foreign_trigger, RelationGetRelationName(rel),
					format_procedure(cfg->foreign_function),
					RoleName(cfg->foreign_owner)),
			 errdetail("Table \"%s\" is protected by fencing: the code of its triggers must belong to a superuser or to a member of the table's owner \"%s\" when a write happens, because the owner of a function can change its code, and with it the token that the guard judges. Writes to the table are refused until this is fixed.",
					   RelationGetRelationName(rel), table_owner),
			 errhint("Drop the trigger, or give the function to the table's owner: ALTER FUNCTION %s OWNER TO %s.",
					 format_procedure_qualified(cfg->foreign_function),
					 quote_identifier(table_owner)),
			 errtable(rel)));
}

/* Raise SF005 for a trigger whose table's settings cannot be used. */
static void
ReportBrokenGuard(Relation rel, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("the fencing guard of table \"%s\" is broken",
					RelationGetRelationName(rel)),
			 errdetail_internal("%s", detail),
			 errhint("Call fencing.protect() on the table again to repair its settings, or fencing.unprotect() to remove the guard."),
			 errtable(rel)));
}

/*
 * The guard compares keys with the scope storage's operators: the key
 * columns of rel must have the storage's types and collations (SF005).
 */
static void
CheckKeysMatchScope(Relation rel, GuardConfig *cfg)
{
	ScopeStorage *scope = cfg->scope;
	TupleDesc	desc = RelationGetDescr(rel);
	int			i;

	if (scope->table_scope != (cfg->nkeys == 0) ||
		(!scope->table_scope && scope->nkeys != cfg->nkeys))
		ReportBrokenGuard(rel, psprintf("Its key columns do not match fence scope \"%s\".",
										cfg->scope_name));
	for (i = 0; !scope->table_scope && i < cfg->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, cfg->key_attnums[i] - 1);

		if (getBaseType(att->atttypid) != scope->types[i] ||
			att->attcollation != scope->collations[i])
			ReportBrokenGuard(rel, psprintf("Its key column \"%s\" is of type %s, which fence scope \"%s\" does not key.",
											NameStr(att->attname),
											format_type_be(att->atttypid),
											cfg->scope_name));
	}
}

/*
 * Read the settings of relid from fencing.protected into entry; false when
 * relid is not named there.  Read as they are now, as the catalogs are
 * (the guard trigger was found in them): a writer whose REPEATABLE READ
 * snapshot predates the protection is judged by it, rather than refused as
 * broken.  Runs inside SPI.
 */
static bool
ReadProtectedRow(Relation rel, Oid relid, GuardConfigEntry *entry)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		keys;
	char	   *fence_column;
	GuardConfig *cfg = &entry->config;
	MemoryContext oldcxt;
	int			rc;

	rc = FencingExecuteLatest("SELECT fence_column, key_columns, strict, scope_name, lease "
							  "FROM fencing.protected "
							  "WHERE relid OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.protected: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	oldcxt = MemoryContextSwitchTo(entry->cxt);

	cfg->protected = true;
	cfg->protected_relid = relid;
	fence_column = NameStr(*DatumGetName(SPI_getbinval(tup, desc, 1, &isnull)));
	cfg->fence_attnum = get_attnum(RelationGetRelid(rel), fence_column);
	if (cfg->fence_attnum <= 0 ||
		get_atttype(RelationGetRelid(rel), cfg->fence_attnum) != FencingTypeOid())
		ReportBrokenGuard(rel, psprintf("Its fence column \"%s\" is missing or not of type fencing.fence.",
										fence_column));

	keys = SPI_getbinval(tup, desc, 2, &isnull);
	if (isnull)
		cfg->nkeys = -1;
	else
	{
		Datum	   *names;
		int			i;

		deconstruct_array(DatumGetArrayTypeP(keys), NAMEOID, NAMEDATALEN, false,
						  TYPALIGN_CHAR, &names, NULL, &cfg->nkeys);
		cfg->key_attnums = palloc(sizeof(AttrNumber) * Max(cfg->nkeys, 1));
		for (i = 0; i < cfg->nkeys; i++)
		{
			const char *name = NameStr(*DatumGetName(names[i]));

			cfg->key_attnums[i] = get_attnum(RelationGetRelid(rel), name);
			if (cfg->key_attnums[i] <= 0)
				ReportBrokenGuard(rel, psprintf("Its key column \"%s\" is missing.", name));
		}
	}
	cfg->strict = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
	cfg->scope_name = TextDatumGetCString(SPI_getbinval(tup, desc, 4, &isnull));
	keys = SPI_getbinval(tup, desc, 5, &isnull);
	cfg->lease = isnull ? NULL : TextDatumGetCString(keys);
	if (cfg->lease != NULL)
	{
		HeapTuple	ctup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));

		if (!HeapTupleIsValid(ctup))
			elog(ERROR, "cache lookup failed for relation %u", relid);
		cfg->table_owner = ((Form_pg_class) GETSTRUCT(ctup))->relowner;
		ReleaseSysCache(ctup);
	}

	/* key and table scope: where the scope's fences are */
	if (cfg->nkeys >= 0 && FencingScopeStorageLayout())
	{
		cfg->scope = FencingScopeStorageOpen(cfg->scope_name, entry->cxt);
		/* not "protect again": that would start the scope from the rows */
		if (cfg->scope == NULL)
			FencingReportScopeStorageMissing(cfg->scope_name, relid);
		CheckKeysMatchScope(rel, cfg);
		/* citus: a distributed storage is written on its shards only */
		FencingClusterCheckLocalStorage(rel, cfg->scope);
	}
	else if (cfg->nkeys >= 0)
	{
		int			i;

		/* extension objects at 1.0: keys are text (scopes_1_0.c) */
		cfg->legacy_scopes = true;
		cfg->key_out = palloc(sizeof(FmgrInfo) * Max(cfg->nkeys, 1));
		for (i = 0; i < cfg->nkeys; i++)
		{
			Oid			func;
			bool		isvarlena;

			getTypeOutputInfo(get_atttype(RelationGetRelid(rel), cfg->key_attnums[i]),
							  &func, &isvarlena);
			fmgr_info_cxt(func, &cfg->key_out[i], entry->cxt);
		}
	}
	MemoryContextSwitchTo(oldcxt);
	return true;
}

/* Fill entry from fencing.protected for rel or its nearest protected ancestor. */
static void
LoadGuardConfig(Relation rel, GuardConfigEntry *entry)
{
	GuardConfig *cfg = &entry->config;
	Oid			relid = RelationGetRelid(rel);

	if (entry->cxt != NULL)
		MemoryContextDelete(entry->cxt);
	entry->cxt = AllocSetContextCreate(CacheMemoryContext, "fencing guard config",
									   ALLOCSET_SMALL_SIZES);
	MemoryContextCopyAndSetIdentifier(entry->cxt, RelationGetRelationName(rel));
	memset(cfg, 0, sizeof(GuardConfig));
	cfg->relid = relid;
	cfg->protected = false;

	FencingSpiConnect();
	/* ddlguard: the protecting table, through partitions and inheritance */
	if (OidIsValid(FencingProtectedBy(relid)))
		(void) ReadProtectedRow(rel, FencingProtectedBy(relid), entry);
	SPI_finish();
	/* citus: a shard of a distributed table, by its trigger's settings */
	if (!cfg->protected)
	{
		FencingClusterShardGuardConfig(rel, cfg, entry->cxt);
		/* in key scope, its co-located storage shard */
		if (cfg->protected && cfg->scope != NULL)
			CheckKeysMatchScope(rel, cfg);
	}

	if (cfg->protected)
	{
		MemoryContext old = MemoryContextSwitchTo(entry->cxt);

		cfg->stats = FencingStatsGetEntry(cfg->protected_relid);
		FindForeignTriggerCode(rel, cfg);
		MemoryContextSwitchTo(old);
	}
	cfg->valid = true;
}

/*
 * The guard settings of rel.  Fails closed: a guard trigger on a relation
 * that fencing.protected does not name raises SF005.
 */
GuardConfig *
FencingGetGuardConfig(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	GuardConfigEntry *entry;
	bool		found;

	if (likely(last_entry != NULL && last_entry->config.relid == relid &&
			   last_entry->config.valid && last_entry->config.protected &&
			   last_entry->config.foreign_trigger == NULL))
		return &last_entry->config;

	if (guard_configs == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(GuardConfigEntry);
		ctl.hcxt = CacheMemoryContext;
		guard_configs = hash_create("fencing guard configs", 64, &ctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

		/*
		 * With the first entry, not at library load: a backend has room for
		 * ten relcache callbacks, and one that never guards a write (the
		 * walsender of a Citus shard split) must not run out for ours.
		 */
		CacheRegisterRelcacheCallback(InvalidateGuardConfig, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, InvalidateGuardConfigs, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, InvalidateGuardConfigs, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, InvalidateGuardConfigs, (Datum) 0);
	}
	entry = hash_search(guard_configs, &relid, HASH_ENTER, &found);
	if (!found)
	{
		entry->cxt = NULL;
		entry->config.valid = false;
	}
	if (!entry->config.valid)
	{
		PG_TRY();
		{
			LoadGuardConfig(rel, entry);
		}
		PG_CATCH();
		{
			entry->config.valid = false;
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	if (!entry->config.protected)
		ReportBrokenGuard(rel, "The table has a fencing trigger but fencing.protected does not list it.");
	if (unlikely(entry->config.foreign_trigger != NULL))
		ReportForeignTriggerCode(rel, &entry->config);
	last_entry = entry;
	return &entry->config;
}
