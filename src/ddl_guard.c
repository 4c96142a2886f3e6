/*-------------------------------------------------------------------------
 *
 * ddl_guard.c
 *	  Guarding the guard: the event triggers that keep a protected table's
 *	  fencing triggers in place.
 *
 * fencing.ddl_guard_start() (ddl_command_start) refuses with SF005 the DDL
 * that would lower a protected table's protection: disabling, re-moding,
 * dropping or renaming its fencing triggers, and dropping, retyping or
 * renaming its fence or key columns.  Only changes that lower protection
 * are refused, so that pg_restore (CREATE TRIGGER, then ENABLE ALWAYS
 * TRIGGER) and ordinary schema changes keep working.  protect() and
 * unprotect() run their own DDL with FencingDdlGuardSuspended set.
 *
 * fencing.ddl_guard_end() (ddl_command_end) guards the partitions created
 * or attached under a protected table (the row trigger is cloned by
 * PostgreSQL, the TRUNCATE trigger is not, and both must fire ALWAYS), and
 * keeps a detached partition protected on its own with its parent's
 * settings: nothing but unprotect() takes a table out of protection.
 *
 * fencing.ddl_guard_drop() (sql_drop) removes dropped tables from
 * fencing.protected.  Their fences in fencing.scopes stay: a table created
 * again under the same name and protected again must not accept tokens
 * older than those its predecessor accepted.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "fencing.h"

PG_FUNCTION_INFO_V1(fencing_ddl_guard_start);
PG_FUNCTION_INFO_V1(fencing_ddl_guard_end);
PG_FUNCTION_INFO_V1(fencing_ddl_guard_drop);

/* One row of fencing.protected, as the DDL guard needs it. */
typedef struct Protection
{
	Oid			relid;
	char	   *fence_column;
	int			nkeys;			/* -1: row scope */
	char	  **key_columns;
	bool		strict;
	char	   *scope_name;
} Protection;

/* The lock taken on a table before deciding whether DDL on it is allowed. */
#define DDL_GUARD_LOCKMODE	ShareRowExclusiveLock

/* Stop with a protocol violation unless called as an event trigger. */
static void
CheckEventTriggerCall(FunctionCallInfo fcinfo, const char *name)
{
	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" was not called by the event trigger manager",
						name)));
}

/* The OID of fencing.protected, or InvalidOid while it does not exist. */
static Oid
ProtectedTableOid(void)
{
	Oid			nsp = get_namespace_oid("fencing", true);

	if (!OidIsValid(nsp))
		return InvalidOid;
	return get_relname_relid("protected", nsp);
}

/*
 * Read fencing.protected (as the extension owner, so that revoked
 * privileges cannot blind the guard).  Returns a list of Protection.
 */
static List *
LoadProtections(void)
{
	List	   *result = NIL;
	FencingSavedUser saved;
	int			rc;
	uint64		i;
	MemoryContext outer = CurrentMemoryContext;

	if (!OidIsValid(ProtectedTableOid()))
		return NIL;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	FencingBecomeOwner(&saved);
	rc = SPI_execute("SELECT relid::pg_catalog.oid, fence_column, key_columns, "
					 "strict, scope_name FROM fencing.protected", true, 0);
	FencingRestoreUser(&saved);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.protected: %s",
			 SPI_result_code_string(rc));

	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		MemoryContext spicxt;
		Protection *p;
		bool		isnull;
		Datum		keys;

		spicxt = MemoryContextSwitchTo(outer);
		p = palloc0(sizeof(Protection));
		p->relid = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
		p->fence_column = pstrdup(NameStr(*DatumGetName(SPI_getbinval(tup, desc, 2, &isnull))));
		keys = SPI_getbinval(tup, desc, 3, &isnull);
		p->nkeys = -1;
		if (!isnull)
		{
			Datum	   *elems;
			int			k;

			deconstruct_array(DatumGetArrayTypeP(keys), NAMEOID, NAMEDATALEN,
							  false, TYPALIGN_CHAR, &elems, NULL, &p->nkeys);
			p->key_columns = palloc(sizeof(char *) * Max(p->nkeys, 1));
			for (k = 0; k < p->nkeys; k++)
				p->key_columns[k] = pstrdup(NameStr(*DatumGetName(elems[k])));
		}
		p->strict = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		p->scope_name = TextDatumGetCString(SPI_getbinval(tup, desc, 5, &isnull));
		result = lappend(result, p);
		MemoryContextSwitchTo(spicxt);
	}
	SPI_finish();
	return result;
}

