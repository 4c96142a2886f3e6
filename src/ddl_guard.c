/*-------------------------------------------------------------------------
 *
 * ddl_guard.c
 *	  Guarding the guard: the event triggers that keep a protected table's
 *	  fencing triggers in place, and the trees of protected tables whole.
 *
 * What is refused (SF005, unless done through protect() or unprotect(),
 * which run their own DDL through FencingRunWithDdlGuardSuspended()):
 *   - disabling, re-moding, dropping, renaming or replacing a guard
 *     trigger (CREATE OR REPLACE TRIGGER with its name), or making it
 *     depend on an extension;
 *   - a BEFORE ROW trigger that would fire after the guard (they fire in
 *     the byte order of their names), however it arrives: CREATE TRIGGER
 *     (also on an unprotected partitioned ancestor, cloned down), ALTER
 *     TRIGGER ... RENAME, ATTACH PARTITION or INHERIT of a table that has
 *     one, CREATE TABLE ... PARTITION OF or INHERITS;
 *   - dropping, retyping or renaming the fence or a key column, by any
 *     route (the sql_drop trigger sees columns dropped by DROP DOMAIN,
 *     DROP TYPE, DROP COLLATION, DROP EXTENSION ... CASCADE; ALTER TYPE
 *     ... ATTRIBUTE ... CASCADE reaches the typed tables of a type);
 *   - a DEFAULT or identity on the fence column; ALTER COLUMN ... TYPE ...
 *     USING (or SET EXPRESSION) on any column, which rewrites existing rows
 *     without a token, and ALTER COLUMN ... TYPE without USING that would
 *     not keep every stored value (RetypeKeepsValues); a table joining a
 *     protected tree with a default on its fence column or a generated
 *     fence or key column.
 * Only changes that lower protection are refused: pg_restore (CREATE
 * TRIGGER, then ENABLE ALWAYS TRIGGER) and other schema changes work.
 *
 * Only the owner adds code to a protected table's writes (42501, as
 * PostgreSQL answers DDL that only an owner may run): CREATE TRIGGER of
 * any kind on a protected table, a partition or child of one, or a
 * partitioned table whose triggers would be cloned into one, by a role
 * that is not a member of the table's owner (the TRIGGER privilege alone);
 * and a trigger there whose code (its function, the functions of its
 * WHEN clause) belongs to a role that is neither a superuser nor a member
 * of the owner, however it arrives: CREATE TRIGGER, protect(), a table
 * joining the tree, ALTER FUNCTION ... OWNER TO (see CodeOwnerTrusted).
 * Rules need the owner in PostgreSQL itself.  CREATE SCHEMA ... CREATE
 * TABLE ... PARTITION OF, whose subcommands fire no event trigger, is
 * checked and guarded at the end of CREATE SCHEMA.
 *
 * What is done: partitions and inheritance children created, attached or
 * inherited under a protected table get both guard triggers, enabled
 * ALWAYS, and the rows an attached or inheriting table brings advance the
 * scope fences (FencingSeedScopesFrom); a partition detached or a child
 * disinherited stays protected on its own, with the same settings.
 *
 * Locking.  Nothing here locks a relation that is not protected, and no
 * lock stronger than the command's own is taken.  ddl_command_start only
 * looks (no lock) and refuses early what it can see; ddl_command_end
 * checks again, under the locks the command took, whose conflict with
 * protect()'s ShareRowExclusiveLock means that a protect() either
 * committed before (and is seen now) or waits for this transaction (and
 * then finds the command's result and validates it).  The answer to "is
 * this relation protected?" is cached per relation (protection.c), so DDL
 * on unprotected tables pays a few hash look-ups.  A database whose
 * event triggers are still those of 1.0, where ddl_command_end does not
 * fire for CREATE TRIGGER, ALTER TRIGGER and ALTER FOREIGN TABLE, gets the
 * 1.0 behaviour for those: the target is locked in the command's own mode
 * before the check.
 *
 * fencing.ddl_guard_drop() (sql_drop) runs SQL only when a protected table
 * itself was dropped (to forget it; its fences in the scopes stay): it
 * reads the dropped objects through the C function behind
 * pg_event_trigger_dropped_objects(), without SPI.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_language.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "commands/tablecmds.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_func.h"
#include "parser/parse_node.h"
#include "parser/parse_type.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/evtcache.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "cluster.h"
#include "compat.h"
#include "ddl_guard.h"
#include "extension.h"
#include "fence.h"
#include "protection.h"
#include "scope_storage.h"
#include "stats.h"
#include "trigger_code.h"

PG_FUNCTION_INFO_V1(fencing_ddl_guard_start);
PG_FUNCTION_INFO_V1(fencing_ddl_guard_end);
PG_FUNCTION_INFO_V1(fencing_ddl_guard_drop);
PG_FUNCTION_INFO_V1(fencing_protected_changed);

/*
 * The DDL guard's one switch: true while the extension runs its own DDL
 * on protected tables (protect(), unprotect(), the guard's repairs, and
 * Citus keeping a shard's triggers in step), which the guard lets through.
 */
static bool FencingDdlGuardSuspended = false;

/*
 * Run fn(relid, arg), the extension's own trigger DDL, with the DDL guard
 * suspended, and the switch as it was after (this may run inside itself:
 * Citus runs protect()'s DDL on a placement of this node).  A distributed
 * database may need to be told about trigger DDL on its tables
 * (cluster.h).
 */
void
FencingRunWithDdlGuardSuspended(void (*fn) (Oid, void *), Oid relid, void *arg)
{
	int			cluster_level = FencingClusterBeginTriggerDdl(relid);
	bool		suspended = FencingDdlGuardSuspended;

	FencingDdlGuardSuspended = true;
	PG_TRY();
	{
		fn(relid, arg);
	}
	PG_FINALLY();
	{
		FencingDdlGuardSuspended = suspended;
	}
	PG_END_TRY();
	FencingClusterEndTriggerDdl(cluster_level);
}

/* What the DDL guard needs of a protection. */
typedef struct Protection
{
	Oid			relid;			/* the table named in fencing.protected */
	char	   *fence_column;
	int			nkeys;			/* -1: row scope */
	char	  **key_columns;
	/* citus: a shard on a worker, protected through its distributed table */
	Oid			shell;			/* that table, or InvalidOid */
	char	   *guard_name;		/* its guard trigger (FENCING_GUARD_TRIGGER) */
} Protection;

/* The shape of the two guard triggers (pg_trigger.tgtype) */
#define GUARD_TGTYPE	(TRIGGER_TYPE_ROW | TRIGGER_TYPE_BEFORE | \
						 TRIGGER_TYPE_INSERT | TRIGGER_TYPE_DELETE | \
						 TRIGGER_TYPE_UPDATE)
#define TRUNCATE_TGTYPE	(TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_TRUNCATE)

/* Which phase of the command a check runs in. */
typedef enum GuardPhase
{
	PHASE_START,				/* ddl_command_start: no lock, early refusal */
	PHASE_END					/* ddl_command_end: under the command's locks */
} GuardPhase;

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

/* The name of a relation for messages (it may have gone meanwhile). */
static const char *
RelName(Oid relid)
{
	char	   *name = get_rel_name(relid);

	return name ? name : "?";
}

/*
 * The protection covering relid (its own, or that of an ancestor), or
 * NULL.  The cheap, cached question first.
 */
static Protection *
ProtectionOf(Oid relid)
{
	Oid			through = FencingProtectedBy(relid);
	Protection *p;

	p = palloc0(sizeof(Protection));
	p->guard_name = FENCING_GUARD_TRIGGER;
	if (!OidIsValid(through))
	{
		/*
		 * citus: a shard of a protected distributed table, on a worker
		 * (fencing.protected is the coordinator's): the same rules, with
		 * the shard's settings and guard name from its guard trigger
		 */
		p->relid = relid;
		if (FencingClusterShardProtection(relid, &p->shell, &p->guard_name,
										&p->fence_column, &p->nkeys,
										&p->key_columns))
			return p;
		return NULL;
	}
	p->relid = through;
	if (!FencingProtectionColumns(through, &p->fence_column, &p->nkeys,
								  &p->key_columns))
		return NULL;			/* gone meanwhile */
	return p;
}

/* Is colname the fence column ("fence") or a key column ("key") of p? */
static const char *
ColumnRole(Protection *p, const char *colname)
{
	int			k;

	if (colname == NULL)
		return NULL;
	if (p->fence_column != NULL && strcmp(colname, p->fence_column) == 0)
		return "fence";
	for (k = 0; k < p->nkeys; k++)
		if (strcmp(colname, p->key_columns[k]) == 0)
			return "key";
	return NULL;
}

/* Is name one of the guard triggers' names? */
static bool
IsGuardName(const char *name)
{
	return name != NULL &&
		(strcmp(name, FENCING_GUARD_TRIGGER) == 0 ||
		 strcmp(name, FENCING_TRUNCATE_TRIGGER) == 0);
}

/*
 * Could name be a guard trigger's on some table?  A Citus shard's guard is
 * named FENCING_GUARD_TRIGGER "_<shardid>": the question before the
 * protection is known; IsGuardNameOf() answers it after.
 */
static bool
MayBeGuardName(const char *name)
{
	return IsGuardName(name) ||
		(name != NULL &&
		 strncmp(name, FENCING_GUARD_TRIGGER "_", strlen(FENCING_GUARD_TRIGGER) + 1) == 0);
}

/* Is name one of the guard triggers' names on the tables that p protects? */
static bool
IsGuardNameOf(Protection *p, const char *name)
{
	return name != NULL &&
		(strcmp(name, p->guard_name) == 0 ||
		 strcmp(name, FENCING_TRUNCATE_TRIGGER) == 0);
}

/*
 * Would a BEFORE ROW trigger of this name fire after the guard?  They fire
 * in the order of their names, compared byte by byte (the "C" order of
 * the name type): "zz_fencing_guard_x", "é" and "zzz" all come after it.
 * (Whatever fires after a shard's guard, zz_fencing_guard_<shardid>, fires
 * after this name too: the question before the protection is known.)
 */
static bool
FiresAfterGuard(const char *name)
{
	return name != NULL && strcmp(name, FENCING_GUARD_TRIGGER) > 0;
}

/* The same, for the guard of the tables that p protects. */
static bool
FiresAfterGuardOf(Protection *p, const char *name)
{
	return name != NULL && strcmp(name, p->guard_name) > 0;
}

/* The hint naming the table to unprotect. */
static char *
UnprotectHint(Protection *p)
{
	if (OidIsValid(p->shell))
		return psprintf("Call fencing.unprotect('%s') on the coordinator first.",
						FencingQualifiedName(p->shell));
	return psprintf("Call fencing.unprotect('%s') first.", FencingQualifiedName(p->relid));
}

/* ", a partition of ..." or ", an inheritance child of ..." when not p itself. */
static char *
Through(Oid relid, Protection *p)
{
	if (OidIsValid(p->shell))
		return psprintf(" (a shard of distributed table \"%s\")", RelName(p->shell));
	if (p->relid == relid)
		return "";
	if (FencingProtectedBy(relid) != p->relid)
		return psprintf(" (about to join protected table \"%s\")", RelName(p->relid));
	if (get_rel_relispartition(relid))
		return psprintf(" (a partition of protected table \"%s\")", RelName(p->relid));
	return psprintf(" (an inheritance child of protected table \"%s\")", RelName(p->relid));
}

