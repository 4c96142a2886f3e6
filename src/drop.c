/*-------------------------------------------------------------------------
 *
 * drop.c
 *	  DROP EXTENSION fencing takes the scopes' storage tables with it.
 *
 * The storage tables (fencing.scope_<n>, scope_storage.c) are no members
 * of the extension, so that pg_dump dumps them with their rows; but then
 * DROP EXTENSION would find them in its schema, depending on its type
 * fencing.fence, and fail: any role that may protect a table of its own
 * in key scope could so keep the extension from being dropped (its scope
 * outlives its table), and so could any role with a view on a storage
 * table.  The event trigger fencing_drop_extension (ddl_command_start of
 * DROP EXTENSION) therefore drops every registered storage table first,
 * as the extension's owner who owns them, with CASCADE: what other roles
 * built on them goes too, each named in a NOTICE, as for any CASCADE.
 * What DROP EXTENSION then finds is what it always found: tables of the
 * users that have fence columns need CASCADE, as for any extension's type.
 *
 * Only the extension's owner gets that far: another role's DROP EXTENSION
 * fails here with 42501, as PostgreSQL's own check (which comes after
 * this trigger) would fail it, before anything is dropped or locked.
 *
 * A DROP EXTENSION that fails after this (such a table, another role's
 * lock) rolls the storage tables' drop back with it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_extension.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "compat.h"
#include "extension.h"
#include "scope_storage.h"

PG_FUNCTION_INFO_V1(fencing_drop_extension_start);

/* Does a DROP statement drop extension fencing? */
static bool
DropsFencing(Node *parsetree)
{
	DropStmt   *stmt;
	ListCell   *lc;

	if (parsetree == NULL || !IsA(parsetree, DropStmt))
		return false;
	stmt = (DropStmt *) parsetree;
	if (stmt->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, stmt->objects)
	{
		Node	   *name = lfirst(lc);

		if (IsA(name, String) && strcmp(strVal(name), "fencing") == 0)
			return true;
	}
	return false;
}

/*
 * fencing.drop_extension_start(): the ddl_command_start event trigger of
 * DROP EXTENSION; drops the registered scope storage tables when the
 * statement drops fencing.
 */
Datum
fencing_drop_extension_start(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	FencingSavedUser saved;
	StringInfoData sql;
	uint64		i;
	int			rc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" was not called by the event trigger manager",
						"drop_extension_start")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (!DropsFencing(trigdata->parsetree))
		PG_RETURN_NULL();
	/*
	 * PostgreSQL checks the owner only after this trigger: refuse here, as
	 * it would, before anything is dropped, locked or named.
	 */
	if (!FencingOwnsExtension(get_extension_oid("fencing", false), GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_EXTENSION, "fencing");
	if (!FencingScopeStorageLayout())
		PG_RETURN_NULL();

	FencingSpiConnect();
	FencingBecomeOwner(&saved);
	rc = SPI_execute("SELECT s.storage::pg_catalog.oid FROM fencing.scope_storage s "
					 "JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.storage "
					 "ORDER BY s.scope_name", true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.scope_storage: %s",
			 SPI_result_code_string(rc));
	initStringInfo(&sql);
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			storage = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															 SPI_tuptable->tupdesc,
															 1, &isnull));

		appendStringInfo(&sql, "%s%s", i == 0 ? "DROP TABLE " : ", ",
						 FencingQualifiedName(storage));
	}
	if (sql.len > 0)
	{
		appendStringInfoString(&sql, " CASCADE");
		FencingRunUtility(sql.data);
	}
	FencingRestoreUser(&saved);
	SPI_finish();
	PG_RETURN_NULL();
}