/* The entry of protections naming relid itself, or NULL. */
static Protection *
FindProtection(List *protections, Oid relid)
{
	ListCell   *lc;

	foreach(lc, protections)
	{
		Protection *p = lfirst(lc);

		if (p->relid == relid)
			return p;
	}
	return NULL;
}

/* The protection covering relid: its own, or that of a partition ancestor. */
static Protection *
ProtectionOf(List *protections, Oid relid)
{
	Protection *p;
	ListCell   *lc;

	if (protections == NIL)
		return NULL;
	p = FindProtection(protections, relid);
	if (p != NULL)
		return p;
	if (!get_rel_relispartition(relid))
		return NULL;
	foreach(lc, get_partition_ancestors(relid))
	{
		p = FindProtection(protections, lfirst_oid(lc));
		if (p != NULL)
			return p;
	}
	return NULL;
}

/* Is colname the fence column ("fence") or a key column ("key") of p? */
static const char *
ColumnRole(Protection *p, const char *colname)
{
	int			k;

	if (colname == NULL)
		return NULL;
	if (strcmp(colname, p->fence_column) == 0)
		return "fence";
	for (k = 0; k < p->nkeys; k++)
		if (strcmp(colname, p->key_columns[k]) == 0)
			return "key";
	return NULL;
}

/* Is name one of the fencing triggers? */
static bool
IsFencingTrigger(const char *name)
{
	return name != NULL &&
		(strcmp(name, FENCING_GUARD_TRIGGER) == 0 ||
		 strcmp(name, FENCING_TRUNCATE_TRIGGER) == 0);
}

/*
 * Raise SF005 for DDL on relid, protected by p.  what is the primary
 * message ("cannot drop trigger ..."), without the table name; column, when
 * given, goes into the error fields.
 */
static void
ReportGuardAltered(Oid relid, Protection *p, const char *what,
				   const char *column, const char *why)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	char	   *relname = RelationGetRelationName(rel);
	char	   *through = "";
	int			attnum = InvalidAttrNumber;

	if (p->relid != relid)
		through = psprintf(" (a partition of \"%s\")", get_rel_name(p->relid));
	if (column != NULL)
		attnum = get_attnum(relid, column);

	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("%s of protected table \"%s\"", what, relname),
			 errdetail("Table \"%s\"%s is protected by fencing: %s",
					   relname, through, why),
			 errhint("Call fencing.unprotect('%s') first.",
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(p->relid)),
												get_rel_name(p->relid))),
			 attnum > 0 ? errtablecol(rel, attnum) : errtable(rel)));
}

/* Refuse if colname is the fence or a key column of relid (protected by p). */
static void
CheckColumnDdl(Oid relid, Protection *p, const char *colname, const char *verb)
{
	const char *role = ColumnRole(p, colname);

	if (role == NULL)
		return;
	ReportGuardAltered(relid, p,
					   psprintf("cannot %s column \"%s\"", verb, colname),
					   colname,
					   strcmp(role, "fence") == 0 ?
					   psprintf("column \"%s\" holds its fence tokens.", colname) :
					   psprintf("column \"%s\" is a key column of its fence scope.", colname));
}

/* Refuse a change of relid's fencing trigger trigname (protected by p). */
static void
CheckTriggerDdl(Oid relid, Protection *p, const char *trigname, const char *verb)
{
	if (!IsFencingTrigger(trigname))
		return;
	ReportGuardAltered(relid, p,
					   psprintf("cannot %s trigger \"%s\"", verb, trigname),
					   NULL,
					   "its fencing triggers check every write.");
}

/*
 * The relations a command on relid reaches: relid and, unless ONLY was
 * given, its inheritance children and partitions (locked).
 */
static List *
CommandTree(Oid relid, bool inh)
{
	if (!inh || !has_subclass(relid))
		return list_make1_oid(relid);
	return find_all_inheritors(relid, DDL_GUARD_LOCKMODE, NULL);
}

/*
 * Look up rv for a check, or return InvalidOid when the check is not ours
 * to make: the relation is missing (IF EXISTS; PostgreSQL reports the
 * rest) or the current user does not own it (PostgreSQL refuses with
 * 42501).  The relation is locked, so that protect() cannot run between
 * the check and the command.
 */
