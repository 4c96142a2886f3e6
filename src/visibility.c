/*-------------------------------------------------------------------------
 *
 * visibility.c
 *	  Who may read a key value or a fence: the view fencing.scopes (through
 *	  fencing.scope_fences()) and the DETAIL of a stale write (SF001).
 *
 * A scope's keys are values of the protected tables' key columns (an
 * account number, a national identity number), and its fences say how far
 * each key's writers have come.  They are shown only to roles that could
 * read them from the tables themselves:
 *
 *   - a role that may SELECT the table (or, with column privileges, its
 *     fence column and every key column);
 *   - the scope's owner (the role whose protect() created it) and its
 *     members;
 *   - the extension's owner and superusers.
 *
 * A scope shared by several tables shows its rows to a role that owns
 * it or may read every table protected into it: each key may have come
 * from any of them.  A scope no table is protected into any more shows
 * its rows to its owner only.  Every other role sees no row of it.
 *
 * The storage tables themselves (fencing.scope_<n>) are readable by their
 * owner, the extension's owner, only; fencing.scope_fences() reads them as
 * that owner and decides, row set by row set, as the caller.  The keys are
 * printed by their types' output functions as the caller, under the
 * caller's settings, as a view would print them.
 *
 * Row security hides keys too: when policies of a protected table apply
 * to the caller (check_enable_rls() says RLS_ENABLED), the caller sees
 * none of its scope's keys and fences, whatever its privileges, and even
 * as the scope's owner (a table owner under FORCE ROW LEVEL SECURITY).
 * Roles that bypass row security (superusers, BYPASSRLS, the owner
 * without FORCE) see them as before.  We show keys only to such roles
 * rather than evaluate the policies per key: a policy may depend on any
 * column of a row, and a key is visible only if some row with it is, so
 * anything finer would have to run the policies over the table's rows for
 * every read of fencing.scopes and every SF001 DETAIL.
 *
 * A writer that lost (SF001) but may not read the table learns that it
 * lost and to which scope, not the key nor the fence: the check runs on
 * the error path only, never on an accepted write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/tuplestore.h"

#include "extension.h"
#include "guard_config.h"
#include "scope_storage.h"
#include "visibility.h"

PG_FUNCTION_INFO_V1(fencing_scope_fences);

/* May the current user SELECT these columns of relid (attnums > 0)? */
static bool
ColumnsReadable(Oid relid, int ncols, const AttrNumber *attnums)
{
	Oid			userid = GetUserId();
	int			i;

	for (i = 0; i < ncols; i++)
		if (attnums[i] <= 0 ||
			pg_attribute_aclcheck(relid, attnums[i], userid, ACL_SELECT) != ACLCHECK_OK)
			return false;
	return true;
}

/* Do relid's row security policies apply to the current user? */
static bool
RowSecurityApplies(Oid relid)
{
	return check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED;
}

/*
 * May the current user read the keys and fences that relid writes: SELECT
 * on the table, or on its fence column and all its key columns, with no
 * row security policy of the table applying to it?  A relation that does
 * not exist (any more) reads as false.
 */
static bool
TableKeysReadable(Oid relid, int ncols, const AttrNumber *attnums)
{
	bool		is_missing = false;

	if (get_rel_relkind(relid) == '\0' || RowSecurityApplies(relid))
		return false;

	if (pg_class_aclcheck_ext(relid, GetUserId(), ACL_SELECT, &is_missing) == ACLCHECK_OK)
		return true;
	if (is_missing)
		return false;
	return ColumnsReadable(relid, ncols, attnums);
}

/* The owner of scope_name in the registry; InvalidOid when unknown. */
static Oid
ScopeOwner(const char *scope_name)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	FencingSavedUser saved;
	Oid			owner = InvalidOid;
	int			rc;

	if (scope_name == NULL || !FencingScopeStorageLayout())
		return InvalidOid;
	values[0] = CStringGetTextDatum(scope_name);
	FencingSpiConnect();
	FencingBecomeOwner(&saved);
	rc = SPI_execute_with_args("SELECT owner::pg_catalog.oid FROM fencing.scope_storage "
							   "WHERE scope_name OPERATOR(pg_catalog.=) $1",
							   1, argtypes, values, NULL, true, 1);
	FencingRestoreUser(&saved);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.scope_storage: %s",
			 SPI_result_code_string(rc));
	if (SPI_processed > 0)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0],
									  SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			owner = DatumGetObjectId(d);
	}
	SPI_finish();
	return owner;
}

/*
 * May the current user see the key and the fence that a write to rel,
 * guarded by cfg, lost to?  For the error path of the guard only.
 */
