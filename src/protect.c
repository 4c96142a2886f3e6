/*-------------------------------------------------------------------------
 *
 * protect.c
 *	  fencing.protect() and fencing.unprotect(): install and remove the
 *	  guard triggers of a table, and record its settings in
 *	  fencing.protected.
 *
 * Written in C rather than as a SECURITY DEFINER function because two
 * identities are needed: the caller's, to check that the caller owns the
 * table and to create the triggers; and the extension owner's, to write
 * fencing.protected and the scope storage (scope_storage.c), which no
 * other role may write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "utils/acl.h"
#include "utils/varlena.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "cluster.h"
#include "compat.h"
#include "ddl_guard.h"
#include "extension.h"
#include "lease.h"
#include "protection.h"
#include "scope_storage.h"
#include "stats.h"

PG_FUNCTION_INFO_V1(fencing_protect);
PG_FUNCTION_INFO_V1(fencing_unprotect);

/* The relation and, for a partitioned table, all its partitions. */
static List *
RelationTree(Relation rel)
{
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		return find_all_inheritors(RelationGetRelid(rel), ShareRowExclusiveLock, NULL);
	return list_make1_oid(RelationGetRelid(rel));
}

/* Check that the current user owns rel and that rel can be protected. */
static void
CheckProtectable(Relation rel, const char *action)
{
	char		relkind = rel->rd_rel->relkind;

	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("cannot %s \"%s\"", action, RelationGetRelationName(rel)),
				 errdetail("Only tables and partitioned tables can be protected by fencing.")));
	if (!FencingOwnsRelation(RelationGetRelid(rel), GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(relkind),
					   RelationGetRelationName(rel));
}

/*
 * The check of CheckProtectable() that needs no lock, made before the
 * table is locked, as PostgreSQL's own commands do it (the callbacks of
 * RangeVarGetRelidExtended): a role that does not own the table learns it
 * at once, and never queues for the lock, making every writer of the
 * table wait behind it.  The message is PostgreSQL's own, naming the
 * table as pg_class does to every role.  CheckProtectable() checks again
 * under the lock (the owner may change while we wait).
 */
static void
CheckOwnerBeforeLock(Oid relid)
{
	HeapTuple	tup;
	char		relkind;
	char	   *relname;

	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	relkind = ((Form_pg_class) GETSTRUCT(tup))->relkind;
	relname = pstrdup(NameStr(((Form_pg_class) GETSTRUCT(tup))->relname));
	ReleaseSysCache(tup);
	if (!FencingOwnsRelation(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(relkind), relname);
}

/*
 * Is relid named in fencing.protected (in key or table scope scope_name,
 * when that is not NULL)?  Read as it is now, at every isolation level
 * (the caller holds the table's lock).  Runs inside SPI.
 */
static bool
IsProtected(Oid relid, const char *scope_name)
{
	Oid			argtypes[2] = {OIDOID, TEXTOID};
	Datum		values[2];
	int			rc;

	values[0] = ObjectIdGetDatum(relid);
	if (scope_name == NULL)
		rc = FencingExecuteLatest("SELECT 1 FROM fencing.protected "
								  "WHERE relid OPERATOR(pg_catalog.=) $1",
								  1, argtypes, values, NULL, true, 1);
	else
	{
		values[1] = CStringGetTextDatum(scope_name);
		rc = FencingExecuteLatest("SELECT 1 FROM fencing.protected "
								  "WHERE relid OPERATOR(pg_catalog.=) $1 "
								  "AND scope_name OPERATOR(pg_catalog.=) $2 "
								  "AND key_columns IS NOT NULL",
								  2, argtypes, values, NULL, true, 1);
	}
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.protected: %s",
			 SPI_result_code_string(rc));
	return SPI_processed > 0;
}

/* Validate the column named colname of rel; return its attnum. */
static AttrNumber
CheckColumn(Relation rel, const char *colname, bool must_be_fence)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), colname);

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of table \"%s\" does not exist",
						colname, RelationGetRelationName(rel))));
	if (attnum < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("system column \"%s\" cannot be used by fencing", colname)));
	if (must_be_fence &&
		get_atttype(RelationGetRelid(rel), attnum) != FencingTypeOid())
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of table \"%s\" is not of type fencing.fence",
						colname, RelationGetRelationName(rel)),
				 errdetail("Column \"%s\" is of type %s.", colname,
						   format_type_be(get_atttype(RelationGetRelid(rel), attnum))),
				 errhint("Add a column of type fencing.fence: ALTER TABLE %s ADD COLUMN fence fencing.fence;",
						 quote_identifier(RelationGetRelationName(rel)))));
	return attnum;
}