static Oid
LockTarget(RangeVar *rv)
{
	Oid			relid = RangeVarGetRelid(rv, NoLock, true);

	if (!OidIsValid(relid) || !FencingOwnsRelation(relid, GetUserId()))
		return InvalidOid;
	LockRelationOid(relid, DDL_GUARD_LOCKMODE);
	return relid;
}

/*
 * LockTarget for CREATE TRIGGER, which needs only the TRIGGER privilege,
 * not ownership: a role granted TRIGGER on a protected table must not get
 * past the check because it does not own the table.
 */
static Oid
LockTriggerTarget(RangeVar *rv)
{
	Oid			relid = RangeVarGetRelid(rv, NoLock, true);

	if (!OidIsValid(relid) ||
		(!FencingOwnsRelation(relid, GetUserId()) &&
		 pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER) != ACLCHECK_OK))
		return InvalidOid;
	LockRelationOid(relid, DDL_GUARD_LOCKMODE);
	return relid;
}

/* Does this ALTER TABLE subcommand need a look at fencing.protected? */
static bool
IsGuardedSubcommand(AlterTableCmd *cmd)
{
	switch (cmd->subtype)
	{
		case AT_DropColumn:
		case AT_AlterColumnType:
		case AT_EnableTrig:
		case AT_EnableReplicaTrig:
		case AT_DisableTrig:
		case AT_EnableTrigAll:
		case AT_DisableTrigAll:
		case AT_EnableTrigUser:
		case AT_DisableTrigUser:
		case AT_AttachPartition:
		case AT_DetachPartition:
			return true;
		default:
			return false;
	}
}

/* Check one ALTER TABLE subcommand against relation relid, protected by p. */
static void
CheckSubcommand(AlterTableCmd *cmd, Oid relid, Protection *p)
{
	switch (cmd->subtype)
	{
		case AT_DropColumn:
			CheckColumnDdl(relid, p, cmd->name, "drop");
			break;
		case AT_AlterColumnType:
			CheckColumnDdl(relid, p, cmd->name, "alter type of");
			break;
		case AT_DisableTrig:
			CheckTriggerDdl(relid, p, cmd->name, "disable");
			break;
		case AT_EnableTrig:
		case AT_EnableReplicaTrig:
			/* ENABLE ALWAYS is how they are: only a change of mode lowers */
			CheckTriggerDdl(relid, p, cmd->name, "change the firing mode of");
			break;
		case AT_DisableTrigAll:
		case AT_DisableTrigUser:
			ReportGuardAltered(relid, p,
							   psprintf("cannot disable trigger \"%s\"",
										FENCING_GUARD_TRIGGER),
							   NULL,
							   cmd->subtype == AT_DisableTrigAll ?
							   "DISABLE TRIGGER ALL would disable its fencing triggers." :
							   "DISABLE TRIGGER USER would disable its fencing triggers.");
			break;
		case AT_EnableTrigAll:
		case AT_EnableTrigUser:
			ReportGuardAltered(relid, p,
							   psprintf("cannot change the firing mode of trigger \"%s\"",
										FENCING_GUARD_TRIGGER),
							   NULL,
							   "ENABLE TRIGGER ALL and ENABLE TRIGGER USER would turn its fencing triggers from ALWAYS to ORIGIN, skipped by sessions with session_replication_role = replica.");
			break;
		default:
			break;
	}
}