/*
 * Raise SF005 for DDL on relid, protected by p.  message is the whole
 * primary message, written out at each call ("cannot drop trigger \"%s\"
 * of protected table \"%s\""); why is what the guard would lose; column,
 * when given, goes into the error fields.
 */
static void
ReportGuardAltered(Oid relid, Protection *p, const char *message,
				   const char *column, const char *why)
{
	Relation	rel = try_relation_open(relid, AccessShareLock);
	int			attnum = InvalidAttrNumber;

	if (column != NULL)
		attnum = get_attnum(relid, column);
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg_internal("%s", message),
			 errdetail("Table \"%s\"%s is protected by fencing: %s",
					   RelName(relid), Through(relid, p), why),
			 errhint("%s", UnprotectHint(p)),
			 rel == NULL ? 0 :
			 attnum > 0 ? errtablecol(rel, attnum) : errtable(rel)));
}

/* Refuse if colname is the fence or a key column of relid (protected by p). */
static void
CheckKeyOrFence(Oid relid, Protection *p, const char *colname, const char *message)
{
	const char *role = ColumnRole(p, colname);

	if (role == NULL)
		return;
	ReportGuardAltered(relid, p,
					   psprintf(message, colname, RelName(relid)),
					   colname,
					   strcmp(role, "fence") == 0 ?
					   psprintf("column \"%s\" holds its fence tokens.", colname) :
					   psprintf("column \"%s\" is a key column of its fence scope.", colname));
}

/* Refuse a change of relid's guard trigger trigname (protected by p). */
static void
CheckGuardTriggerDdl(Oid relid, Protection *p, const char *trigname, const char *message)
{
	if (!IsGuardNameOf(p, trigname))
		return;
	ReportGuardAltered(relid, p,
					   psprintf(message, trigname, RelName(relid)),
					   NULL,
					   "its fencing triggers check every write.");
}

/* Raise SF005 for a BEFORE ROW trigger firing after the guard. */
static void
ReportLateTrigger(Oid relid, Protection *p, const char *trigname)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("trigger \"%s\" would fire after the fencing guard of protected table \"%s\"",
					trigname, RelName(relid)),
			 errdetail("BEFORE ROW triggers fire in the byte order of their names; one named after \"%s\" could change a row after the guard checked it, for example lower its fence.%s",
					   p->guard_name,
					   p->relid != relid || OidIsValid(p->shell) ?
					   psprintf(" Table \"%s\"%s.", RelName(relid), Through(relid, p)) : ""),
			 OidIsValid(p->shell) ?
			 errhint("Give the trigger a name that sorts before \"%s\", or call fencing.unprotect('%s') on the coordinator first.",
					 p->guard_name, FencingQualifiedName(p->shell)) :
			 errhint("Give the trigger a name that sorts before \"%s\", or call fencing.unprotect('%s') first.",
					 p->guard_name, FencingQualifiedName(p->relid))));
}

/*
 * relid and, when recurse and it has any, every partition and inheritance
 * child at any level (not locked: the command locks what it reaches).
 */
static List *
Reach(Oid relid, bool recurse)
{
	if (!recurse || !has_subclass(relid))
		return list_make1_oid(relid);
	return find_all_inheritors(relid, NoLock, NULL);
}

/* Is pg_proc fn the extension's C function of that symbol? */
static bool
IsFencingCFunction(Oid fn, const char *symbol)
{
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	Form_pg_proc proc;
	bool		isnull;
	Datum		d;
	bool		ok = false;

	if (!HeapTupleIsValid(tup))
		return false;
	proc = (Form_pg_proc) GETSTRUCT(tup);
	if (proc->prolang == ClanguageId)
	{
		d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_prosrc, &isnull);
		ok = !isnull && strcmp(TextDatumGetCString(d), symbol) == 0;
		d = SysCacheGetAttr(PROCOID, tup, Anum_pg_proc_probin, &isnull);
		ok = ok && !isnull && strcmp(TextDatumGetCString(d), "$libdir/fencing") == 0;
	}
	ReleaseSysCache(tup);
	return ok;
}

/*
 * The triggers of relid in pg_trigger: call fn for each (in name order,
 * the order they fire in).  The tuple is valid during the call only.
 */
typedef void (*TriggerVisitor) (Form_pg_trigger trig, HeapTuple tup, void *arg);

static void
ForEachTrigger(Oid relid, TriggerVisitor fn, void *arg)
{
	Relation	tgrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(tgrel, TriggerRelidNameIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
		fn((Form_pg_trigger) GETSTRUCT(tup), tup, arg);
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);
}

/* Is this trigger tuple exactly a guard trigger (whatever its tgenabled)? */
static bool
HasGuardShape(Form_pg_trigger trig, HeapTuple tup)
{
	bool		row = strcmp(NameStr(trig->tgname), FENCING_GUARD_TRIGGER) == 0;

	if (trig->tgtype != (row ? GUARD_TGTYPE : TRUNCATE_TGTYPE))
		return false;
	if (!IsFencingCFunction(trig->tgfoid, row ? "fencing_guard" : "fencing_guard_truncate"))
		return false;
	if (OidIsValid(trig->tgconstraint) || trig->tgattr.dim1 != 0)
		return false;
	if (!heap_attisnull(tup, Anum_pg_trigger_tgqual, NULL))
		return false;
	return true;
}

/* What CheckTriggerState found. */
typedef struct TriggerState
{
	Protection *p;
	char	   *late;			/* a BEFORE ROW trigger firing after the guard */
	char	   *misshapen;		/* a guard-named trigger that is not the guard */
} TriggerState;

static void
VisitTriggerState(Form_pg_trigger trig, HeapTuple tup, void *arg)
{
	TriggerState *st = (TriggerState *) arg;
	const char *name = NameStr(trig->tgname);

	/* (a shard's guard carries its settings in arguments: citus.c) */
	if (IsGuardName(name) && !OidIsValid(st->p->shell))
	{
		if (st->misshapen == NULL && !HasGuardShape(trig, tup))
			st->misshapen = pstrdup(name);
		return;
	}
	/* a guard itself may come later (Citus names a shard's guard_<shard>) */
	if (st->late == NULL && TRIGGER_FOR_ROW(trig->tgtype) &&
		TRIGGER_FOR_BEFORE(trig->tgtype) && FiresAfterGuardOf(st->p, name) &&
		!IsFencingCFunction(trig->tgfoid, "fencing_guard"))
		st->late = pstrdup(name);
}

/*
 * The state of relid's triggers, whatever DDL led there: no BEFORE ROW
 * trigger may fire after the guard, and a trigger with a guard's name
 * must be that guard (its function, timing, events, no WHEN, no column
 * list).  Enabled or not: pg_restore creates the triggers first and
 * enables them ALWAYS in a second statement.
 */
static void
CheckTriggerState(Oid relid, Protection *p)
{
	TriggerState st = {p, NULL, NULL};

	ForEachTrigger(relid, VisitTriggerState, &st);
	if (st.late != NULL)
		ReportLateTrigger(relid, p, st.late);
	if (st.misshapen != NULL)
		ReportGuardAltered(relid, p,
						   psprintf("trigger \"%s\" is not the fencing guard of protected table \"%s\"", st.misshapen, RelName(relid)),
						   NULL,
						   psprintf("a trigger named \"%s\" on it must be the guard that protect() installs, calling fencing.%s().",
									st.misshapen,
									strcmp(st.misshapen, FENCING_GUARD_TRIGGER) == 0 ?
									"guard" : "guard_truncate"));
}

/* Who may own the code of a protected table's triggers: trigger_code.c. */

/* A trigger, as far as the check of its code needs it. */
typedef struct TriggerRef
{
	Oid			oid;
	Oid			tgfoid;
	char	   *name;
} TriggerRef;

static void
VisitTriggerRef(Form_pg_trigger trig, HeapTuple tup pg_attribute_unused(), void *arg)
{
	List	  **list = (List **) arg;
	TriggerRef *ref = palloc(sizeof(TriggerRef));

	ref->oid = trig->oid;
	ref->tgfoid = trig->tgfoid;
	ref->name = pstrdup(NameStr(trig->tgname));
	*list = lappend(*list, ref);
}

/* Fill in the trigger of the name given in arg (a TriggerRef). */
static void
VisitTriggerNamed(Form_pg_trigger trig, HeapTuple tup pg_attribute_unused(), void *arg)
{
	TriggerRef *ref = (TriggerRef *) arg;

	if (strcmp(NameStr(trig->tgname), ref->name) == 0)
	{
		ref->oid = trig->oid;
		ref->tgfoid = trig->tgfoid;
	}
}

/*
 * Refuse (42501) trigger trig on member, protected under root, when a
 * function it runs belongs to a role not trusted with member's code.
 * context opens the DETAIL ("Table \"t\" is protected by fencing").
 */
static void
CheckTriggerCodeOwner(TriggerRef *trig, Oid member, Oid root, bool lock,
					  const char *context)
{
	ListCell   *lc;

	foreach(lc, FencingTriggerCode(trig->oid, trig->tgfoid))
	{
		Oid			fn = lfirst_oid(lc);
		Oid			owner = FencingFunctionOwner(fn, lock);
		Oid			table_owner;
		Relation	rel;

		if (!OidIsValid(owner) || FencingCodeOwnerTrusted(owner, member, root))
			continue;
		table_owner = FencingRelOwner(OidIsValid(root) ? root : member);
		rel = try_relation_open(member, AccessShareLock);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("trigger \"%s\" on table \"%s\" runs function %s, owned by role \"%s\"",
						trig->name, RelName(member), format_procedure(fn),
						GetUserNameFromId(owner, false)),
				 errdetail("%s: the code of its triggers must belong to a superuser or to a member of the table's owner \"%s\", because the owner of a function can change its code at any time, and with it the token that the guard judges.",
						   context, GetUserNameFromId(table_owner, false)),
				 errhint("Drop the trigger, or give the function to the table's owner: ALTER FUNCTION %s OWNER TO %s.",
						 format_procedure_qualified(fn),
						 quote_identifier(GetUserNameFromId(table_owner, false))),
				 rel != NULL ? errtable(rel) : 0));
	}
}

/* Check the code of every trigger of member (see CheckTriggerCodeOwner). */
static void
CheckTriggersCodeOwners(Oid member, Oid root, bool lock, const char *context)
{
	List	   *triggers = NIL;
	ListCell   *lc;

	/* collected first: the checks lock, and take catalog snapshots */
	ForEachTrigger(member, VisitTriggerRef, &triggers);
	foreach(lc, triggers)
		CheckTriggerCodeOwner(lfirst(lc), member, root, lock, context);
}

/* The opening of a DETAIL: "Table \"t\" (a partition of ...) is protected by fencing". */
static char *
ProtectedContext(Oid relid, Protection *p)
{
	return psprintf("Table \"%s\"%s is protected by fencing", RelName(relid), Through(relid, p));
}

/* The table that p protects, or for a Citus shard its distributed table. */
static Oid
ProtectionRoot(Protection *p)
{
	return OidIsValid(p->shell) ? p->shell : p->relid;
}

