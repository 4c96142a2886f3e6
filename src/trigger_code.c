/*-------------------------------------------------------------------------
 *
 * trigger_code.c
 *	  The code a trigger runs, and who may own it.
 *
 * Only the owner adds code to a protected table's writes.  A trigger has
 * no owner in pg_trigger, but the functions it runs do, and the owner of a
 * function can change its code at any time (CREATE OR REPLACE FUNCTION).
 * So the code of every trigger on a protected table, a partition or an
 * inheritance child of one -- its function, and the functions its WHEN
 * clause calls, directly or as an operator -- must belong to a role
 * trusted with the table: a superuser, or a member of the owner of the
 * table the trigger is on or of the protected table (a partition may have
 * an owner of its own; triggers cloned from the protected table are its
 * owner's).  Functions those functions call are their owners' choice.
 *
 * The DDL guard checks it when a trigger is created on a protected table,
 * when protect() runs, when a table joins a protected tree and when a
 * function that such a trigger runs is given to another owner; the guard's
 * settings (guard_config.c) check it again before a write, because role
 * memberships and owners also change by commands that fire no event
 * trigger (REVOKE, ALTER TABLE ... OWNER TO, REASSIGN OWNED).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "extension.h"
#include "protection.h"
#include "trigger_code.h"

/* May role own the code of triggers on member, protected under root? */
bool
FencingCodeOwnerTrusted(Oid role, Oid member, Oid root)
{
	if (superuser_arg(role))
		return true;
	if (has_privs_of_role(role, FencingRelOwner(member)))
		return true;
	return OidIsValid(root) && root != member &&
		has_privs_of_role(role, FencingRelOwner(root));
}

/*
 * The owner of function fn.  With lock, read under a share lock on the
 * function, which ALTER FUNCTION ... OWNER TO (AccessExclusiveLock) waits
 * for: a change of owner either committed before (and is seen) or waits
 * for this transaction (and then sees the trigger).
 */
Oid
FencingFunctionOwner(Oid fn, bool lock)
{
	HeapTuple	tup;
	Oid			owner;

	if (lock)
		LockDatabaseObject(ProcedureRelationId, fn, 0, AccessShareLock);
	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fn));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * The functions that trigger trigoid runs: tgfoid first, then those its
 * WHEN clause calls (pg_depend records them, and the operators it uses).
 */
List *
FencingTriggerCode(Oid trigoid, Oid tgfoid)
{
	Relation	deprel = table_open(DependRelationId, AccessShareLock);
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *fns = list_make1_oid(tgfoid);

	ScanKeyInit(&key[0], Anum_pg_depend_classid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(TriggerRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_objid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(trigoid));
	scan = systable_beginscan(deprel, DependDependerIndexId, true, NULL, 2, key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);

		if (dep->refclassid == ProcedureRelationId)
			fns = list_append_unique_oid(fns, dep->refobjid);
		else if (dep->refclassid == OperatorRelationId)
		{
			RegProcedure code = get_opcode(dep->refobjid);

			if (OidIsValid(code))
				fns = list_append_unique_oid(fns, code);
		}
	}
	systable_endscan(scan);
	table_close(deprel, AccessShareLock);
	return fns;
}

/*
 * fencing.trigger_code_problem(member, root): what is wrong with the code
 * of member's triggers (member protected under root), or NULL; for
 * fencing.protected_tables and the update's re-check.  The same test as
 * the guard's before a write (guard_config.c).
 */
PG_FUNCTION_INFO_V1(fencing_trigger_code_problem);

Datum
fencing_trigger_code_problem(PG_FUNCTION_ARGS)
{
	Oid			member = PG_GETARG_OID(0);
	Oid			root = PG_GETARG_OID(1);
	Relation	trigrel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *found = NIL;
	ListCell   *lc;

	trigrel = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(member));
	scan = systable_beginscan(trigrel, TriggerRelidNameIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_trigger trig = (Form_pg_trigger) GETSTRUCT(tup);
		ListCell   *fc;

		if (trig->tgisinternal ||
			strcmp(NameStr(trig->tgname), FENCING_GUARD_TRIGGER) == 0 ||
			strcmp(NameStr(trig->tgname), FENCING_TRUNCATE_TRIGGER) == 0)
			continue;
		foreach(fc, FencingTriggerCode(trig->oid, trig->tgfoid))
		{
			Oid			fn = lfirst_oid(fc);
			Oid			owner = FencingFunctionOwner(fn, false);
			char	   *owner_name;

			if (!OidIsValid(owner) || FencingCodeOwnerTrusted(owner, member, root))
				continue;
			owner_name = GetUserNameFromId(owner, true);
			found = lappend(found,
							psprintf("trigger %s on %s runs function %s of role %s, not a member of the table's owner",
									 quote_identifier(NameStr(trig->tgname)),
									 FencingQualifiedName(member),
									 format_procedure_qualified(fn),
									 owner_name ? quote_identifier(owner_name) : "?"));
		}
	}
	systable_endscan(scan);
	table_close(trigrel, AccessShareLock);

	if (found == NIL)
		PG_RETURN_NULL();
	{
		StringInfoData buf;

		initStringInfo(&buf);
		foreach(lc, found)
		{
			if (buf.len > 0)
				appendStringInfoString(&buf, "; ");
			appendStringInfoString(&buf, (char *) lfirst(lc));
		}
		PG_RETURN_TEXT_P(cstring_to_text(buf.data));
	}
}