/* Drop trigger name of relid, if it is there. */
static void
DropTrigger(Oid relid, const char *name)
{
	if (OidIsValid(get_trigger_oid(relid, name, true)))
		FencingRunUtility(psprintf("DROP TRIGGER %s ON %s", name, FencingQualifiedName(relid)));
}

/* Drop and recreate the guard triggers on every relation of the tree. */
static void
InstallTriggers(Oid relid, void *arg)
{
	List	   *tree = (List *) arg;
	char	   *qname = FencingQualifiedName(relid);
	ListCell   *lc;

	DropTrigger(relid, FENCING_GUARD_TRIGGER);
	/* citus: a distributed table's guard carries its settings (citus.c) */
	FencingRunUtility(psprintf("CREATE TRIGGER " FENCING_GUARD_TRIGGER
					" BEFORE INSERT OR UPDATE OR DELETE ON %s"
					" FOR EACH ROW EXECUTE FUNCTION fencing.guard(%s)", qname,
					FencingClusterGuardArgs(relid)));

	/*
	 * Statement triggers are not inherited by partitions, so TRUNCATE is
	 * guarded on each of them; the DDL guard adds it to partitions created
	 * or attached later.  The row trigger is cloned to partitions.
	 */
	foreach(lc, tree)
	{
		char	   *qpart = FencingQualifiedName(lfirst_oid(lc));

		DropTrigger(lfirst_oid(lc), FENCING_TRUNCATE_TRIGGER);
		FencingRunUtility(psprintf("CREATE TRIGGER " FENCING_TRUNCATE_TRIGGER
						" BEFORE TRUNCATE ON %s"
						" FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()",
						qpart));
		/*
		 * citus: one trigger per ALTER TABLE, as Citus requires; and a
		 * partition's guard is a clone, enabled with its parent's, which
		 * Citus would look for under another name on the shards.
		 */
		if (lfirst_oid(lc) == relid || FencingClusterGuardArgs(relid)[0] == '\0')
			FencingRunUtility(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER " FENCING_GUARD_TRIGGER,
							qpart));
		FencingRunUtility(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER " FENCING_TRUNCATE_TRIGGER,
						qpart));
	}
}

/* Drop the guard triggers from every relation of the tree. */
static void
RemoveTriggers(Oid relid, void *arg)
{
	List	   *tree = (List *) arg;
	ListCell   *lc;

	DropTrigger(relid, FENCING_GUARD_TRIGGER);
	foreach(lc, tree)
		DropTrigger(lfirst_oid(lc), FENCING_TRUNCATE_TRIGGER);
}

/* Invalidate the cached guard settings of every relation of the tree. */
static void
InvalidateTree(List *tree)
{
	ListCell   *lc;

	foreach(lc, tree)
		CacheInvalidateRelcacheByRelid(lfirst_oid(lc));
}

/* Does a foreign key's action write the referencing table? */
static inline bool
ActionWrites(char action)
{
	return action == FKCONSTR_ACTION_CASCADE || action == FKCONSTR_ACTION_SETNULL ||
		action == FKCONSTR_ACTION_SETDEFAULT;
}

/*
 * WARN about each foreign key of the tables of tree whose action writes
 * them (ON UPDATE/ON DELETE CASCADE, SET NULL, SET DEFAULT) and whose
 * referenced table belongs to a role without the privileges of the
 * protected table's owner: that role's changes of its own rows would write the protected
 * table, and the guard refuses them (42501) unless the role may write it.
 */