bool
FencingMayReadGuardedKeys(Relation rel, GuardConfig *cfg)
{
	AttrNumber	attnums[INDEX_MAX_KEYS + 1];
	int			ncols = 0;
	int			i;
	Oid			owner;

	attnums[ncols++] = cfg->fence_attnum;
	for (i = 0; i < cfg->nkeys && ncols <= INDEX_MAX_KEYS; i++)
		attnums[ncols++] = cfg->key_attnums[i];
	if (TableKeysReadable(RelationGetRelid(rel), ncols, attnums))
		return true;
	/* a partition's writer may read the protected table itself */
	if (OidIsValid(cfg->protected_relid) &&
		cfg->protected_relid != RelationGetRelid(rel))
	{
		bool		is_missing = false;

		if (pg_class_aclcheck_ext(cfg->protected_relid, GetUserId(), ACL_SELECT,
								  &is_missing) == ACLCHECK_OK &&
			!RowSecurityApplies(cfg->protected_relid))
			return true;
	}
	if (FencingActsFor(FencingOwnerOid()))
		return true;
	if (cfg->nkeys >= 0 && !RowSecurityApplies(RelationGetRelid(rel)))
	{
		owner = ScopeOwner(cfg->scope_name);
		if (OidIsValid(owner) && FencingActsFor(owner))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------------
 * fencing.scope_fences()
 * ------------------------------------------------------------------------
 */

/*
 * May the current user read protected table relid's keys?  fence_column
 * and key_columns are its settings in fencing.protected.
 */
static bool
ProtectedTableReadable(Oid relid, Datum fence_column, Datum key_columns)
{
	AttrNumber	attnums[INDEX_MAX_KEYS + 1];
	int			ncols = 0;
	Datum	   *names;
	int			nnames;
	int			i;

	attnums[ncols++] = get_attnum(relid, NameStr(*DatumGetName(fence_column)));
	deconstruct_array(DatumGetArrayTypeP(key_columns), NAMEOID, NAMEDATALEN,
					  false, TYPALIGN_CHAR, &names, NULL, &nnames);
	for (i = 0; i < nnames && ncols <= INDEX_MAX_KEYS; i++)
		attnums[ncols++] = get_attnum(relid, NameStr(*DatumGetName(names[i])));
	return TableKeysReadable(relid, ncols, attnums);
}

/* One scope of the registry, as scope_fences() needs it */
typedef struct VisibleScope
{
	char	   *scope_name;
	Oid			storage;
	bool		table_scope;
	bool		visible;
} VisibleScope;

/*
 * The scopes of the registry, in name order, each with whether the
 * current user may see its rows.  Runs inside SPI, as the caller; the
 * extension's tables are read as their owner.
 */
static List *
VisibleScopes(MemoryContext cxt)
{
	FencingSavedUser saved;
	bool		sees_all = FencingActsFor(FencingOwnerOid());
	List	   *scopes = NIL;
	SPITupleTable *registry;
	uint64		nscopes;
	uint64		s;
	int			rc;

	FencingBecomeOwner(&saved);
	rc = SPI_execute("SELECT s.scope_name, s.owner::pg_catalog.oid, "
					 "s.storage::pg_catalog.oid, s.table_scope "
					 "FROM fencing.scope_storage s ORDER BY s.scope_name",
					 true, 0);
	FencingRestoreUser(&saved);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.scope_storage: %s",
			 SPI_result_code_string(rc));
	registry = SPI_tuptable;
	nscopes = SPI_processed;

	for (s = 0; s < nscopes; s++)
	{
		HeapTuple	tup = registry->vals[s];
		TupleDesc	desc = registry->tupdesc;
		bool		isnull;
		VisibleScope *scope;
		MemoryContext oldcxt = MemoryContextSwitchTo(cxt);

		scope = palloc0(sizeof(VisibleScope));
		scope->scope_name = TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull));
		scope->storage = DatumGetObjectId(SPI_getbinval(tup, desc, 3, &isnull));
		scope->table_scope = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		MemoryContextSwitchTo(oldcxt);

		scope->visible = sees_all;
		if (!scope->visible)
		{
			/*
			 * its owner, unless row security of one of its tables applies
			 * to it; anyone else who may read every table protected into
			 * the scope, and there is one
			 */
			bool		owns = FencingActsFor(DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull)));
			Oid			argtypes[1] = {TEXTOID};
			Datum		values[1] = {CStringGetTextDatum(scope->scope_name)};
			uint64		t;

			FencingBecomeOwner(&saved);
			rc = SPI_execute_with_args("SELECT p.relid::pg_catalog.oid, p.fence_column, p.key_columns "
									   "FROM fencing.protected p "
									   "WHERE p.scope_name OPERATOR(pg_catalog.=) $1 "
									   "AND p.key_columns IS NOT NULL",
									   1, argtypes, values, NULL, true, 0);
			FencingRestoreUser(&saved);
			if (rc != SPI_OK_SELECT)
				elog(ERROR, "could not read fencing.protected: %s",
					 SPI_result_code_string(rc));
			scope->visible = owns || SPI_processed > 0;
			for (t = 0; t < SPI_processed && scope->visible; t++)
			{
				HeapTuple	ptup = SPI_tuptable->vals[t];
				TupleDesc	pdesc = SPI_tuptable->tupdesc;
				Oid			relid = DatumGetObjectId(SPI_getbinval(ptup, pdesc, 1, &isnull));

				scope->visible = owns ?
					!RowSecurityApplies(relid) :
					ProtectedTableReadable(relid,
										   SPI_getbinval(ptup, pdesc, 2, &isnull),
										   SPI_getbinval(ptup, pdesc, 3, &isnull));
			}
			SPI_freetuptable(SPI_tuptable);
		}
		oldcxt = MemoryContextSwitchTo(cxt);
		scopes = lappend(scopes, scope);
		MemoryContextSwitchTo(oldcxt);
	}
	SPI_freetuptable(registry);
	return scopes;
}