/* ddl_command_start for ALTER TABLE: check every subcommand. */
static void
CheckAlterTable(AlterTableStmt *stmt)
{
	ListCell   *lc;
	bool		columns = false;
	bool		triggers = false;
	bool		partitions = false;
	Oid			relid;
	List	   *protections;
	List	   *tree;
	ListCell   *lr;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if (!IsGuardedSubcommand(cmd))
			continue;
		if (cmd->subtype == AT_DropColumn || cmd->subtype == AT_AlterColumnType)
			columns = true;
		else if (cmd->subtype == AT_AttachPartition ||
				 cmd->subtype == AT_DetachPartition)
			partitions = true;
		else
			triggers = true;
	}
	if (!columns && !triggers && !partitions)
		return;
	relid = LockTarget(stmt->relation);
	if (!OidIsValid(relid))
		return;
	protections = LoadProtections();
	if (protections == NIL)
		return;

	/*
	 * Column changes recurse to inheritance children and partitions;
	 * trigger changes recurse only to partitions (their cloned triggers).
	 */
	if (columns || get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		tree = CommandTree(relid, stmt->relation->inh);
	else
		tree = list_make1_oid(relid);

	foreach(lr, tree)
	{
		Oid			member = lfirst_oid(lr);
		Protection *p = ProtectionOf(protections, member);

		if (p == NULL)
			continue;
		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

			/* trigger commands do not reach inheritance children */
			if (member != relid && !get_rel_relispartition(member) &&
				cmd->subtype != AT_DropColumn &&
				cmd->subtype != AT_AlterColumnType)
				continue;
			CheckSubcommand(cmd, member, p);
		}
	}

	if (partitions)
	{
		Protection *p = ProtectionOf(protections, relid);

		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
			PartitionCmd *pc;
			Oid			part;

			if (cmd->subtype != AT_AttachPartition &&
				cmd->subtype != AT_DetachPartition)
				continue;
			pc = (PartitionCmd *) cmd->def;
			if (p == NULL)
				continue;
			if (cmd->subtype == AT_DetachPartition && pc->concurrent)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot detach a partition of protected table \"%s\" concurrently",
								get_rel_name(relid)),
						 errdetail("A partition detached from a protected table stays protected on its own, which DETACH PARTITION ... CONCURRENTLY does not allow."),
						 errhint("Detach it without CONCURRENTLY.")));
			if (cmd->subtype == AT_AttachPartition)
			{
				ListCell   *lm;

				part = RangeVarGetRelid(pc->name, NoLock, true);
				if (!OidIsValid(part))
					continue;
				/* the table, or one of its partitions, protected on its own */
				foreach(lm, find_all_inheritors(part, NoLock, NULL))
				{
					if (FindProtection(protections, lfirst_oid(lm)) == NULL)
						continue;
					part = lfirst_oid(lm);
					ereport(ERROR,
							(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
							 errmsg("cannot attach protected table \"%s\" under protected table \"%s\"",
									get_rel_name(part), get_rel_name(relid)),
							 errdetail("A partition tree is protected as a whole, with the settings of one table."),
							 errhint("Call fencing.unprotect('%s') first.",
									 quote_qualified_identifier(get_namespace_name(get_rel_namespace(part)),
																get_rel_name(part)))));
				}
			}
		}
	}
}

/*
 * Would a trigger of this name fire after the guard?  BEFORE ROW triggers
 * fire in name order, and one firing after the guard could change the row
 * the guard has just checked (lower its fence, move its key).
 */
static bool
FiresAfterGuard(const char *name)
{
	return name != NULL && strcmp(name, FENCING_GUARD_TRIGGER) > 0;
}

/* Raise SF005 for a trigger name that would fire after the guard. */
static void
ReportLateTrigger(Oid relid, Protection *p, const char *trigname)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("trigger \"%s\" would fire after the fencing guard of protected table \"%s\"",
					trigname, get_rel_name(relid)),
			 errdetail("BEFORE ROW triggers fire in name order; one named after \"%s\" could change a row after the guard checked it, for example lower its fence.",
					   FENCING_GUARD_TRIGGER),
			 errhint("Give the trigger a name that sorts before \"%s\", or call fencing.unprotect('%s') first.",
					 FENCING_GUARD_TRIGGER,
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(p->relid)),
												get_rel_name(p->relid)))));
}

/*
 * ddl_command_start for CREATE TRIGGER: refuse a BEFORE ROW trigger that
 * would fire after the guard.
 */
static void
CheckCreateTrigger(CreateTrigStmt *stmt)
{
	Oid			relid;
	List	   *protections;
	ListCell   *lc;

	if (!stmt->row || stmt->timing != TRIGGER_TYPE_BEFORE ||
		!FiresAfterGuard(stmt->trigname))
		return;
	relid = LockTriggerTarget(stmt->relation);
	if (!OidIsValid(relid))
		return;
	protections = LoadProtections();
	/* row triggers of a partitioned table are cloned to its partitions */
	foreach(lc, CommandTree(relid, get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE))
	{
		Protection *p = ProtectionOf(protections, lfirst_oid(lc));

		if (p != NULL)
			ReportLateTrigger(lfirst_oid(lc), p, stmt->trigname);
	}
}