/*
 * CREATE TRIGGER on relid by a role that is not a member of its owner
 * (PostgreSQL lets it through with the TRIGGER privilege), reaching
 * member, protected by p: 42501, as PostgreSQL answers for the DDL that
 * only an owner may run.
 */
static void
ReportTriggerNotOwner(Oid relid, Oid member, Protection *p, const char *trigname)
{
	Relation	rel = try_relation_open(member, AccessShareLock);
	const char *owner = GetUserNameFromId(FencingRelOwner(relid), false);

	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to create trigger \"%s\" on table \"%s\"",
					trigname, RelName(relid)),
			 member == relid ?
			 errdetail("%s: only the owner of \"%s\" (role \"%s\") and members of that role may add triggers to its writes, so that no other role's code can change the token that the guard judges.",
					   ProtectedContext(member, p), RelName(relid), owner) :
			 errdetail("The trigger would be cloned into table \"%s\"%s, which is protected by fencing: only the owner of \"%s\" (role \"%s\") and members of that role may add triggers to its writes, so that no other role's code can change the token that the guard judges.",
					   RelName(member), Through(member, p), RelName(relid), owner),
			 errhint("Ask the owner of table \"%s\" to create the trigger; the TRIGGER privilege does not allow it on a protected table.",
					 RelName(relid)),
			 rel != NULL ? errtable(rel) : 0));
}

/*
 * Columns of member (protected, or about to be, by p) that would let a
 * write get past the guard: a default or a generation expression on the
 * fence column gives a tokenless INSERT a token; a generated key column is
 * computed after the guard checked it.  (The fence column is of type
 * fencing.fence itself, never a domain over it, so no domain default can
 * reach it: protect() refuses other types and ALTER COLUMN TYPE of it.)
 * Returns a description, or NULL.
 */
static char *
ColumnProblem(Oid member, const char *fence_column, int nkeys, char **key_columns,
			  char **column)
{
	HeapTuple	tup;
	Form_pg_attribute att;
	char	   *problem = NULL;
	int			k;

	tup = SearchSysCacheAttName(member, fence_column);
	if (HeapTupleIsValid(tup))
	{
		att = (Form_pg_attribute) GETSTRUCT(tup);
		if (att->attgenerated != '\0')
			problem = psprintf("fence column \"%s\" is a generated column", fence_column);
		else if (att->atthasdef)
			problem = psprintf("fence column \"%s\" has a default", fence_column);
		else if (att->attidentity != '\0')
			problem = psprintf("fence column \"%s\" is an identity column", fence_column);
		/* a domain (and its default) cannot be: the type is fencing.fence */
		ReleaseSysCache(tup);
		if (problem != NULL)
		{
			*column = pstrdup(fence_column);
			return problem;
		}
	}
	for (k = 0; k < nkeys; k++)
	{
		tup = SearchSysCacheAttName(member, key_columns[k]);
		if (!HeapTupleIsValid(tup))
			continue;
		att = (Form_pg_attribute) GETSTRUCT(tup);
		if (att->attgenerated != '\0')
			problem = psprintf("key column \"%s\" is a generated column", key_columns[k]);
		ReleaseSysCache(tup);
		if (problem != NULL)
		{
			*column = pstrdup(key_columns[k]);
			return problem;
		}
	}
	return NULL;
}

/* What CheckNewMember looks for on a table joining a protected tree. */
static void
VisitLateOnly(Form_pg_trigger trig, HeapTuple tup pg_attribute_unused(), void *arg)
{
	char	  **late = (char **) arg;

	if (*late == NULL && !IsGuardName(NameStr(trig->tgname)) &&
		TRIGGER_FOR_ROW(trig->tgtype) && TRIGGER_FOR_BEFORE(trig->tgtype) &&
		FiresAfterGuard(NameStr(trig->tgname)) &&
		!IsFencingCFunction(trig->tgfoid, "fencing_guard"))
		*late = pstrdup(NameStr(trig->tgname));
}

/*
 * A table (and its own tree) about to be guarded under p: by ATTACH
 * PARTITION, INHERIT, CREATE TABLE ... PARTITION OF / INHERITS.  Refuses
 * a member protected on its own (one protection per tree, 55000), a
 * foreign table (no TRUNCATE trigger, 0A000), a BEFORE ROW trigger firing
 * after the guard and fence or key columns the guard cannot trust (SF005),
 * and a trigger whose code belongs to a role not trusted with the table
 * (42501).
 */
static void
CheckNewMembers(Oid newrel, Protection *p, GuardPhase phase)
{
	ListCell   *lc;

	foreach(lc, Reach(newrel, true))
	{
		Oid			member = lfirst_oid(lc);
		Oid			own = FencingProtectedBy(member);
		char	   *late = NULL;
		char	   *column = NULL;
		char	   *problem;

		if (OidIsValid(own) && own != p->relid)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot make protected table \"%s\" part of protected table \"%s\"",
							RelName(own), RelName(p->relid)),
					 errdetail("A tree of partitions or inheritance children is protected as a whole, with the settings of one table."),
					 errhint("Call fencing.unprotect('%s') first.", FencingQualifiedName(own))));
		if (get_rel_relkind(member) == RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot make foreign table \"%s\" part of protected table \"%s\"",
							RelName(member), RelName(p->relid)),
					 errdetail("Foreign tables cannot have the TRUNCATE trigger of the fencing guard.")));
		ForEachTrigger(member, VisitLateOnly, &late);
		if (late != NULL)
			ReportLateTrigger(member, p, late);
		CheckTriggersCodeOwners(member, ProtectionRoot(p), phase == PHASE_END,
								ProtectedContext(member, p));
		problem = ColumnProblem(member, p->fence_column, p->nkeys, p->key_columns, &column);
		if (problem != NULL)
			ReportGuardAltered(member, p,
							   psprintf("cannot guard column \"%s\" of protected table \"%s\"", column, RelName(member)),
							   column,
							   psprintf("%s, which would let a write past the guard.", problem));
	}
}

/*
 * DDL keeps every value.  ALTER COLUMN ... TYPE without USING converts the
 * stored values with the assignment cast from the old type to the new.  On
 * a protected table it may only where that keeps every value: where the
 * conversion PostgreSQL builds, once planned (support functions drop the
 * length and precision coercions that change nothing, such as
 * varchar(10) to varchar(20) or numeric(10,2) to numeric(12,2)), leaves
 * the stored value as it is (binary-compatible types, a domain's check)
 * or widens an integer (int2 to int4 to int8).  Anything else, rounding
 * numeric, timestamptz to timestamp (whose result depends on the
 * TimeZone of the session running the DDL), char(n), a narrower integer,
 * would change values without a fencing token (SF005).
 */

/* Does the conversion of a column from the old type to the new keep every value? */
static bool
RetypeKeepsValues(Oid oldtype, int32 oldtypmod, Oid oldcoll,
				  Oid newtype, int32 newtypmod)
{
	Node	   *expr;
	ParseState *pstate;

	if (oldtype == newtype && oldtypmod == newtypmod)
		return true;
	expr = (Node *) makeVar(1, 1, oldtype, oldtypmod, oldcoll, 0);
	expr = coerce_to_target_type(NULL, expr, oldtype, newtype, newtypmod,
								 COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
	if (expr == NULL)
		return true;			/* PostgreSQL refuses it: nothing changes */
	pstate = make_parsestate(NULL);
	assign_expr_collations(pstate, expr);
	free_parsestate(pstate);
	expr = (Node *) expression_planner((Expr *) expr);
	for (;;)
	{
		if (IsA(expr, Var))
			return true;
		else if (IsA(expr, RelabelType))
			expr = (Node *) ((RelabelType *) expr)->arg;
		else if (IsA(expr, CoerceToDomain))
			expr = (Node *) ((CoerceToDomain *) expr)->arg;
		else if (IsA(expr, FuncExpr) &&
				 (((FuncExpr *) expr)->funcid == F_INT4_INT2 ||
				  ((FuncExpr *) expr)->funcid == F_INT8_INT2 ||
				  ((FuncExpr *) expr)->funcid == F_INT8_INT4))
			expr = linitial(((FuncExpr *) expr)->args);
		else
			return false;
	}
}

/*
 * A column that an ALTER TABLE or ALTER TYPE statement under way is about
 * to retype, and its type before, noted at ddl_command_start: at
 * ddl_command_end the catalog has only the new type, and a table that a
 * protect() committed while the statement waited for its lock is checked
 * then with the type it had.  In TopTransactionContext, for this
 * transaction only.
 */
typedef struct RetypedColumn
{
	Node	   *stmt;			/* the statement (its parse tree) */
	Oid			relid;
	char	   *column;
	Oid			type;
	int32		typmod;
	Oid			collation;
} RetypedColumn;

static List *retyped_columns = NIL;
static LocalTransactionId retyped_lxid = InvalidLocalTransactionId;

/* The columns noted in this transaction (none from an earlier one). */
static List *
RetypedColumns(void)
{
	if (retyped_lxid != CurrentLocalTransactionId())
	{
		retyped_columns = NIL;	/* its memory went with its transaction */
		retyped_lxid = CurrentLocalTransactionId();
	}
	return retyped_columns;
}

/* Forget what was noted for stmt (a statement that ended, or runs again). */
static void
ForgetRetypes(Node *stmt)
{
	List	   *keep = NIL;
	ListCell   *lc;
	MemoryContext old;

	if (RetypedColumns() == NIL)
		return;
	old = MemoryContextSwitchTo(TopTransactionContext);
	foreach(lc, retyped_columns)
		if (((RetypedColumn *) lfirst(lc))->stmt != stmt)
			keep = lappend(keep, lfirst(lc));
	MemoryContextSwitchTo(old);
	retyped_columns = keep;
}

/* Note the type of column colname of relid before stmt retypes it. */
static void
NoteRetype(Node *stmt, Oid relid, const char *colname)
{
	HeapTuple	tup = SearchSysCacheAttName(relid, colname);
	Form_pg_attribute att;
	RetypedColumn *rc;
	MemoryContext old;

	if (!HeapTupleIsValid(tup))
		return;
	att = (Form_pg_attribute) GETSTRUCT(tup);
	(void) RetypedColumns();
	old = MemoryContextSwitchTo(TopTransactionContext);
	rc = palloc(sizeof(RetypedColumn));
	rc->stmt = stmt;
	rc->relid = relid;
	rc->column = pstrdup(colname);
	rc->type = att->atttypid;
	rc->typmod = att->atttypmod;
	rc->collation = att->attcollation;
	retyped_columns = lappend(retyped_columns, rc);
	MemoryContextSwitchTo(old);
	ReleaseSysCache(tup);
}

/* What was noted of column colname of relid for stmt, or NULL. */
static RetypedColumn *
NotedRetype(Node *stmt, Oid relid, const char *colname)
{
	ListCell   *lc;

	foreach(lc, RetypedColumns())
	{
		RetypedColumn *rc = lfirst(lc);

		if (rc->stmt == stmt && rc->relid == relid && strcmp(rc->column, colname) == 0)
			return rc;
	}
	return NULL;
}

/*
 * ALTER COLUMN ... TYPE (no USING) of column colname of member, protected
 * by p: refuse (SF005) a conversion that would not keep every value.  At
 * the start the old type is the catalog's and the new one the statement's;
 * at the end the old one is what NoteRetype() saw and the new one the
 * catalog's.
 */
static void
CheckRetype(Node *stmt, AlterTableCmd *cmd, Oid member, Protection *p, GuardPhase phase)
{
	ColumnDef  *def = (ColumnDef *) cmd->def;
	HeapTuple	tup;
	Form_pg_attribute att;
	Oid			oldtype,
				oldcoll,
				newtype;
	int32		oldtypmod,
				newtypmod;
	Relation	rel;

	tup = SearchSysCacheAttName(member, cmd->name);
	if (!HeapTupleIsValid(tup))
		return;
	att = (Form_pg_attribute) GETSTRUCT(tup);
	if (phase == PHASE_START)
	{
		Type		typtup = LookupTypeName(NULL, def->typeName, &newtypmod, true);

		oldtype = att->atttypid;
		oldtypmod = att->atttypmod;
		oldcoll = att->attcollation;
		ReleaseSysCache(tup);
		if (typtup == NULL)
			return;				/* PostgreSQL reports it */
		newtype = typeTypeId(typtup);
		ReleaseSysCache(typtup);
	}
	else
	{
		RetypedColumn *rc = NotedRetype(stmt, member, cmd->name);

		newtype = att->atttypid;
		newtypmod = att->atttypmod;
		ReleaseSysCache(tup);
		if (rc == NULL)
			return;
		oldtype = rc->type;
		oldtypmod = rc->typmod;
		oldcoll = rc->collation;
	}
	if (RetypeKeepsValues(oldtype, oldtypmod, oldcoll, newtype, newtypmod))
		return;
	rel = try_relation_open(member, AccessShareLock);
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("cannot change the type of column \"%s\" of protected table \"%s\" from %s to %s",
					cmd->name, RelName(member),
					format_type_with_typemod(oldtype, oldtypmod),
					format_type_with_typemod(newtype, newtypmod)),
			 errdetail("%s: a change of type may only keep every stored value (binary-compatible types, a larger length or precision, a wider integer type), and this one would change values without a fencing token.",
					   ProtectedContext(member, p)),
			 errhint("Add a column of the new type and fill it with writes that carry tokens, or %s",
					 OidIsValid(p->shell) ?
					 psprintf("call fencing.unprotect('%s') on the coordinator first.",
							  FencingQualifiedName(p->shell)) :
					 psprintf("call fencing.unprotect('%s') first.",
							  FencingQualifiedName(p->relid))),
			 rel != NULL ? errtablecol(rel, get_attnum(member, cmd->name)) : 0));
}

