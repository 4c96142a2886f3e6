/*-------------------------------------------------------------------------
 *
 * scopes_1_0.c
 *	  Key and table scopes of a database whose extension objects are still
 *	  at version 1.0: the fences in the table fencing.scopes, keyed by text.
 *
 * A DBA installs the new library first (a package upgrade) and runs ALTER
 * EXTENSION fencing UPDATE later, while the application writes.  Until
 * then the guard must go on refusing stale writes against the fences the
 * 1.0 objects hold, so this file keeps 1.0's way of keeping them: the key
 * is the JSON array of the key columns' text forms (["acct-1"]), checked
 * and advanced by one INSERT ... ON CONFLICT DO UPDATE through SPI.  The
 * update converts those keys into typed scope storage (scope_storage.c),
 * after which none of this runs.  Nothing here is on the hot path of an
 * updated database.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/lmgr.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"

#include "fencing.h"

/* Saved plans: [0] strict (advance on >), [1] not strict (advance on >=) */
static SPIPlanPtr upsert_plans[2] = {NULL, NULL};
static SPIPlanPtr select_plan = NULL;
static Oid	plans_fence_type = InvalidOid;

/* The 1.0 key of a row: the JSON array of its key columns' text forms. */
char *
LegacyScopeKey(GuardConfig *cfg, HeapTuple tuple, TupleDesc desc)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (i = 0; i < cfg->nkeys; i++)
	{
		bool		isnull;
		Datum		value = heap_getattr(tuple, cfg->key_attnums[i], desc, &isnull);

		if (i > 0)
			appendStringInfoChar(&buf, ',');
		if (isnull)
			appendStringInfoString(&buf, "null");
		else
			escape_json(&buf, OutputFunctionCall(&cfg->key_out[i], value));
	}
	appendStringInfoChar(&buf, ']');
	return buf.data;
}

/* Prepare and keep the plans; again if the extension was recreated. */
static void
PrepareLegacyPlans(void)
{
	Oid			fence_type = FencingTypeOid();
	Oid			argtypes[3] = {TEXTOID, TEXTOID, fence_type};
	static const char *const upsert_sql[2] = {
		"INSERT INTO fencing.scopes AS s (scope_name, key, fence) "
		"VALUES ($1, $2, $3) ON CONFLICT (scope_name, key) "
		"DO UPDATE SET fence = EXCLUDED.fence "
		"WHERE s.fence OPERATOR(fencing.<) EXCLUDED.fence",
		"INSERT INTO fencing.scopes AS s (scope_name, key, fence) "
		"VALUES ($1, $2, $3) ON CONFLICT (scope_name, key) "
		"DO UPDATE SET fence = EXCLUDED.fence "
		"WHERE s.fence OPERATOR(fencing.<=) EXCLUDED.fence"
	};
	int			i;

	if (plans_fence_type == fence_type && select_plan != NULL)
		return;
	for (i = 0; i < 2; i++)
	{
		if (upsert_plans[i] != NULL)
			SPI_freeplan(upsert_plans[i]);
		upsert_plans[i] = SPI_prepare(upsert_sql[i], 3, argtypes);
		if (upsert_plans[i] == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		SPI_keepplan(upsert_plans[i]);
	}
	if (select_plan != NULL)
		SPI_freeplan(select_plan);
	select_plan = SPI_prepare("SELECT fence, xmin FROM fencing.scopes "
							  "WHERE scope_name OPERATOR(pg_catalog.=) $1 "
							  "AND key OPERATOR(pg_catalog.=) $2",
							  2, argtypes);
	if (select_plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	SPI_keepplan(select_plan);
	plans_fence_type = fence_type;
}

/*
 * 1.0's check of token against the fence of (scope_name, key), advancing
 * it: accepted when token is newer (strict: >, else >=), or equal to a
 * fence this transaction wrote.  As the extension owner.
 */
bool
LegacyScopeCheckAndAdvance(const char *scope_name, const char *key,
						   const Fence *token, bool strict, Fence *lost_to)
{
	Datum		args[3];
	FencingSavedUser saved;
	bool		accepted;
	int			rc;

	args[0] = CStringGetTextDatum(scope_name);
	args[1] = CStringGetTextDatum(key);
	args[2] = FencePGetDatum(token);

	FencingBecomeOwner(&saved);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PrepareLegacyPlans();
	rc = SPI_execute_plan(upsert_plans[strict ? 0 : 1], args, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "could not advance fencing.scopes: %s", SPI_result_code_string(rc));

	if (SPI_processed == 1)
		accepted = true;
	else
	{
		/* the row beat the token and is locked: a repeat write of ours? */
		HeapTuple	tup;
		bool		isnull;
		TransactionId xmin;

		rc = SPI_execute_plan(select_plan, args, NULL, false, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "scope row of \"%s\" key %s vanished", scope_name, key);
		tup = SPI_tuptable->vals[0];
		*lost_to = *DatumGetFenceP(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		xmin = DatumGetTransactionId(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		accepted = FenceCmp(token, lost_to) == 0 &&
			TransactionIdIsCurrentTransactionId(xmin);
	}
	SPI_finish();
	FencingRestoreUser(&saved);
	return accepted;
}

/*
 * Lock 1.0's fencing.scopes for writing, as the upsert does, and say
 * whether it is still there.  The update from 1.0 holds it locked while it
 * converts its keys, and drops it when it commits: a writer that waited
 * for it then finds the typed storage instead (false), and must read its
 * guard settings again, which the update's invalidation has made stale.
 */
bool
LegacyScopesStillHere(void)
{
	Oid			relid = get_relname_relid("scopes", FencingSchemaOid());

	if (!OidIsValid(relid) || ScopeStorageLayout())
		return false;
	/* waits for the update, then takes in what it committed */
	LockRelationOid(relid, RowExclusiveLock);
	if (ScopeStorageLayout())
	{
		UnlockRelationOid(relid, RowExclusiveLock);
		return false;
	}
	return true;
}