/*
 * Append the rows of one visible scope: its storage is read as its owner,
 * its keys printed as the caller.  A storage table that is gone is
 * skipped (fencing.protected_tables says so).
 */
static void
AddScopeRows(VisibleScope *scope, Tuplestorestate *tupstore, TupleDesc tupdesc)
{
	FencingSavedUser saved;
	char	   *name;
	Portal		portal;
	FmgrInfo   *out = NULL;
	int			fence_col = 0;
	int			ncols = 0;
	MemoryContext rowcxt;

	name = get_rel_name(scope->storage);
	if (name == NULL)
		return;
	name = FencingQualifiedName(scope->storage);

	FencingBecomeOwner(&saved);
	portal = SPI_cursor_open_with_args(NULL, psprintf("SELECT * FROM %s", name),
									   0, NULL, NULL, NULL, true, 0);
	FencingRestoreUser(&saved);
	/* a row's key text, reset for the next (a storage may be large) */
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "scope_fences row",
								   ALLOCSET_SMALL_SIZES);

	for (;;)
	{
		uint64		row;
		TupleDesc	desc;

		FencingBecomeOwner(&saved);
		SPI_cursor_fetch(portal, true, 1000);
		FencingRestoreUser(&saved);
		if (SPI_processed == 0)
			break;
		desc = SPI_tuptable->tupdesc;
		if (out == NULL)
		{
			int			i;

			ncols = desc->natts;
			out = palloc0(sizeof(FmgrInfo) * ncols);
			for (i = 0; i < ncols; i++)
			{
				Form_pg_attribute att = TupleDescAttr(desc, i);
				Oid			outfunc;
				bool		isvarlena;

				if (strcmp(NameStr(att->attname), "fence") == 0)
					fence_col = i + 1;
				getTypeOutputInfo(att->atttypid, &outfunc, &isvarlena);
				fmgr_info(outfunc, &out[i]);
			}
			if (fence_col == 0)
				break;			/* not a storage table: nothing to show */
		}
		for (row = 0; row < SPI_processed; row++)
		{
			HeapTuple	tup = SPI_tuptable->vals[row];
			StringInfoData key;
			Datum		values[3];
			bool		nulls[3] = {false, false, false};
			bool		isnull;
			bool		first = true;
			int			i;
			MemoryContext oldcxt = MemoryContextSwitchTo(rowcxt);

			initStringInfo(&key);
			appendStringInfoChar(&key, '[');
			for (i = 0; !scope->table_scope && i < ncols; i++)
			{
				Datum		d;

				if (i + 1 == fence_col)
					continue;
				if (!first)
					appendStringInfoChar(&key, ',');
				first = false;
				d = SPI_getbinval(tup, desc, i + 1, &isnull);
				if (isnull)
					appendStringInfoString(&key, "null");
				else
					escape_json(&key, OutputFunctionCall(&out[i], d));
			}
			appendStringInfoChar(&key, ']');

			values[0] = CStringGetTextDatum(scope->scope_name);
			values[1] = CStringGetTextDatum(key.data);
			values[2] = SPI_getbinval(tup, desc, fence_col, &nulls[2]);
			tuplestore_putvalues(tupstore, tupdesc, values, nulls);
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(rowcxt);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	FencingBecomeOwner(&saved);
	SPI_cursor_close(portal);
	FencingRestoreUser(&saved);
	MemoryContextDelete(rowcxt);
}

/*
 * fencing.scope_fences() → SETOF (scope_name, key, fence): every key's
 * fence of every scope the caller may see (read it through the view
 * fencing.scopes).
 */
Datum
fencing_scope_fences(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext per_query;
	MemoryContext oldcxt;
	Tuplestorestate *tupstore;
	TupleDesc	tupdesc;
	List	   *scopes;
	ListCell   *lc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	per_query = rsinfo->econtext->ecxt_per_query_memory;
	oldcxt = MemoryContextSwitchTo(per_query);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = CreateTupleDescCopy(tupdesc);
	tupstore = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tupstore;
	rsinfo->setDesc = tupdesc;
	MemoryContextSwitchTo(oldcxt);

	if (!FencingScopeStorageLayout())
		return (Datum) 0;		/* objects at 1.0: no such function there */

	FencingSpiConnect();
	scopes = VisibleScopes(per_query);
	foreach(lc, scopes)
	{
		VisibleScope *scope = lfirst(lc);

		/* (the tuplestore copies each row into the query's memory) */
		if (scope->visible)
			AddScopeRows(scope, tupstore, tupdesc);
	}
	SPI_finish();
	return (Datum) 0;
}