/*
 * The typed tables of composite type typrelid (its pg_class entry) with
 * their partitions: what ALTER TYPE ... ALTER/RENAME/DROP ATTRIBUTE ...
 * CASCADE changes.  Found through pg_depend (a typed table depends on its
 * type), so nothing is scanned in full.
 */
static List *
TypedTableTree(Oid typrelid)
{
	Oid			typid = get_rel_type_id(typrelid);
	Relation	deprel;
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *tables = NIL;
	List	   *result = NIL;
	ListCell   *lc;

	if (!OidIsValid(typid))
		return NIL;
	deprel = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(TypeRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(typid));
	scan = systable_beginscan(deprel, DependReferenceIndexId, true, NULL, 2, key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);

		if (dep->classid == RelationRelationId && dep->objsubid == 0)
			tables = list_append_unique_oid(tables, dep->objid);
	}
	systable_endscan(scan);
	table_close(deprel, AccessShareLock);

	foreach(lc, tables)
	{
		Oid			relid = lfirst_oid(lc);
		HeapTuple	ctup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
		bool		typed;

		if (!HeapTupleIsValid(ctup))
			continue;
		typed = ((Form_pg_class) GETSTRUCT(ctup))->reloftype == typid;
		ReleaseSysCache(ctup);
		if (typed)
			result = list_concat_unique_oid(result, Reach(relid, true));
	}
	return result;
}

/*
 * Check one ALTER TABLE subcommand against member, a relation it reaches
 * that p protects.
 */
static void
CheckSubcommand(Node *stmt, AlterTableCmd *cmd, Oid member, Protection *p,
				GuardPhase phase)
{
	switch (cmd->subtype)
	{
		case AT_DropColumn:
			CheckKeyOrFence(member, p, cmd->name, "cannot drop column \"%s\" of protected table \"%s\"");
			break;
		case AT_AlterColumnType:
			{
				ColumnDef  *def = (ColumnDef *) cmd->def;

				CheckKeyOrFence(member, p, cmd->name, "cannot alter type of column \"%s\" of protected table \"%s\"");
				if (def != NULL && def->raw_default != NULL)
					ReportGuardAltered(member, p,
									   psprintf("cannot rewrite the values of column \"%s\" of protected table \"%s\"", cmd->name, RelName(member)),
									   cmd->name,
									   "ALTER COLUMN ... TYPE ... USING would rewrite the values of existing rows without a fencing token.");
				if (def != NULL)
					CheckRetype(stmt, cmd, member, p, phase);
				break;
			}
#if PG_VERSION_NUM >= 170000
		case AT_SetExpression:
			ReportGuardAltered(member, p,
							   psprintf("cannot set the expression of column \"%s\" of protected table \"%s\"", cmd->name, RelName(member)),
							   cmd->name,
							   "SET EXPRESSION would rewrite the values of existing rows without a fencing token.");
			break;
#endif
		case AT_ColumnDefault:
		case AT_CookedColumnDefault:
			if (cmd->def != NULL && ColumnRole(p, cmd->name) != NULL &&
				strcmp(ColumnRole(p, cmd->name), "fence") == 0)
				ReportGuardAltered(member, p,
								   psprintf("cannot set a default on column \"%s\" of protected table \"%s\"", cmd->name, RelName(member)),
								   cmd->name,
								   psprintf("column \"%s\" holds its fence tokens, and a default would give a write without a token one.",
											cmd->name));
			break;
		case AT_AddIdentity:
		case AT_SetIdentity:
			if (ColumnRole(p, cmd->name) != NULL &&
				strcmp(ColumnRole(p, cmd->name), "fence") == 0)
				ReportGuardAltered(member, p,
								   psprintf("cannot make column \"%s\" an identity column of protected table \"%s\"", cmd->name, RelName(member)),
								   cmd->name,
								   psprintf("column \"%s\" holds its fence tokens.", cmd->name));
			break;
		case AT_DisableTrig:
			CheckGuardTriggerDdl(member, p, cmd->name, "cannot disable trigger \"%s\" of protected table \"%s\"");
			break;
		case AT_EnableTrig:
		case AT_EnableReplicaTrig:
			/* ENABLE ALWAYS is how they are: only a change of mode lowers */
			CheckGuardTriggerDdl(member, p, cmd->name, "cannot change the firing mode of trigger \"%s\" of protected table \"%s\"");
			break;
		case AT_DisableTrigAll:
		case AT_DisableTrigUser:
			ReportGuardAltered(member, p,
							   psprintf("cannot disable trigger \"%s\" of protected table \"%s\"", p->guard_name, RelName(member)),
							   NULL,
							   cmd->subtype == AT_DisableTrigAll ?
							   "DISABLE TRIGGER ALL would disable its fencing triggers." :
							   "DISABLE TRIGGER USER would disable its fencing triggers.");
			break;
		case AT_EnableTrigAll:
		case AT_EnableTrigUser:
			ReportGuardAltered(member, p,
							   psprintf("cannot change the firing mode of trigger \"%s\" of protected table \"%s\"",
										p->guard_name, RelName(member)),
							   NULL,
							   "ENABLE TRIGGER ALL and ENABLE TRIGGER USER would turn its fencing triggers from ALWAYS to ORIGIN, skipped by sessions with session_replication_role = replica.");
			break;
		default:
			break;
	}
}

/* Does this subcommand act on columns (and recurse like them)? */
static bool
IsColumnSubcommand(AlterTableCmd *cmd)
{
	switch (cmd->subtype)
	{
		case AT_DropColumn:
		case AT_AlterColumnType:
		case AT_ColumnDefault:
		case AT_CookedColumnDefault:
		case AT_AddIdentity:
		case AT_SetIdentity:
#if PG_VERSION_NUM >= 170000
		case AT_SetExpression:
#endif
			return true;
		default:
			return false;
	}
}

/* Does this subcommand act on triggers? */
static bool
IsTriggerSubcommand(AlterTableCmd *cmd)
{
	switch (cmd->subtype)
	{
		case AT_EnableTrig:
		case AT_EnableAlwaysTrig:
		case AT_EnableReplicaTrig:
		case AT_DisableTrig:
		case AT_EnableTrigAll:
		case AT_DisableTrigAll:
		case AT_EnableTrigUser:
		case AT_DisableTrigUser:
			return true;
		default:
			return false;
	}
}

/* Does this subcommand link or unlink a partition or inheritance child? */
static bool
IsTreeSubcommand(AlterTableCmd *cmd)
{
	return cmd->subtype == AT_AttachPartition ||
		cmd->subtype == AT_DetachPartition ||
		cmd->subtype == AT_DetachPartitionFinalize ||
		cmd->subtype == AT_AddInherit ||
		cmd->subtype == AT_DropInherit;
}

/* The other relation of a tree subcommand (partition, or parent), or InvalidOid. */
static Oid
TreeSubcommandOther(AlterTableCmd *cmd)
{
	RangeVar   *rv;

	if (cmd->subtype == AT_AddInherit || cmd->subtype == AT_DropInherit)
		rv = (RangeVar *) cmd->def;
	else
		rv = ((PartitionCmd *) cmd->def)->name;
	return rv ? RangeVarGetRelid(rv, NoLock, true) : InvalidOid;
}

/* The state of one guard trigger on a member. */
typedef struct GuardTrig
{
	const char *name;
	bool		present;
	bool		shaped;
	char		enabled;
} GuardTrig;

static void
VisitGuardTrig(Form_pg_trigger trig, HeapTuple tup, void *arg)
{
	GuardTrig  *g = (GuardTrig *) arg;

	if (strcmp(NameStr(trig->tgname), g->name) != 0)
		return;
	g->present = true;
	g->shaped = HasGuardShape(trig, tup);
	g->enabled = trig->tgenabled;
}

/*
 * Give every member of the tree under root (partitions and inheritance
 * children at any level, not root itself) both guard triggers, as
 * protect() installs them, enabled ALWAYS.  A trigger of a guard's name
 * that is not the guard is replaced.  Runs inside SPI, as each member's
 * owner, with the DDL guard suspended.
 */