/* ddl_command_start for ALTER TABLE ... RENAME COLUMN and ALTER TRIGGER ... RENAME. */
static void
CheckRename(RenameStmt *stmt)
{
	Oid			relid;
	List	   *protections;
	ListCell   *lc;

	if (stmt->renameType != OBJECT_COLUMN && stmt->renameType != OBJECT_TRIGGER)
		return;
	if (stmt->renameType == OBJECT_TRIGGER && !IsFencingTrigger(stmt->subname) &&
		!FiresAfterGuard(stmt->newname))
		return;
	relid = LockTarget(stmt->relation);
	if (!OidIsValid(relid))
		return;
	protections = LoadProtections();
	if (protections == NIL)
		return;

	if (stmt->renameType == OBJECT_TRIGGER)
	{
		Protection *p = ProtectionOf(protections, relid);

		if (p != NULL)
		{
			CheckTriggerDdl(relid, p, stmt->subname, "rename");
			/* any trigger: renaming cannot tell BEFORE ROW from others cheaply */
			if (FiresAfterGuard(stmt->newname))
				ReportLateTrigger(relid, p, stmt->newname);
		}
		return;
	}
	foreach(lc, CommandTree(relid, stmt->relation->inh))
	{
		Protection *p = ProtectionOf(protections, lfirst_oid(lc));

		if (p != NULL)
			CheckColumnDdl(lfirst_oid(lc), p, stmt->subname, "rename");
	}
}

/*
 * The relation and trigger named by a trigger's object name (a list of
 * [schema,] table, trigger), or InvalidOid.
 */
static Oid
TriggerTarget(List *object, char **trigname)
{
	List	   *relname;

	*trigname = strVal(llast(object));
	if (!IsFencingTrigger(*trigname) || list_length(object) < 2)
		return InvalidOid;
	relname = list_truncate(list_copy(object), list_length(object) - 1);
	return LockTarget(makeRangeVarFromNameList(relname));
}

/* ddl_command_start for DROP TRIGGER: refuse dropping a fencing trigger. */
static void
CheckDropTrigger(DropStmt *stmt)
{
	List	   *protections = NIL;
	bool		loaded = false;
	ListCell   *lc;

	if (stmt->removeType != OBJECT_TRIGGER)
		return;
	foreach(lc, stmt->objects)
	{
		char	   *trigname;
		Oid			relid = TriggerTarget(lfirst(lc), &trigname);
		Protection *p;

		if (!OidIsValid(relid))
			continue;
		if (!loaded)
		{
			protections = LoadProtections();
			loaded = true;
		}
		p = ProtectionOf(protections, relid);
		if (p != NULL)
			CheckTriggerDdl(relid, p, trigname, "drop");
	}
}

/*
 * ddl_command_start for ALTER TRIGGER ... [NO] DEPENDS ON EXTENSION: a
 * fencing trigger that depends on an extension goes when it is dropped.
 */
static void
CheckTriggerDepends(AlterObjectDependsStmt *stmt)
{
	char	   *trigname;
	Oid			relid;
	Protection *p;

	if (stmt->objectType != OBJECT_TRIGGER || stmt->relation == NULL)
		return;
	trigname = strVal(llast(castNode(List, stmt->object)));
	if (!IsFencingTrigger(trigname))
		return;
	relid = LockTarget(stmt->relation);
	if (!OidIsValid(relid))
		return;
	p = ProtectionOf(LoadProtections(), relid);
	if (p != NULL)
		CheckTriggerDdl(relid, p, trigname, "change the dependencies of");
}

/*
 * fencing.ddl_guard_start(): the ddl_command_start event trigger; refuses
 * DDL that would lower a protected table's protection.
 */
Datum
fencing_ddl_guard_start(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;

	CheckEventTriggerCall(fcinfo, "ddl_guard_start");
	if (FencingDdlGuardSuspended)
		PG_RETURN_NULL();
	trigdata = (EventTriggerData *) fcinfo->context;
	FencingCitusDdlGuardStart(trigdata->parsetree);	/* citus: shards (citus.c) */

	switch (nodeTag(trigdata->parsetree))
	{
		case T_AlterTableStmt:
			CheckAlterTable((AlterTableStmt *) trigdata->parsetree);
			break;
		case T_RenameStmt:
			CheckRename((RenameStmt *) trigdata->parsetree);
			break;
		case T_DropStmt:
			CheckDropTrigger((DropStmt *) trigdata->parsetree);
			break;
		case T_AlterObjectDependsStmt:
			CheckTriggerDepends((AlterObjectDependsStmt *) trigdata->parsetree);
			break;
		case T_CreateTrigStmt:
			CheckCreateTrigger((CreateTrigStmt *) trigdata->parsetree);
			break;
		default:
			break;
	}
	PG_RETURN_NULL();
}