static void
WarnForeignActions(List *tree, Oid owner, const char *protected_name)
{
	Relation	conrel = table_open(ConstraintRelationId, AccessShareLock);
	ListCell   *lc;

	foreach(lc, tree)
	{
		Oid			relid = lfirst_oid(lc);
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&key, Anum_pg_constraint_conrelid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(relid));
		scan = systable_beginscan(conrel, ConstraintRelidTypidNameIndexId, true,
								  NULL, 1, &key);
		while (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			Form_pg_constraint con = (Form_pg_constraint) GETSTRUCT(tup);
			Oid			ref_owner;
			char	   *ref_owner_name;

			if (con->contype != CONSTRAINT_FOREIGN ||
				(!ActionWrites(con->confupdtype) && !ActionWrites(con->confdeltype)))
				continue;
			ref_owner = FencingRelOwner(con->confrelid);
			if (!OidIsValid(ref_owner) || has_privs_of_role(ref_owner, owner))
				continue;
			ref_owner_name = GetUserNameFromId(ref_owner, true);
			ereport(WARNING,
					(errcode(ERRCODE_WARNING),
					 errmsg("foreign key \"%s\" of protected table \"%s\" follows table \"%s\" of role \"%s\"",
							NameStr(con->conname), protected_name,
							get_rel_name(con->confrelid),
							ref_owner_name ? ref_owner_name : "?"),
					 errdetail("Its ON UPDATE or ON DELETE action writes the protected table when that role changes its own rows; the guard refuses such a write (42501) unless the role may write the protected table itself, so that no other role moves its fences."),
					 errhint("Declare the foreign key ON UPDATE/ON DELETE RESTRICT or NO ACTION, or reference a table of the protected table's owner.")));
		}
		systable_endscan(scan);
	}
	table_close(conrel, AccessShareLock);
}

/*
 * fencing.protect(tbl, fence_column, key_columns, strict, scope_name, lease):
 * install the guard and record the settings; a second call changes them.
 */
Datum
fencing_protect(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *fence_column;
	Datum		keyarray = (Datum) 0;
	Datum	   *keynames = NULL;
	int			nkeys = -1;
	bool		strict;
	char	   *scope_name;
	char	   *lease = NULL;
	Relation	rel;
	List	   *tree;
	FencingSavedUser saved;
	AttrNumber	key_attnums[INDEX_MAX_KEYS];
	const char *key_names[INDEX_MAX_KEYS];
	int			i;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table must not be null")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("fence_column must not be null")));
	if (PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("strict must not be null")));
	relid = PG_GETARG_OID(0);
	fence_column = pstrdup(NameStr(*PG_GETARG_NAME(1)));
	strict = PG_GETARG_BOOL(3);

	CheckOwnerBeforeLock(relid);
	rel = table_open(relid, ShareRowExclusiveLock);
	CheckProtectable(rel, "protect");
	CheckColumn(rel, fence_column, true);

	if (!PG_ARGISNULL(2))
	{
		ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(2);

		keyarray = PointerGetDatum(arr);
		if (ARR_NDIM(arr) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("key_columns must be a one-dimensional array")));
		if (array_contains_nulls(arr))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("key_columns must not contain nulls")));
		deconstruct_array(arr, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR,
						  &keynames, NULL, &nkeys);
		if (nkeys > INDEX_MAX_KEYS)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("too many key columns: %d", nkeys),
					 errdetail("A key scope has at most %d columns.", INDEX_MAX_KEYS)));
		for (i = 0; i < nkeys; i++)
		{
			const char *name = NameStr(*DatumGetName(keynames[i]));
			int			j;

			key_attnums[i] = CheckColumn(rel, name, false);
			key_names[i] = name;
			FencingCheckKeyColumnType(rel, key_attnums[i], name);
			if (strcmp(name, fence_column) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("the fence column \"%s\" cannot be a key column", name)));
			for (j = 0; j < i; j++)
				if (strcmp(name, NameStr(*DatumGetName(keynames[j]))) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_DUPLICATE_COLUMN),
							 errmsg("key column \"%s\" is listed twice", name)));
		}
	}

	if (PG_ARGISNULL(4))
		scope_name = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel));
	else
	{
		scope_name = text_to_cstring(PG_GETARG_TEXT_PP(4));
		FencingCheckScopeName(scope_name);
	}

	/* the lease every write must hold (see lease.c); need not exist yet */
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
	{
		lease = text_to_cstring(PG_GETARG_TEXT_PP(5));
		if (lease[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("lease must not be empty"),
					 errhint("Pass NULL to protect the table without a lease.")));
	}

	tree = RelationTree(rel);

	/* citus: refuse what cannot hold across shards (citus.c) */
	FencingClusterCheckProtect(rel, fence_column, nkeys, keynames, strict, scope_name, lease);

	/* the DDL guard: columns the guard can trust, inheritance trees */
	FencingCheckProtectable(rel, fence_column, nkeys, keynames);

	/* a lease of a role the table's owner acts for (lease.c) */
	if (lease != NULL)
		FencingCheckLeaseForTable(lease, rel->rd_rel->relowner, rel);

	FencingSpiConnect();

	/*
	 * key and table scope: the scope's storage, the caller's to use; a table
	 * protected in the scope already finds it there, or its fences are lost
	 */
	if (nkeys >= 0)
	{
		Oid			storage = FencingScopeStorageFor(scope_name, rel, nkeys, key_attnums,
											  key_names,
											  IsProtected(relid, scope_name));

		/* citus: distributed co-located with a distributed table (citus.c) */
		FencingClusterPrepareStorage(rel, storage);
	}

	/*
	 * The triggers, as the caller, who owns the table.  Our own reference to
	 * the relation must be gone for ALTER TABLE; the lock stays.
	 */
	table_close(rel, NoLock);
	FencingRunWithDdlGuardSuspended(InstallTriggers, relid, tree);
	FencingGuardTree(relid);	/* ddlguard: inheritance children too */

	/*
	 * the catalog, as the extension owner; as it is now, at every isolation
	 * level (a row committed since a REPEATABLE READ snapshot is updated)
	 */
	FencingBecomeOwner(&saved);
	{
		Oid			argtypes[6] = {OIDOID, NAMEOID, NAMEARRAYOID, BOOLOID, TEXTOID, TEXTOID};
		Datum		values[6];
		char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
		int			rc;

		values[0] = ObjectIdGetDatum(relid);
		values[1] = PG_GETARG_DATUM(1);
		values[2] = keyarray;
		if (nkeys < 0)
			nulls[2] = 'n';
		values[3] = BoolGetDatum(strict);
		values[4] = CStringGetTextDatum(scope_name);
		values[5] = lease ? CStringGetTextDatum(lease) : (Datum) 0;
		if (lease == NULL)
			nulls[5] = 'n';
		rc = FencingExecuteLatest("INSERT INTO fencing.protected AS p "
								  "(relid, fence_column, key_columns, strict, scope_name, lease) "
								  "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (relid) DO UPDATE "
								  "SET fence_column = EXCLUDED.fence_column, "
								  "key_columns = EXCLUDED.key_columns, "
								  "strict = EXCLUDED.strict, "
								  "scope_name = EXCLUDED.scope_name, "
								  "lease = EXCLUDED.lease",
								  6, argtypes, values, nulls, false, 0);
		if (rc != SPI_OK_INSERT)
			elog(ERROR, "could not record the protection: %s",
				 SPI_result_code_string(rc));
	}
	FencingRestoreUser(&saved);

	SPI_finish();

	/* a write older than a fence already in a row is refused from now on */
	if (nkeys >= 0)
		FencingSeedScopesFrom(relid, relid);

	InvalidateTree(tree);
	WarnForeignActions(tree, FencingRelOwner(relid), get_rel_name(relid));
	PG_RETURN_VOID();
}