static void
GuardMembers(Oid root, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	foreach(lc, Reach(root, true))
	{
		Oid			member = lfirst_oid(lc);
		GuardTrig	row = {FENCING_GUARD_TRIGGER, false, false, '\0'};
		GuardTrig	trunc = {FENCING_TRUNCATE_TRIGGER, false, false, '\0'};
		FencingSavedUser saved;
		char	   *qname;

		if (member == root)
			continue;
		if (get_rel_relkind(member) == RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot make foreign table \"%s\" part of protected table \"%s\"",
							RelName(member), RelName(root)),
					 errdetail("Foreign tables cannot have the TRUNCATE trigger of the fencing guard.")));
		ForEachTrigger(member, VisitGuardTrig, &row);
		ForEachTrigger(member, VisitGuardTrig, &trunc);
		if (row.shaped && trunc.shaped &&
			row.enabled == TRIGGER_FIRES_ALWAYS && trunc.enabled == TRIGGER_FIRES_ALWAYS)
			continue;

		qname = FencingQualifiedName(member);
		FencingBecomeRole(FencingRelOwner(member), &saved);
		if (row.present && !row.shaped)
			FencingRunUtility(psprintf("DROP TRIGGER " FENCING_GUARD_TRIGGER " ON %s", qname));
		if (!row.shaped)
			FencingRunUtility(psprintf("CREATE TRIGGER " FENCING_GUARD_TRIGGER
							" BEFORE INSERT OR UPDATE OR DELETE ON %s"
							" FOR EACH ROW EXECUTE FUNCTION fencing.guard()", qname));
		if (trunc.present && !trunc.shaped)
			FencingRunUtility(psprintf("DROP TRIGGER " FENCING_TRUNCATE_TRIGGER " ON %s", qname));
		if (!trunc.shaped)
			FencingRunUtility(psprintf("CREATE TRIGGER " FENCING_TRUNCATE_TRIGGER
							" BEFORE TRUNCATE ON %s"
							" FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()",
							qname));
		/* citus: one trigger per ALTER TABLE, as Citus requires */
		if (!row.shaped || row.enabled != TRIGGER_FIRES_ALWAYS)
			FencingRunUtility(psprintf("ALTER TABLE ONLY %s ENABLE ALWAYS TRIGGER " FENCING_GUARD_TRIGGER,
							qname));
		if (!trunc.shaped || trunc.enabled != TRIGGER_FIRES_ALWAYS)
			FencingRunUtility(psprintf("ALTER TABLE ONLY %s ENABLE ALWAYS TRIGGER " FENCING_TRUNCATE_TRIGGER,
							qname));
		FencingRestoreUser(&saved);
	}
}

/*
 * Remove both guard triggers from the inheritance children under root
 * (partitions lose theirs with the root's, which unprotect() drops).
 */
static void
UnguardMembers(Oid root, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	foreach(lc, Reach(root, true))
	{
		Oid			member = lfirst_oid(lc);
		FencingSavedUser saved;
		const char *names[2] = {FENCING_GUARD_TRIGGER, FENCING_TRUNCATE_TRIGGER};
		int			i;

		if (member == root || get_rel_relispartition(member))
			continue;
		FencingBecomeRole(FencingRelOwner(member), &saved);
		for (i = 0; i < 2; i++)
			if (OidIsValid(get_trigger_oid(member, names[i], true)))
				FencingRunUtility(psprintf("DROP TRIGGER %s ON %s", names[i], FencingQualifiedName(member)));
		FencingRestoreUser(&saved);
	}
}

/* Send a relcache invalidation for every member of root's tree and for fencing.protected. */
static void
InvalidateTree(Oid root)
{
	ListCell   *lc;
	Oid			table = FencingProtectedTableOid();

	foreach(lc, Reach(root, true))
		CacheInvalidateRelcacheByRelid(lfirst_oid(lc));
	if (OidIsValid(table))
		CacheInvalidateRelcacheByRelid(table);
	FencingProtectionReset();
}

/* GuardMembers() inside SPI, with the DDL guard suspended. */
static void
GuardTree(Oid root)
{
	FencingSpiConnect();
	FencingRunWithDdlGuardSuspended(GuardMembers, root, NULL);
	SPI_finish();
	InvalidateTree(root);
}

/*
 * protect() of relid, before it changes anything (one call in protect.c):
 * refuse (0A000) a fence or key column the guard cannot trust, on relid
 * and every member of its tree (partitions and inheritance children may
 * have defaults of their own); refuse (55000) a relid already protected
 * through an inheritance ancestor, a member protected on its own, and a
 * BEFORE ROW trigger firing after the guard on any member (read with a
 * catalog snapshot: one committed while protect() waited for its lock is
 * seen); refuse (0A000) foreign tables among them.  Locks the members as protect() locks partitions.
 */
void
FencingCheckProtectable(Relation rel, const char *fence_column, int nkeys,
						Datum *keynames)
{
	Oid			relid = RelationGetRelid(rel);
	char	  **keys = palloc(sizeof(char *) * Max(nkeys, 1));
	Oid			own;
	ListCell   *lc;
	int			k;
	List	   *tree;

	for (k = 0; k < nkeys; k++)
		keys[k] = NameStr(*DatumGetName(keynames[k]));

	own = FencingProtectedBy(relid);
	if (OidIsValid(own) && own != relid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is already protected through \"%s\"",
						RelationGetRelationName(rel), RelName(own)),
				 errhint("Change the settings on \"%s\" instead.", RelName(own))));

	tree = has_subclass(relid) ?
		find_all_inheritors(relid, ShareRowExclusiveLock, NULL) : list_make1_oid(relid);
	foreach(lc, tree)
	{
		Oid			member = lfirst_oid(lc);
		char	   *column = NULL;
		char	   *problem;
		char	   *late = NULL;

		problem = ColumnProblem(member, fence_column, Max(nkeys, 0), keys, &column);
		if (problem != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot protect table \"%s\": %s%s",
							RelationGetRelationName(rel), problem,
							member == relid ? "" :
							psprintf(" in \"%s\"", RelName(member))),
					 errdetail("A default or a generation expression on the fence column would give a write without a token one; a generated key column is computed after the guard has checked the key."),
					 errhint("Drop the default or the expression first.")));
		if (member != relid && FencingProtectedBy(member) == member)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("\"%s\", under \"%s\", is protected on its own",
							RelName(member), RelationGetRelationName(rel)),
					 errhint("Call fencing.unprotect('%s') first.", FencingQualifiedName(member))));
		if (member != relid && get_rel_relkind(member) == RELKIND_FOREIGN_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot protect table \"%s\": \"%s\" is a foreign table",
							RelationGetRelationName(rel), RelName(member)),
					 errdetail("Foreign tables cannot have the TRUNCATE trigger of the fencing guard.")));
		/* every member: the catalog snapshot sees a trigger just committed */
		ForEachTrigger(member, VisitLateOnly, &late);
		if (late != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("trigger \"%s\" of table \"%s\" would fire after the fencing guard",
							late, RelName(member)),
					 errdetail("BEFORE ROW triggers fire in name order; one named after \"%s\" could change a row after the guard checked it.",
							   FENCING_GUARD_TRIGGER),
					 errhint("Rename the trigger so that its name sorts before \"%s\".",
							 FENCING_GUARD_TRIGGER)));
		/* and no trigger runs code of a role not trusted with the table */
		CheckTriggersCodeOwners(member, relid, true,
								member == relid ?
								psprintf("Table \"%s\" is about to be protected by fencing",
										 RelName(member)) :
								psprintf("Table \"%s\", under \"%s\", is about to be protected by fencing",
										 RelName(member), RelationGetRelationName(rel)));
	}
}

/*
 * protect() of relid, after it installed its triggers (one call in
 * protect.c): guard the inheritance children too (partitions have them
 * already), and invalidate what every backend caches of the tree.
 */
void
FencingGuardTree(Oid relid)
{
	GuardTree(relid);
}

/* unprotect() of relid (one call in protect.c): the inheritance children too. */
void
FencingUnguardTree(Oid relid)
{
	FencingSpiConnect();
	FencingRunWithDdlGuardSuspended(UnguardMembers, relid, NULL);
	SPI_finish();
	InvalidateTree(relid);
}

/*
 * Keep part, just detached or disinherited from a tree protected by p,
 * protected on its own with the same settings (and so the same scope).
 */
static void
ProtectDetached(Oid part, Protection *p)
{
	Oid			argtypes[2] = {OIDOID, OIDOID};
	Datum		values[2];
	FencingSavedUser saved;
	int			rc;

	FencingSpiConnect();
	/* every setting of the tree's row, whatever columns it has */
	values[0] = ObjectIdGetDatum(part);
	values[1] = ObjectIdGetDatum(p->relid);
	FencingBecomeRole(FencingRelOwner(part), &saved);
	/* the tree's row as it is now, whatever this transaction's snapshot */
	rc = FencingExecuteLatest("SELECT fencing.protect($1::pg_catalog.regclass, p.fence_column, "
							  "p.key_columns, p.strict, p.scope_name, p.lease) "
							  "FROM fencing.protected p "
							  "WHERE p.relid OPERATOR(pg_catalog.=) $2",
							  2, argtypes, values, NULL, false, 0);
	FencingRestoreUser(&saved);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not protect detached table: %s",
			 SPI_result_code_string(rc));
	SPI_finish();
	FencingProtectionReset();
}

/*
 * ATTACH PARTITION of part, and its tree, under parent, which is not
 * protected (ddl_command_end): PostgreSQL cloned parent's row triggers
 * into every partition of the tree, so a protected one among them is
 * checked as if they had been created on it: none may fire after the
 * guard (SF005), and their code must be trusted with it (42501).
 */
static void
CheckClonedTriggers(Oid parent, Oid part)
{
	ListCell   *lc;

	foreach(lc, Reach(part, true))
	{
		Oid			member = lfirst_oid(lc);
		Protection *p = ProtectionOf(member);

		if (p == NULL)
			continue;
		CheckTriggerState(member, p);
		CheckTriggersCodeOwners(member, ProtectionRoot(p), true,
								psprintf("%s, and ATTACH PARTITION cloned the row triggers of \"%s\" into it",
										 ProtectedContext(member, p), RelName(parent)));
	}
}

/*
 * Is relid reached by a command of this phase in a way the checks care
 * for?  At the start nothing is locked: an answer may be stale, and the
 * end checks again.
 */