/* Run one SQL command through SPI; elog on an unexpected result. */
static void
RunSql(const char *sql)
{
	int			rc = SPI_execute(sql, false, 0);

	if (rc != SPI_OK_UTILITY && rc != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed for \"%s\": %s", sql,
			 SPI_result_code_string(rc));
}

/* The tgenabled of trigger name on relid, or '\0' when there is none. */
static char
TriggerEnabled(Oid relid, const char *name)
{
	Relation	tgrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tup;
	char		enabled = '\0';

	ScanKeyInit(&keys[0], Anum_pg_trigger_tgrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], Anum_pg_trigger_tgname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum(name));
	scan = systable_beginscan(tgrel, TriggerRelidNameIndexId, true, NULL, 2, keys);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		enabled = ((Form_pg_trigger) GETSTRUCT(tup))->tgenabled;
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);
	return enabled;
}

/* The owner of relation relid. */
static Oid
RelOwner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/* The schema-qualified, quoted name of a relation. */
static char *
QualifiedName(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Give every partition under parent (protected by p) both fencing triggers,
 * enabled ALWAYS.  Runs as each partition's owner, inside SPI.
 */
static void
GuardPartitions(Oid parent, Protection *p)
{
	ListCell   *lc;

	foreach(lc, find_all_inheritors(parent, NoLock, NULL))
	{
		Oid			part = lfirst_oid(lc);
		char		guard;
		char		truncate;
		FencingSavedUser saved;

		if (part == p->relid)
			continue;			/* the protected table: protect() did it */
		if (get_rel_relkind(part) == RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot make foreign table \"%s\" a partition of protected table \"%s\"",
							get_rel_name(part), get_rel_name(p->relid)),
					 errdetail("Foreign tables cannot have the TRUNCATE trigger of the fencing guard.")));
		guard = TriggerEnabled(part, FENCING_GUARD_TRIGGER);
		truncate = TriggerEnabled(part, FENCING_TRUNCATE_TRIGGER);
		if (guard == TRIGGER_FIRES_ALWAYS && truncate == TRIGGER_FIRES_ALWAYS)
			continue;

		FencingBecomeRole(RelOwner(part), &saved);
		if (guard == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_FENCING_GUARD_ALTERED),
					 errmsg("partition \"%s\" of protected table \"%s\" has no trigger \"%s\"",
							get_rel_name(part), get_rel_name(p->relid),
							FENCING_GUARD_TRIGGER),
					 errhint("Call fencing.protect('%s') again to repair the guard.",
							 QualifiedName(p->relid))));
		if (truncate == '\0')
			RunSql(psprintf("CREATE TRIGGER " FENCING_TRUNCATE_TRIGGER
							" BEFORE TRUNCATE ON %s"
							" FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()",
							QualifiedName(part)));
		/* citus: one trigger per ALTER TABLE, as Citus requires */
		if (guard != TRIGGER_FIRES_ALWAYS)
			RunSql(psprintf("ALTER TABLE ONLY %s ENABLE ALWAYS TRIGGER " FENCING_GUARD_TRIGGER,
							QualifiedName(part)));
		RunSql(psprintf("ALTER TABLE ONLY %s ENABLE ALWAYS TRIGGER " FENCING_TRUNCATE_TRIGGER,
						QualifiedName(part)));
		FencingRestoreUser(&saved);
	}
}

/* GuardPartitions() in the shape RunWithDdlGuardSuspended() calls. */
static void
GuardPartitionsOf(Oid parent, void *arg)
{
	GuardPartitions(parent, (Protection *) arg);
}

/*
 * Keep part, just detached from a tree protected by p, protected on its
 * own with the same settings (and so the same scope fences).
 */