/* fencing.unprotect(tbl): remove the guard and the recorded settings. */
Datum
fencing_unprotect(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Relation	rel;
	List	   *tree;
	FencingSavedUser saved;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table must not be null")));
	relid = PG_GETARG_OID(0);
	CheckOwnerBeforeLock(relid);
	rel = table_open(relid, ShareRowExclusiveLock);
	CheckProtectable(rel, "unprotect");
	tree = RelationTree(rel);

	FencingSpiConnect();
	if (!IsProtected(relid, NULL))
	{
		ereport(NOTICE,
				(errmsg("table \"%s\" is not protected, skipping",
						RelationGetRelationName(rel))));
		SPI_finish();
		table_close(rel, NoLock);
		PG_RETURN_VOID();
	}

	table_close(rel, NoLock);
	FencingRunWithDdlGuardSuspended(RemoveTriggers, relid, tree);
	FencingUnguardTree(relid);	/* ddlguard: inheritance children too */

	FencingBecomeOwner(&saved);
	{
		Oid			argtypes[1] = {OIDOID};
		Datum		values[1] = {ObjectIdGetDatum(relid)};
		int			rc;

		rc = FencingExecuteLatest("DELETE FROM fencing.protected "
								  "WHERE relid OPERATOR(pg_catalog.=) $1",
								  1, argtypes, values, NULL, false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "could not remove the protection: %s",
				 SPI_result_code_string(rc));
	}
	FencingRestoreUser(&saved);
	FencingStatsForget(relid);

	SPI_finish();
	InvalidateTree(tree);
	PG_RETURN_VOID();
}