static void
CheckAlterTable(AlterTableStmt *stmt, GuardPhase phase)
{
	ListCell   *lc;
	bool		columns = false;
	bool		triggers = false;
	bool		tree_cmds = false;
	Oid			relid;
	List	   *reach = NIL;
	ListCell   *lr;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

		if (IsColumnSubcommand(cmd))
			columns = true;
		else if (IsTriggerSubcommand(cmd))
			triggers = true;
		else if (IsTreeSubcommand(cmd))
			tree_cmds = true;
	}
	if (!columns && !triggers && !tree_cmds)
		return;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid))
		return;
	/* let PostgreSQL refuse a role that does not own the table (42501) */
	if (phase == PHASE_START && !FencingOwnsRelation(relid, GetUserId()))
		return;

	/*
	 * Column changes recurse to inheritance children and partitions (unless
	 * ONLY), and ALTER TYPE ... CASCADE to the type's typed tables; trigger
	 * changes on a partitioned table reach its partitions.
	 */
	if (columns && stmt->objtype == OBJECT_TYPE)
		reach = TypedTableTree(relid);
	else if (columns)
		reach = Reach(relid, stmt->relation->inh);
	else if (triggers)
		reach = Reach(relid, get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE);
	else
		reach = list_make1_oid(relid);

	/* the types of the columns to retype, protected yet or not */
	if (columns && phase == PHASE_START)
	{
		ForgetRetypes((Node *) stmt);
		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

			if (cmd->subtype != AT_AlterColumnType || cmd->def == NULL ||
				((ColumnDef *) cmd->def)->raw_default != NULL)
				continue;
			foreach(lr, reach)
				NoteRetype((Node *) stmt, lfirst_oid(lr), cmd->name);
		}
	}

	foreach(lr, reach)
	{
		Oid			member = lfirst_oid(lr);
		Protection *p = ProtectionOf(member);

		if (p == NULL)
			continue;
		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);

			/* trigger commands do not reach inheritance children */
			if (member != relid && IsTriggerSubcommand(cmd) &&
				!get_rel_relispartition(member))
				continue;
			CheckSubcommand((Node *) stmt, cmd, member, p, phase);
		}
		if (phase == PHASE_END && triggers)
			CheckTriggerState(member, p);
	}
	if (columns && phase == PHASE_END)
		ForgetRetypes((Node *) stmt);

	if (!tree_cmds)
		return;
	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, lc);
		Oid			other;
		Protection *p;

		if (!IsTreeSubcommand(cmd))
			continue;
		/*
		 * ATTACH of a protected table under a parent that is not: the
		 * parent's row triggers were cloned into it (checked at the end)
		 */
		if (cmd->subtype == AT_AttachPartition && phase == PHASE_END &&
			!OidIsValid(FencingProtectedBy(relid)))
		{
			other = TreeSubcommandOther(cmd);
			if (OidIsValid(other))
				CheckClonedTriggers(relid, other);
			continue;
		}
		/* ATTACH/DETACH: the parent is relid, a hash probe says enough */
		if ((cmd->subtype == AT_AttachPartition ||
			 cmd->subtype == AT_DetachPartition ||
			 cmd->subtype == AT_DetachPartitionFinalize) &&
			!OidIsValid(FencingProtectedBy(relid)))
			continue;
		other = TreeSubcommandOther(cmd);
		if (!OidIsValid(other))
			continue;
		switch (cmd->subtype)
		{
			case AT_AttachPartition:
				/* relid the parent, other the new partition */
				p = ProtectionOf(relid);
				if (p == NULL)
					break;
				CheckNewMembers(other, p, phase);
				if (phase == PHASE_END)
				{
					GuardTree(p->relid);
					FencingSeedScopesFrom(p->relid, other);
				}
				break;
			case AT_AddInherit:
				/* relid the child, other the parent (citus: not a shard) */
				p = ProtectionOf(other);
				if (p == NULL || OidIsValid(p->shell))
					break;
				CheckNewMembers(relid, p, phase);
				if (phase == PHASE_END)
				{
					GuardTree(p->relid);
					FencingSeedScopesFrom(p->relid, relid);
				}
				break;
			case AT_DetachPartition:
			case AT_DetachPartitionFinalize:
				p = ProtectionOf(relid);
				if (p == NULL)
					break;
				if (phase == PHASE_START && cmd->subtype == AT_DetachPartition &&
					((PartitionCmd *) cmd->def)->concurrent)
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot detach a partition of protected table \"%s\" concurrently",
									RelName(relid)),
							 errdetail("A partition detached from a protected table stays protected on its own, which DETACH PARTITION ... CONCURRENTLY does not allow."),
							 errhint("Detach it without CONCURRENTLY.")));
				/* also the end of a concurrent detach that raced protect() */
				if (phase == PHASE_END && !OidIsValid(FencingProtectedBy(other)))
					ProtectDetached(other, p);
				break;
			case AT_DropInherit:
				p = ProtectionOf(other);
				if (p == NULL || OidIsValid(p->shell))
					break;
				if (phase == PHASE_END && !OidIsValid(FencingProtectedBy(relid)))
					ProtectDetached(relid, p);
				break;
			default:
				break;
		}
	}
}

/*
 * Would this CREATE TRIGGER make exactly the guard trigger of its name, as
 * protect() (and pg_restore) make it?  The parse tree's view of what
 * HasGuardShape() checks in the catalog, for the check at the start.
 */
static bool
StmtHasGuardShape(CreateTrigStmt *stmt)
{
	bool		row = strcmp(stmt->trigname, FENCING_GUARD_TRIGGER) == 0;
	Oid			fn;

	if (stmt->isconstraint || stmt->columns != NIL || stmt->whenClause != NULL ||
		stmt->args != NIL || stmt->transitionRels != NIL ||
		stmt->timing != TRIGGER_TYPE_BEFORE || stmt->row != row)
		return false;
	if (stmt->events != (row ? (TRIGGER_TYPE_INSERT | TRIGGER_TYPE_DELETE |
								TRIGGER_TYPE_UPDATE) : TRIGGER_TYPE_TRUNCATE))
		return false;
	fn = LookupFuncName(stmt->funcname, 0, NULL, true);
	return OidIsValid(fn) &&
		IsFencingCFunction(fn, row ? "fencing_guard" : "fencing_guard_truncate");
}

/*
 * CREATE TRIGGER: on every protected table it reaches (a partitioned
 * table's row triggers are cloned into its partitions), refuse a role that
 * is not a member of the table's owner (42501), replacing a guard trigger
 * and a BEFORE ROW trigger firing after the guard (SF005), and, at the
 * end, a trigger whose code belongs to another role (42501).
 */
static void
CheckCreateTrigger(CreateTrigStmt *stmt, GuardPhase phase)
{
	Oid			relid;
	bool		late;
	bool		owner;
	ListCell   *lc;

	late = stmt->row && stmt->timing == TRIGGER_TYPE_BEFORE &&
		FiresAfterGuard(stmt->trigname) && !IsGuardName(stmt->trigname);
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid))
		return;
	owner = FencingOwnsRelation(relid, GetUserId());
	/* let PostgreSQL refuse a role that may not create triggers on it */
	if (phase == PHASE_START && !owner &&
		pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER) != ACLCHECK_OK)
		return;

	foreach(lc, Reach(relid, get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE))
	{
		Oid			member = lfirst_oid(lc);
		Protection *p = ProtectionOf(member);

		if (p == NULL)
			continue;
		if (!owner)
			ReportTriggerNotOwner(relid, member, p, stmt->trigname);
		if (stmt->replace && IsGuardNameOf(p, stmt->trigname))
			CheckGuardTriggerDdl(member, p, stmt->trigname, "cannot replace trigger \"%s\" of protected table \"%s\"");
		/* (a shard's guard carries its settings in arguments: citus.c) */
		if (IsGuardName(stmt->trigname) && !OidIsValid(p->shell) &&
			!StmtHasGuardShape(stmt))
			ReportGuardAltered(member, p,
							   psprintf("trigger \"%s\" would not be the fencing guard of protected table \"%s\"", stmt->trigname, RelName(member)),
							   NULL,
							   psprintf("a trigger named \"%s\" on it must be the guard that protect() installs, calling fencing.%s().",
										stmt->trigname,
										strcmp(stmt->trigname, FENCING_GUARD_TRIGGER) == 0 ?
										"guard" : "guard_truncate"));
		if (late && FiresAfterGuardOf(p, stmt->trigname) &&
			!IsGuardNameOf(p, stmt->trigname))
			ReportLateTrigger(member, p, stmt->trigname);
		if (phase == PHASE_END)
		{
			TriggerRef	trig = {InvalidOid, InvalidOid, stmt->trigname};

			CheckTriggerState(member, p);
			/* the trigger made here (or cloned here, with its name) */
			ForEachTrigger(member, VisitTriggerNamed, &trig);
			if (OidIsValid(trig.oid) && !IsGuardNameOf(p, stmt->trigname))
				CheckTriggerCodeOwner(&trig, member, ProtectionRoot(p), true,
									  ProtectedContext(member, p));
		}
	}
}

/* Is trigger name on relid a BEFORE ROW trigger? */
static void
VisitBeforeRow(Form_pg_trigger trig, HeapTuple tup pg_attribute_unused(), void *arg)
{
	char	  **name = (char **) arg;

	if (*name != NULL && strcmp(NameStr(trig->tgname), *name) == 0 &&
		TRIGGER_FOR_ROW(trig->tgtype) && TRIGGER_FOR_BEFORE(trig->tgtype))
		*name = NULL;			/* found: signal with NULL */
}

static bool
IsBeforeRowTrigger(Oid relid, const char *name)
{
	char	   *n = (char *) name;

	ForEachTrigger(relid, VisitBeforeRow, &n);
	return n == NULL;
}

/* ALTER TABLE ... RENAME COLUMN and ALTER TRIGGER ... RENAME. */
static void
CheckRename(RenameStmt *stmt, GuardPhase phase)
{
	Oid			relid;
	ListCell   *lc;

	if (stmt->renameType != OBJECT_COLUMN && stmt->renameType != OBJECT_TRIGGER &&
		stmt->renameType != OBJECT_ATTRIBUTE)
		return;
	if (stmt->renameType == OBJECT_TRIGGER && !MayBeGuardName(stmt->subname) &&
		!MayBeGuardName(stmt->newname) && !FiresAfterGuard(stmt->newname))
		return;
	if (stmt->relation == NULL)
		return;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid))
		return;
	/* let PostgreSQL refuse a role that does not own the table (42501) */
	if (phase == PHASE_START && !FencingOwnsRelation(relid, GetUserId()))
		return;

	if (stmt->renameType == OBJECT_TRIGGER)
	{
		/* a partitioned table's trigger is renamed in its partitions too */
		foreach(lc, Reach(relid, get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE))
		{
			Oid			member = lfirst_oid(lc);
			Protection *p = ProtectionOf(member);

			if (p == NULL)
				continue;
			CheckGuardTriggerDdl(member, p, stmt->subname, "cannot rename trigger \"%s\" of protected table \"%s\"");
			if (IsGuardNameOf(p, stmt->newname))
				CheckGuardTriggerDdl(member, p, stmt->newname, "cannot rename a trigger to trigger \"%s\" of protected table \"%s\"");
			if (FiresAfterGuardOf(p, stmt->newname) &&
				IsBeforeRowTrigger(member, phase == PHASE_START ?
								   stmt->subname : stmt->newname))
				ReportLateTrigger(member, p, stmt->newname);
			if (phase == PHASE_END)
				CheckTriggerState(member, p);
		}
		return;
	}
	/* ALTER TYPE ... RENAME ATTRIBUTE ... CASCADE renames typed tables' columns */
	if (stmt->renameType == OBJECT_ATTRIBUTE)
	{
		foreach(lc, TypedTableTree(relid))
		{
			Protection *p = ProtectionOf(lfirst_oid(lc));

			if (p != NULL)
				CheckKeyOrFence(lfirst_oid(lc), p, stmt->subname, "cannot rename column \"%s\" of protected table \"%s\"");
		}
		return;
	}
	if (stmt->relationType != OBJECT_TABLE && stmt->relationType != OBJECT_FOREIGN_TABLE)
		return;
	foreach(lc, Reach(relid, stmt->relation->inh))
	{
		Protection *p = ProtectionOf(lfirst_oid(lc));

		if (p != NULL)
			CheckKeyOrFence(lfirst_oid(lc), p, stmt->subname, "cannot rename column \"%s\" of protected table \"%s\"");
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
	if (!MayBeGuardName(*trigname) || list_length(object) < 2)
		return InvalidOid;
	relname = list_truncate(list_copy(object), list_length(object) - 1);
	return RangeVarGetRelid(makeRangeVarFromNameList(relname), NoLock, true);
}