static void
ProtectDetached(Oid part, Protection *p)
{
	Oid			argtypes[2] = {OIDOID, OIDOID};
	Datum		values[2];
	FencingSavedUser saved;
	int			rc;

	/* every setting of the tree's row, whatever columns it has */
	values[0] = ObjectIdGetDatum(part);
	values[1] = ObjectIdGetDatum(p->relid);
	FencingBecomeRole(RelOwner(part), &saved);
	rc = SPI_execute_with_args("SELECT fencing.protect($1::pg_catalog.regclass, p.fence_column, "
							   "p.key_columns, p.strict, p.scope_name, p.lease) "
							   "FROM fencing.protected p "
							   "WHERE p.relid OPERATOR(pg_catalog.=) $2",
							   2, argtypes, values, NULL, false, 0);
	FencingRestoreUser(&saved);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not protect detached partition: %s",
			 SPI_result_code_string(rc));
}

/*
 * fencing.ddl_guard_end(): the ddl_command_end event trigger; guards
 * partitions created or attached under a protected table and keeps
 * detached partitions protected.
 */
Datum
fencing_ddl_guard_end(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *parsetree;
	List	   *protections;
	ListCell   *lc;

	CheckEventTriggerCall(fcinfo, "ddl_guard_end");
	if (FencingDdlGuardSuspended)
		PG_RETURN_NULL();
	trigdata = (EventTriggerData *) fcinfo->context;
	parsetree = trigdata->parsetree;

	if (IsA(parsetree, CreateStmt) || IsA(parsetree, CreateForeignTableStmt))
	{
		CreateStmt *stmt = (CreateStmt *) parsetree;
		Oid			parent;
		Protection *p;

		if (stmt->partbound == NULL || list_length(stmt->inhRelations) != 1)
			PG_RETURN_NULL();
		parent = RangeVarGetRelid(linitial_node(RangeVar, stmt->inhRelations),
								  NoLock, true);
		if (!OidIsValid(parent))
			PG_RETURN_NULL();
		protections = LoadProtections();
		p = ProtectionOf(protections, parent);
		if (p == NULL)
			PG_RETURN_NULL();
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		RunWithDdlGuardSuspended(GuardPartitionsOf, parent, p);
		SPI_finish();
	}
	else if (IsA(parsetree, AlterTableStmt))
	{
		AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
		Oid			relid;
		Protection *p;
		bool		any = false;

		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

			if (cmd->subtype == AT_AttachPartition ||
				cmd->subtype == AT_DetachPartition)
				any = true;
		}
		if (!any)
			PG_RETURN_NULL();
		relid = RangeVarGetRelid(stmt->relation, NoLock, true);
		if (!OidIsValid(relid))
			PG_RETURN_NULL();
		protections = LoadProtections();
		p = ProtectionOf(protections, relid);
		if (p == NULL)
			PG_RETURN_NULL();
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
			Oid			part;

			if (cmd->subtype == AT_DetachPartition)
			{
				part = RangeVarGetRelid(((PartitionCmd *) cmd->def)->name,
										NoLock, true);
				if (OidIsValid(part) && !get_rel_relispartition(part))
					ProtectDetached(part, p);
			}
		}
		RunWithDdlGuardSuspended(GuardPartitionsOf, relid, p);
		SPI_finish();
	}
	PG_RETURN_NULL();
}

/*
 * fencing.ddl_guard_drop(): the sql_drop event trigger; forgets the
 * protection of dropped tables (their scope fences stay).
 */
Datum
fencing_ddl_guard_drop(PG_FUNCTION_ARGS)
{
	FencingSavedUser saved;
	int			rc;
	uint64		i;

	CheckEventTriggerCall(fcinfo, "ddl_guard_drop");

	/* DROP EXTENSION fencing, DROP SCHEMA fencing CASCADE: nothing to do */
	if (!OidIsValid(ProtectedTableOid()))
		PG_RETURN_NULL();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	FencingBecomeOwner(&saved);
	rc = SPI_execute("DELETE FROM fencing.protected p "
					 "USING pg_catalog.pg_event_trigger_dropped_objects() d "
					 "WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
					 "AND d.objsubid OPERATOR(pg_catalog.=) 0 "
					 "AND p.relid::pg_catalog.oid OPERATOR(pg_catalog.=) d.objid "
					 "RETURNING p.relid::pg_catalog.oid",
					 false, 0);
	FencingRestoreUser(&saved);
	if (rc != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "could not forget dropped tables: %s",
			 SPI_result_code_string(rc));
	/* their counters in fencing.stats go at commit */
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		relid = SPI_getbinval(SPI_tuptable->vals[i],
										  SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			FencingStatsForget(DatumGetObjectId(relid));
	}
	SPI_finish();
	PG_RETURN_NULL();
}