/* DROP TRIGGER of a guard trigger (the sql_drop trigger checks again). */
static void
CheckDropTrigger(DropStmt *stmt)
{
	ListCell   *lc;

	if (stmt->removeType != OBJECT_TRIGGER)
		return;
	foreach(lc, stmt->objects)
	{
		char	   *trigname;
		Oid			relid = TriggerTarget(lfirst(lc), &trigname);
		Protection *p;

		if (!OidIsValid(relid) || !FencingOwnsRelation(relid, GetUserId()))
			continue;
		p = ProtectionOf(relid);
		if (p != NULL)
			CheckGuardTriggerDdl(relid, p, trigname, "cannot drop trigger \"%s\" of protected table \"%s\"");
	}
}

/* ALTER TRIGGER ... [NO] DEPENDS ON EXTENSION of a guard trigger. */
static void
CheckTriggerDepends(AlterObjectDependsStmt *stmt)
{
	char	   *trigname;
	Oid			relid;
	Protection *p;

	if (stmt->objectType != OBJECT_TRIGGER || stmt->relation == NULL)
		return;
	trigname = strVal(llast(castNode(List, stmt->object)));
	if (!MayBeGuardName(trigname))
		return;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid) || !FencingOwnsRelation(relid, GetUserId()))
		return;					/* PostgreSQL refuses a non-owner (42501) */
	p = ProtectionOf(relid);
	if (p != NULL)
		CheckGuardTriggerDdl(relid, p, trigname, "cannot change the dependencies of trigger \"%s\" of protected table \"%s\"");
}

/*
 * The relation rv names, or InvalidOid.  Inside CREATE SCHEMA (schema
 * given), an unqualified name was looked up in the new schema first, as
 * the command put it at the front of search_path while it ran.
 */
static Oid
RangeVarGetRelidIn(RangeVar *rv, const char *schema)
{
	if (schema != NULL && rv->schemaname == NULL)
	{
		Oid			relid = RangeVarGetRelid(makeRangeVar(pstrdup(schema), rv->relname, -1),
											 NoLock, true);

		if (OidIsValid(relid))
			return relid;
	}
	return RangeVarGetRelid(rv, NoLock, true);
}

/*
 * CREATE TABLE ... PARTITION OF / INHERITS (ddl_command_end): a table
 * created under a protected table is checked and guarded.  schema: the
 * schema that CREATE SCHEMA created around the statement, or NULL.
 */
static void
CheckCreateTable(CreateStmt *stmt, const char *schema)
{
	Protection *p = NULL;
	ListCell   *lc;
	Oid			relid;

	if (stmt->inhRelations == NIL)
		return;
	foreach(lc, stmt->inhRelations)
	{
		Oid			parent = RangeVarGetRelidIn(lfirst_node(RangeVar, lc), schema);
		Protection *pp = OidIsValid(parent) ? ProtectionOf(parent) : NULL;

		/* citus: Citus makes a shard's partitions (citus_ddl_end) */
		if (pp == NULL || OidIsValid(pp->shell))
			continue;
		if (p != NULL && p->relid != pp->relid)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot inherit from protected tables \"%s\" and \"%s\" at once",
							RelName(p->relid), RelName(pp->relid)),
					 errdetail("A tree of partitions or inheritance children is protected as a whole, with the settings of one table.")));
		p = pp;
	}
	if (p == NULL)
		return;
	if (schema != NULL && stmt->relation->schemaname == NULL)
		relid = RangeVarGetRelid(makeRangeVar(pstrdup(schema), stmt->relation->relname, -1),
								 NoLock, true);
	else
		relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid))
		return;
	CheckNewMembers(relid, p, PHASE_END);
	GuardTree(p->relid);
}

/*
 * CREATE SCHEMA ... CREATE TABLE ... (ddl_command_end): its subcommands
 * fire no event trigger of their own, so a table it creates under a
 * protected table (PARTITION OF, INHERITS) is checked and guarded here,
 * with the triggers that CREATE SCHEMA ... CREATE TRIGGER gave it.
 */
static void
CheckCreateSchema(CreateSchemaStmt *stmt)
{
	const char *schema = stmt->schemaname;
	ListCell   *lc;

	if (schema == NULL && stmt->authrole != NULL)
		schema = get_rolespec_name(stmt->authrole);
	if (schema == NULL)
		return;
	foreach(lc, stmt->schemaElts)
	{
		Node	   *elt = lfirst(lc);

		if (IsA(elt, CreateStmt))
			CheckCreateTable((CreateStmt *) elt, schema);
	}
}

/*
 * The triggers that run function fn (ALTER FUNCTION ... OWNER TO):
 * through pg_depend, those calling it or calling it in their WHEN clause,
 * directly or as an operator.  A list of trigger OIDs.
 */
static List *
TriggersRunning(Oid fn)
{
	Relation	deprel = table_open(DependRelationId, AccessShareLock);
	List	   *triggers = NIL;
	List	   *refs = list_make2_oid(ProcedureRelationId, fn);
	int			i;

	/* pairs (class, object) to look for: the function, then its operators */
	for (i = 0; i < list_length(refs); i += 2)
	{
		ScanKeyData key[2];
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(list_nth_oid(refs, i)));
		ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(list_nth_oid(refs, i + 1)));
		scan = systable_beginscan(deprel, DependReferenceIndexId, true, NULL, 2, key);
		while (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);

			if (dep->classid == TriggerRelationId)
				triggers = list_append_unique_oid(triggers, dep->objid);
			else if (dep->classid == OperatorRelationId &&
					 list_nth_oid(refs, i) == ProcedureRelationId &&
					 get_opcode(dep->objid) == fn)
				refs = lappend_oid(lappend_oid(refs, OperatorRelationId), dep->objid);
		}
		systable_endscan(scan);
	}
	table_close(deprel, AccessShareLock);
	return triggers;
}

/* The relation and name of trigger trigoid; false when it is gone. */
static bool
TriggerByOid(Oid trigoid, Oid *relid, char **name)
{
	Relation	tgrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found = false;

	ScanKeyInit(&key, Anum_pg_trigger_oid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(trigoid));
	scan = systable_beginscan(tgrel, TriggerOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		Form_pg_trigger trig = (Form_pg_trigger) GETSTRUCT(tup);

		*relid = trig->tgrelid;
		*name = pstrdup(NameStr(trig->tgname));
		found = true;
	}
	systable_endscan(scan);
	table_close(tgrel, AccessShareLock);
	return found;
}

/*
 * ALTER FUNCTION/ROUTINE ... OWNER TO (ddl_command_end, under the
 * command's AccessExclusiveLock on the function): refuse (42501) giving a
 * function that a trigger on a protected table runs to a role not trusted
 * with that table's code.
 */
static void
CheckAlterFunctionOwner(AlterOwnerStmt *stmt)
{
	Oid			fn;
	Oid			owner;
	ListCell   *lc;

	if (stmt->objectType != OBJECT_FUNCTION && stmt->objectType != OBJECT_ROUTINE)
		return;
	if (!OidIsValid(FencingProtectedTableOid()))
		return;
	fn = LookupFuncWithArgs(stmt->objectType, castNode(ObjectWithArgs, stmt->object), true);
	if (!OidIsValid(fn))
		return;
	owner = FencingFunctionOwner(fn, false);
	foreach(lc, TriggersRunning(fn))
	{
		Oid			relid;
		char	   *trigname;
		Protection *p;
		Oid			table_owner;

		if (!TriggerByOid(lfirst_oid(lc), &relid, &trigname))
			continue;
		p = ProtectionOf(relid);
		if (p == NULL || FencingCodeOwnerTrusted(owner, relid, ProtectionRoot(p)))
			continue;
		table_owner = FencingRelOwner(ProtectionRoot(p));
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cannot give function %s to role \"%s\"",
						format_procedure(fn), GetUserNameFromId(owner, false)),
				 errdetail("Trigger \"%s\" on table \"%s\" runs it. %s: the code of its triggers must belong to a superuser or to a member of the table's owner \"%s\", because the owner of a function can change its code at any time, and with it the token that the guard judges.",
						   trigname, RelName(relid), ProtectedContext(relid, p),
						   GetUserNameFromId(table_owner, false)),
				 errhint("Give the function to a member of role \"%s\", or drop the trigger first.",
						 GetUserNameFromId(table_owner, false))));
	}
}

/*
 * Is there a ddl_command_end trigger of ours that fires for this tag?
 * Not with the event triggers of 1.0 for CREATE TRIGGER, ALTER TRIGGER
 * and ALTER FOREIGN TABLE.
 */
static bool
EndTriggerFires(CommandTag tag)
{
	ListCell   *lc;

	foreach(lc, EventCacheLookup(EVT_DDLCommandEnd))
	{
		EventTriggerCacheItem *item = lfirst(lc);

		if ((item->tagset == NULL || bms_is_member(tag, item->tagset)) &&
			IsFencingCFunction(item->fnoid, "fencing_ddl_guard_end"))
			return true;
	}
	return false;
}

/*
 * Without a ddl_command_end check to come (1.0's event triggers), lock
 * the target in the command's own mode first, as 1.0 did, so that
 * protect() cannot slip in between the check and the command.
 */
static void
LockLikeTheCommand(Node *parsetree)
{
	RangeVar   *rv = NULL;
	LOCKMODE	mode = AccessExclusiveLock;
	Oid			relid;
	bool		triggers_only = false;

	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			rv = ((AlterTableStmt *) parsetree)->relation;
			mode = AlterTableGetLockLevel(((AlterTableStmt *) parsetree)->cmds);
			break;
		case T_CreateTrigStmt:
			rv = ((CreateTrigStmt *) parsetree)->relation;
			mode = ShareRowExclusiveLock;
			triggers_only = true;
			break;
		case T_RenameStmt:
			rv = ((RenameStmt *) parsetree)->relation;
			break;
		case T_AlterObjectDependsStmt:
			rv = ((AlterObjectDependsStmt *) parsetree)->relation;
			break;
		default:
			return;
	}
	if (rv == NULL)
		return;
	relid = RangeVarGetRelid(rv, NoLock, true);
	if (!OidIsValid(relid))
		return;
	/* not for a role that PostgreSQL is about to refuse */
	if (!FencingOwnsRelation(relid, GetUserId()) &&
		!(triggers_only &&
		  pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER) == ACLCHECK_OK))
		return;
	LockRelationOid(relid, mode);
	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		(void) find_all_inheritors(relid, mode, NULL);
}

/*
 * fencing.ddl_guard_start(): the ddl_command_start event trigger; refuses
 * early, without locking, the DDL that would lower a protected table's
 * protection.
 */
Datum
fencing_ddl_guard_start(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *parsetree;

	CheckEventTriggerCall(fcinfo, "ddl_guard_start");
	if (FencingDdlGuardSuspended)
		PG_RETURN_NULL();
	trigdata = (EventTriggerData *) fcinfo->context;
	parsetree = trigdata->parsetree;

	/* 1.0's ddl_command_end fired for ALTER TABLE: ask only for the others */
	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			if (((AlterTableStmt *) parsetree)->objtype != OBJECT_FOREIGN_TABLE)
				break;
			/* FALLTHROUGH */
		case T_CreateTrigStmt:
		case T_AlterObjectDependsStmt:
			if (!EndTriggerFires(trigdata->tag))
				LockLikeTheCommand(parsetree);
			break;
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_TRIGGER &&
				!EndTriggerFires(trigdata->tag))
				LockLikeTheCommand(parsetree);
			break;
		default:
			break;
	}

	switch (nodeTag(parsetree))
	{
		case T_AlterTableStmt:
			CheckAlterTable((AlterTableStmt *) parsetree, PHASE_START);
			break;
		case T_RenameStmt:
			CheckRename((RenameStmt *) parsetree, PHASE_START);
			break;
		case T_DropStmt:
			CheckDropTrigger((DropStmt *) parsetree);
			break;
		case T_AlterObjectDependsStmt:
			CheckTriggerDepends((AlterObjectDependsStmt *) parsetree);
			break;
		case T_CreateTrigStmt:
			CheckCreateTrigger((CreateTrigStmt *) parsetree, PHASE_START);
			break;
		default:
			break;
	}
	PG_RETURN_NULL();
}

/*
 * fencing.ddl_guard_end(): the ddl_command_end event trigger; checks
 * again under the command's locks, guards tables created, attached or
 * inherited under a protected table, seeds the scopes from their rows,
 * and keeps detached ones protected.
 */
Datum
fencing_ddl_guard_end(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *parsetree;

	CheckEventTriggerCall(fcinfo, "ddl_guard_end");
	if (FencingDdlGuardSuspended)
		PG_RETURN_NULL();
	trigdata = (EventTriggerData *) fcinfo->context;
	parsetree = trigdata->parsetree;

	switch (nodeTag(parsetree))
	{
		case T_CreateStmt:
		case T_CreateForeignTableStmt:
			CheckCreateTable((CreateStmt *) parsetree, NULL);
			break;
		case T_CreateSchemaStmt:
			CheckCreateSchema((CreateSchemaStmt *) parsetree);
			break;
		case T_AlterOwnerStmt:
			CheckAlterFunctionOwner((AlterOwnerStmt *) parsetree);
			break;
		case T_AlterTableStmt:
			CheckAlterTable((AlterTableStmt *) parsetree, PHASE_END);
			break;
		case T_RenameStmt:
			CheckRename((RenameStmt *) parsetree, PHASE_END);
			break;
		case T_AlterObjectDependsStmt:
			CheckTriggerDepends((AlterObjectDependsStmt *) parsetree);
			break;
		case T_CreateTrigStmt:
			CheckCreateTrigger((CreateTrigStmt *) parsetree, PHASE_END);
			break;
		default:
			break;
	}
	PG_RETURN_NULL();
}

/* One object of pg_event_trigger_dropped_objects(), as far as we need it. */
typedef struct DroppedObject
{
	Oid			classid;
	Oid			objid;
	int32		objsubid;
	List	   *names;			/* address_names, as C strings */
} DroppedObject;

/*
 * The objects this command dropped, from the function behind
 * pg_event_trigger_dropped_objects(), called directly (no SQL).
 */
static List *
DroppedObjects(void)
{
	FmgrInfo	flinfo;
	LOCAL_FCINFO(fcinfo, 0);
	ReturnSetInfo rsinfo;
	ExprContext *econtext = CreateStandaloneExprContext();
	TupleTableSlot *slot;
	List	   *result = NIL;

	fmgr_info(F_PG_EVENT_TRIGGER_DROPPED_OBJECTS, &flinfo);
	memset(&rsinfo, 0, sizeof(rsinfo));
	rsinfo.type = T_ReturnSetInfo;
	rsinfo.econtext = econtext;
	rsinfo.allowedModes = (int) SFRM_Materialize;
	rsinfo.returnMode = SFRM_ValuePerCall;
	InitFunctionCallInfoData(*fcinfo, &flinfo, 0, InvalidOid, NULL, (Node *) &rsinfo);
	(void) FunctionCallInvoke(fcinfo);
	if (rsinfo.returnMode != SFRM_Materialize || rsinfo.setResult == NULL)
	{
		FreeExprContext(econtext, true);
		return NIL;
	}

	slot = MakeSingleTupleTableSlot(rsinfo.setDesc, &TTSOpsMinimalTuple);
	while (tuplestore_gettupleslot(rsinfo.setResult, true, false, slot))
	{
		DroppedObject *obj = palloc0(sizeof(DroppedObject));
		bool		isnull;
		Datum		names;

		obj->classid = DatumGetObjectId(slot_getattr(slot, 1, &isnull));
		obj->objid = DatumGetObjectId(slot_getattr(slot, 2, &isnull));
		obj->objsubid = DatumGetInt32(slot_getattr(slot, 3, &isnull));
		names = slot_getattr(slot, 11, &isnull);
		if (!isnull && (obj->classid == TriggerRelationId ||
						(obj->classid == RelationRelationId && obj->objsubid != 0)))
		{
			Datum	   *elems;
			bool	   *nulls;
			int			n,
						i;

			deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false,
							  TYPALIGN_INT, &elems, &nulls, &n);
			for (i = 0; i < n; i++)
				obj->names = lappend(obj->names,
									 nulls[i] ? NULL : TextDatumGetCString(elems[i]));
		}
		result = lappend(result, obj);
	}
	ExecDropSingleTupleTableSlot(slot);
	tuplestore_end(rsinfo.setResult);
	FreeExprContext(econtext, true);
	return result;
}

/* The relation named by the first two of names (schema, table), or InvalidOid. */
static Oid
RelationOfNames(List *names)
{
	if (list_length(names) < 3 || linitial(names) == NULL || lsecond(names) == NULL)
		return InvalidOid;
	return RangeVarGetRelid(makeRangeVar(linitial(names), lsecond(names), -1),
							NoLock, true);
}

/* Forget the protections of the dropped tables in relids (as the owner). */
static void
ForgetProtections(List *relids)
{
	FencingSavedUser saved;
	ListCell   *lc;

	FencingSpiConnect();
	FencingBecomeOwner(&saved);
	foreach(lc, relids)
	{
		Oid			argtypes[1] = {OIDOID};
		Datum		values[1] = {ObjectIdGetDatum(lfirst_oid(lc))};
		int			rc;

		rc = SPI_execute_with_args("DELETE FROM fencing.protected "
								   "WHERE relid OPERATOR(pg_catalog.=) $1",
								   1, argtypes, values, NULL, false, 0);
		if (rc != SPI_OK_DELETE)
			elog(ERROR, "could not forget dropped table: %s",
				 SPI_result_code_string(rc));
		/* its counters in fencing.stats go at commit */
		if (SPI_processed > 0)
			FencingStatsForget(lfirst_oid(lc));
	}
	FencingRestoreUser(&saved);
	SPI_finish();
	if (OidIsValid(FencingProtectedTableOid()))
		CacheInvalidateRelcacheByRelid(FencingProtectedTableOid());
	FencingProtectionReset();
}

/*
 * fencing.ddl_guard_drop(): the sql_drop event trigger.  Whatever command
 * dropped them (DROP COLUMN, DROP DOMAIN/TYPE/COLLATION/EXTENSION/SCHEMA
 * ... CASCADE, DROP OWNED, DROP TRIGGER): the fence and key columns and
 * the guard triggers of a protected table that is not itself dropped
 * must stay (SF005).  A dropped protected table leaves fencing.protected
 * (its scope fences stay: a table created again under the same name and
 * protected again must not accept older tokens).
 */
Datum
fencing_ddl_guard_drop(PG_FUNCTION_ARGS)
{
	List	   *objects;
	List	   *dropped_rels = NIL;
	List	   *forget = NIL;
	ListCell   *lc;

	CheckEventTriggerCall(fcinfo, "ddl_guard_drop");
	if (FencingDdlGuardSuspended)
		PG_RETURN_NULL();
	/* DROP EXTENSION fencing, DROP SCHEMA fencing CASCADE: nothing to do */
	if (!OidIsValid(FencingProtectedTableOid()))
		PG_RETURN_NULL();

	objects = DroppedObjects();
	foreach(lc, objects)
	{
		DroppedObject *obj = lfirst(lc);

		if (obj->classid == RelationRelationId && obj->objsubid == 0)
			dropped_rels = lappend_oid(dropped_rels, obj->objid);
	}
	foreach(lc, objects)
	{
		DroppedObject *obj = lfirst(lc);

		if (obj->classid == RelationRelationId && obj->objsubid == 0)
		{
			/* the relation is gone: only fencing.protected can name it */
			if (FencingProtectedBy(obj->objid) == obj->objid)
				forget = lappend_oid(forget, obj->objid);
		}
		else if (obj->classid == RelationRelationId)
		{
			Protection *p;

			if (list_member_oid(dropped_rels, obj->objid) || list_length(obj->names) < 3)
				continue;
			/*
			 * A column of a scope's storage table (fencing.scope_<n>): its
			 * key columns have the protected tables' types, so DROP TYPE,
			 * DROP DOMAIN or DROP COLLATION ... CASCADE by the type's owner
			 * would drop a key column of someone else's fences.
			 */
			if (!creating_extension &&
				get_rel_namespace(obj->objid) == get_namespace_oid("fencing", true))
				ereport(ERROR,
						(errcode(ERRCODE_FENCING_GUARD_ALTERED),
						 errmsg("cannot drop column \"%s\" of fencing table \"%s\"",
								(char *) llast(obj->names), RelName(obj->objid)),
						 errdetail("The table keeps fences of the extension fencing."),
						 errhint("A scope that no protected table uses can be dropped whole with fencing.reset_scope().")));
			p = ProtectionOf(obj->objid);
			if (p != NULL)
				CheckKeyOrFence(obj->objid, p, llast(obj->names), "cannot drop column \"%s\" of protected table \"%s\"");
		}
		else if (obj->classid == TriggerRelationId)
		{
			Oid			relid;
			Protection *p;

			if (list_length(obj->names) < 3 || !MayBeGuardName(llast(obj->names)))
				continue;
			relid = RelationOfNames(obj->names);
			if (!OidIsValid(relid) || list_member_oid(dropped_rels, relid))
				continue;
			p = ProtectionOf(relid);
			if (p != NULL)
				CheckGuardTriggerDdl(relid, p, llast(obj->names), "cannot drop trigger \"%s\" of protected table \"%s\"");
		}
	}
	if (forget != NIL)
		ForgetProtections(forget);
	PG_RETURN_NULL();
}

/*
 * fencing.protected_changed(): statement trigger on fencing.protected;
 * tells every backend's protection cache that a protection changed,
 * whoever wrote the table (pg_restore, the extension owner by hand).
 */
Datum
fencing_protected_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("fencing.protected_changed() was not called by trigger manager")));
	CacheInvalidateRelcacheByRelid(RelationGetRelid(trigdata->tg_relation));
	FencingProtectionReset();
	return PointerGetDatum(NULL);	/* an AFTER trigger: not a SQL NULL */
}
