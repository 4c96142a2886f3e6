/*-------------------------------------------------------------------------
 *
 * scopes_1_0.c
 *	  Key and table scopes of a database whose extension objects are still
 *	  at version 1.0: the fences in the table fencing.scopes, keyed by text;
 *	  and their conversion into typed scope storage by the update.
 *
 * A DBA installs the new library first (a package upgrade) and runs ALTER
 * EXTENSION fencing UPDATE later, while the application writes.  Until
 * then the guard must go on refusing stale writes against the fences the
 * 1.0 objects hold, so this file keeps 1.0's way of keeping them: the key
 * is the JSON array of the key columns' text forms (["acct-1"]), checked
 * and advanced by one INSERT ... ON CONFLICT DO UPDATE through SPI.  Nothing
 * here is on the hot path of an updated database.
 *
 * The update converts those keys into typed scope storage
 * (scope_storage.c) with fencing_convert_scope_1_0(), which the update
 * script reaches through a temporary SQL function.  Reading a key's text
 * as a value of the key columns' types may run code that a role wrote:
 * the CHECK constraints of domains anywhere in the type (a composite's
 * attributes, array elements, a range's subtype).  So each key is read as
 * the owner of the scope's tables, in a security-restricted operation with
 * a safe search_path, inside a subtransaction that is always rolled back:
 * whatever that code did (writes, settings, locks) is undone before the
 * next key, and its rights were never the updater's.  A key is converted
 * only when its value prints back to exactly the text that 1.0 stored
 * (under the update's session settings); the others are reported, and the
 * update stops, rather than converting any key to another value.  Keys
 * that are equal values (numeric 1.0 and 1, or equal under a
 * nondeterministic collation) become one key with the highest fence,
 * since they are written through the storage's unique index.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "extension.h"
#include "fence.h"
#include "guard_config.h"
#include "scope_storage.h"
#include "scopes.h"
#include "scopes_1_0.h"

PG_FUNCTION_INFO_V1(fencing_convert_scope_1_0);
PG_FUNCTION_INFO_V1(fencing_key_types_1_0);

/* Saved plans: [0] strict (advance on >), [1] not strict (advance on >=) */
static SPIPlanPtr upsert_plans[2] = {NULL, NULL};
static SPIPlanPtr select_plan = NULL;
static Oid	plans_fence_type = InvalidOid;

/* The 1.0 key of a row: the JSON array of its key columns' text forms. */
char *
FencingLegacyScopeKey(GuardConfig *cfg, HeapTuple tuple, TupleDesc desc)
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
FencingLegacyScopeCheckAndAdvance(const char *scope_name, const char *key,
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
	FencingSpiConnect();
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
FencingLegacyScopesStillHere(void)
{
	Oid			relid = get_relname_relid("scopes", FencingSchemaOid());

	if (!OidIsValid(relid) || FencingScopeStorageLayout())
		return false;
	/* waits for the update, then takes in what it committed */
	LockRelationOid(relid, RowExclusiveLock);
	if (FencingScopeStorageLayout())
	{
		UnlockRelationOid(relid, RowExclusiveLock);
		return false;
	}
	return true;
}

/* ------------------------------------------------------------------------
 * The update from 1.0: the text keys of fencing.scopes into typed storage
 * ------------------------------------------------------------------------
 */

/* How many unread keys of one scope the update names */
#define UNREAD_KEYS_SHOWN	10

/* How much of an error message an unread key's line quotes */
#define UNREAD_MESSAGE_MAX	200

/*
 * The values of a 1.0 key, the inverse of FencingLegacyScopeKey(): a list of
 * strings, NULL for a JSON null.  False when the text is not a JSON array
 * of strings and nulls as escape_json() writes them.  Whatever this reads,
 * the caller prints back and compares with the text, so it may accept
 * more than FencingLegacyScopeKey() writes, never less.
 */
static bool
DecodeLegacyKey(const char *s, List **values)
{
	const char *p = s;

	*values = NIL;
	if (*p++ != '[')
		return false;
	if (*p == ']')
		return p[1] == '\0';
	for (;;)
	{
		if (strncmp(p, "null", 4) == 0)
		{
			*values = lappend(*values, NULL);
			p += 4;
		}
		else if (*p == '"')
		{
			StringInfoData v;

			initStringInfo(&v);
			p++;
			while (*p != '"')
			{
				if (*p == '\0')
					return false;
				if (*p != '\\')
				{
					appendStringInfoChar(&v, *p++);
					continue;
				}
				p++;
				switch (*p)
				{
					case '"':
					case '\\':
					case '/':
						appendStringInfoChar(&v, *p);
						break;
					case 'b':
						appendStringInfoChar(&v, '\b');
						break;
					case 'f':
						appendStringInfoChar(&v, '\f');
						break;
					case 'n':
						appendStringInfoChar(&v, '\n');
						break;
					case 'r':
						appendStringInfoChar(&v, '\r');
						break;
					case 't':
						appendStringInfoChar(&v, '\t');
						break;
					case 'u':
						{
							int			c = 0;
							int			i;

							for (i = 1; i <= 4; i++)
							{
								char		h = p[i];

								c <<= 4;
								if (h >= '0' && h <= '9')
									c += h - '0';
								else if (h >= 'a' && h <= 'f')
									c += h - 'a' + 10;
								else if (h >= 'A' && h <= 'F')
									c += h - 'A' + 10;
								else
									return false;
							}
							/* escape_json() writes this escape for control characters only */
							if (c == 0 || c >= 0x80)
								return false;
							appendStringInfoChar(&v, (char) c);
							p += 4;
						}
						break;
					default:
						return false;
				}
				p++;
			}
			p++;
			*values = lappend(*values, v.data);
		}
		else
			return false;
		if (*p == ',')
		{
			p++;
			continue;
		}
		return *p == ']' && p[1] == '\0';
	}
}

static Oid DomainReadWith(Oid typid);

/* What reading the keys of one scope needs */
typedef struct LegacyKeyReader
{
	const char *scope_name;
	const char *role_name;		/* of read_as */
	ScopeStorage *scope;
	int			nvalues;		/* values in a key: 0 in table scope */
	Oid			read_as;		/* the role whose rights the reading has */
	bool		runs_code;		/* a domain constraint in the key types */
	FmgrInfo   *in;				/* input functions of the key types */
	Oid		   *ioparams;
} LegacyKeyReader;

/* One key of 1.0 and what reading it gave */
typedef struct LegacyKey
{
	char	   *text;			/* as 1.0 stored it */
	Fence		fence;
	bool		decoded;		/* a JSON array of strings and nulls */
	List	   *texts;			/* its values' text forms, NULL for null */
	Datum	   *values;			/* read into the key types */
	bool	   *nulls;
	char	   *why;			/* NULL when the values print back exactly */
} LegacyKey;

/*
 * Errors that a key's reading must not swallow: a cancel or shutdown,
 * running out of resources, the server's own failures.
 */
static bool
MustPropagate(int sqlerrcode)
{
	switch (ERRCODE_TO_CATEGORY(sqlerrcode))
	{
		case ERRCODE_OPERATOR_INTERVENTION:
		case ERRCODE_INSUFFICIENT_RESOURCES:
		case ERRCODE_SYSTEM_ERROR:
		case ERRCODE_INTERNAL_ERROR:
			return true;
		default:
			return false;
	}
}

/*
 * Read keys[first .. first + n) (those that decoded) as values of the
 * scope's key types and print them back, in one subtransaction that is
 * rolled back in any case, so that nothing the input functions did (a
 * domain constraint's code: writes, settings, DDL, locks) outlives it.
 * They run as r->read_as, in a security-restricted operation with a safe
 * search_path.  Returns false when an error interrupted the reading of
 * several keys (the caller reads them one by one); a key read alone gets
 * the error as its why.  Results are allocated in the current context.
 */
static bool
ReadKeysOnce(LegacyKeyReader *r, LegacyKey *keys, int first, int n)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;
	Oid			save_userid;
	int			save_sec_context;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		int			k;

		SetUserIdAndSecContext(r->read_as,
							   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		(void) set_config_option("search_path", "pg_catalog, pg_temp",
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
								 true, 0, false);
		for (k = first; k < first + n; k++)
		{
			LegacyKey  *key = &keys[k];
			char	   *printed;
			int			i;

			if (!key->decoded)
				continue;
			for (i = 0; i < r->nvalues; i++)
			{
				char	   *value = list_nth(key->texts, i);

				key->nulls[i] = value == NULL;
				key->values[i] = key->nulls[i] ? (Datum) 0 :
					InputFunctionCall(&r->in[i], value, r->ioparams[i], -1);
			}
			printed = FencingScopeKeyToText(r->scope, key->values, key->nulls);
			if (strcmp(printed, key->text) != 0)
				key->why = psprintf("reads as %s", printed);
		}
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	Assert(GetUserId() == save_userid);

	if (edata != NULL)
	{
		char	   *msg;

		if (MustPropagate(edata->sqlerrcode))
			ereport(ERROR,
					(errcode(edata->sqlerrcode),
					 errmsg("cannot read the keys of fencing scope \"%s\" of fencing 1.0 as role %s: %s",
							r->scope_name, r->role_name, edata->message),
					 errdetail("Reading them runs the code of the key types' constraints, as the owner of the scope's tables."),
					 errhint("If that code fails or does not return, have its owner correct it, or unprotect the scope's tables before the update, which keeps their fences as text keys.")));
		if (n > 1)
			return false;
		msg = edata->message ? edata->message : "";
		if (strlen(msg) > UNREAD_MESSAGE_MAX)
			msg = psprintf("%s...", pnstrdup(msg, pg_mbcliplen(msg, strlen(msg),
															   UNREAD_MESSAGE_MAX)));
		keys[first].why = psprintf("does not read as a key (%s: %s)",
								   unpack_sql_state(edata->sqlerrcode), msg);
	}
	return true;
}

/*
 * Read a batch of 1.0 keys: each key's why is NULL when its values print
 * back to exactly the text that 1.0 stored.  When the key types run code
 * of a role, each key is read in a subtransaction of its own, so that
 * nothing one key's code does (a setting, an enum renamed) can change how
 * the next key reads; otherwise the batch is read at once, and one by one
 * only when a key of it does not read.
 */
static void
ReadLegacyKeys(LegacyKeyReader *r, LegacyKey *keys, int nkeys)
{
	int			k;

	for (k = 0; k < nkeys; k++)
	{
		LegacyKey  *key = &keys[k];

		key->values = palloc(sizeof(Datum) * INDEX_MAX_KEYS);
		key->nulls = palloc(sizeof(bool) * INDEX_MAX_KEYS);
		if (!DecodeLegacyKey(key->text, &key->texts))
			key->why = pstrdup("is not a JSON array of strings and nulls");
		else if (list_length(key->texts) != r->nvalues)
			key->why = psprintf("has %d values, and the scope %d key columns",
								list_length(key->texts), r->nvalues);
		else
			key->decoded = true;
	}
	if (!r->runs_code && ReadKeysOnce(r, keys, 0, nkeys))
		return;
	for (k = 0; k < nkeys; k++)
	{
		if (keys[k].decoded)
			keys[k].why = NULL;
		(void) ReadKeysOnce(r, keys, k, 1);
	}
}

/* Error context of the conversion: which scope, read as which role */
static void
ConvertErrorContext(void *arg)
{
	LegacyKeyReader *r = (LegacyKeyReader *) arg;

	errcontext("reading the keys of fencing scope \"%s\" of fencing 1.0 as role %s",
			   r->scope_name, r->role_name);
}

/*
 * fencing_convert_scope_1_0(scope_name text, read_as regrole, OUT fences
 * bigint, OUT unread bigint, OUT unread_keys text[]): convert the keys of
 * scope_name in 1.0's fencing.scopes into the scope's typed storage, which
 * fencing.scope_create() has made.  Each key is read as read_as (see
 * ReadKeysOnce()), and written as the extension's owner, raising the
 * storage's fence of its value to the key's fence: keys that are one
 * value merge, with the highest fence.  Returns the number of keys
 * converted, the number of keys that do not read exactly, and the first
 * of those with the reason.  The update script stops when any key is
 * unread; it calls this through a temporary function.
 */
Datum
fencing_convert_scope_1_0(PG_FUNCTION_ARGS)
{
	char	   *scope_name;
	LegacyKeyReader reader;
	ScopeStorage *scope;
	MemoryContext fncxt = CurrentMemoryContext;
	MemoryContext batchcxt;
	TupleDesc	tupdesc;
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1];
	Portal		portal;
	int64		fences = 0;
	int64		unread = 0;
	List	   *shown = NIL;
	Datum		result[3];
	bool		result_nulls[3] = {false, false, false};
	ErrorContextCallback callback;
	int			i;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the arguments of the conversion of a 1.0 scope must not be null")));
	scope_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));

	FencingSpiConnect();
	scope = FencingScopeStorageOpen(scope_name, fncxt);
	if (scope == NULL)
		elog(ERROR, "fencing scope \"%s\" has no storage", scope_name);
	reader.scope_name = scope_name;
	reader.scope = scope;
	reader.nvalues = scope->table_scope ? 0 : scope->nkeys;
	reader.read_as = PG_GETARG_OID(1);
	reader.role_name = GetUserNameFromId(reader.read_as, false);

	/* any error that stops the update names the scope */
	callback.callback = ConvertErrorContext;
	callback.arg = &reader;
	callback.previous = error_context_stack;
	error_context_stack = &callback;

	reader.runs_code = false;
	reader.in = MemoryContextAllocZero(fncxt, sizeof(FmgrInfo) * Max(reader.nvalues, 1));
	reader.ioparams = MemoryContextAlloc(fncxt, sizeof(Oid) * Max(reader.nvalues, 1));
	for (i = 0; i < reader.nvalues; i++)
	{
		Oid			infunc;

		getTypeInputInfo(scope->types[i], &infunc, &reader.ioparams[i]);
		fmgr_info_cxt(infunc, &reader.in[i], fncxt);
		if (OidIsValid(DomainReadWith(scope->types[i])))
			reader.runs_code = true;
	}
	batchcxt = AllocSetContextCreate(fncxt, "fencing 1.0 keys", ALLOCSET_DEFAULT_SIZES);

	args[0] = CStringGetTextDatum(scope_name);
	portal = SPI_cursor_open_with_args(NULL,
									   "SELECT key, fence FROM fencing.scopes "
									   "WHERE scope_name OPERATOR(pg_catalog.=) $1 "
									   "ORDER BY key",
									   1, argtypes, args, NULL, true, 0);
	for (;;)
	{
		MemoryContext oldcxt;
		LegacyKey  *keys;
		int			nkeys;
		int			k;

		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		oldcxt = MemoryContextSwitchTo(batchcxt);
		nkeys = (int) SPI_processed;
		keys = palloc0(sizeof(LegacyKey) * nkeys);
		for (k = 0; k < nkeys; k++)
		{
			HeapTuple	tup = SPI_tuptable->vals[k];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;

			keys[k].text = TextDatumGetCString(SPI_getbinval(tup, desc, 1, &isnull));
			keys[k].fence = *DatumGetFenceP(SPI_getbinval(tup, desc, 2, &isnull));
		}
		SPI_freetuptable(SPI_tuptable);

		ReadLegacyKeys(&reader, keys, nkeys);

		for (k = 0; k < nkeys; k++)
		{
			LegacyKey  *key = &keys[k];

			if (key->why == NULL)
			{
				FencingSavedUser saved;
				Fence		current;

				if (scope->table_scope)
				{
					key->values[0] = BoolGetDatum(true);
					key->nulls[0] = false;
				}
				FencingBecomeOwner(&saved);
				(void) FencingScopeFollow(scope, key->values, key->nulls, &key->fence,
								   &current);
				FencingRestoreUser(&saved);
				fences++;
			}
			else if (++unread <= UNREAD_KEYS_SHOWN)
			{
				MemoryContextSwitchTo(fncxt);
				shown = lappend(shown, psprintf("%s %s", key->text, key->why));
				MemoryContextSwitchTo(batchcxt);
			}
		}
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(batchcxt);
		CHECK_FOR_INTERRUPTS();
	}
	SPI_cursor_close(portal);
	error_context_stack = callback.previous;
	SPI_finish();

	result[0] = Int64GetDatum(fences);
	result[1] = Int64GetDatum(unread);
	if (shown == NIL)
		result[2] = PointerGetDatum(construct_empty_array(TEXTOID));
	else
	{
		Datum	   *elems = palloc(sizeof(Datum) * list_length(shown));
		ListCell   *lc;

		i = 0;
		foreach(lc, shown)
			elems[i++] = CStringGetTextDatum(lfirst(lc));
		result[2] = PointerGetDatum(construct_array(elems, i, TEXTOID, -1, false,
													TYPALIGN_INT));
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, result, result_nulls)));
}

/*
 * The first domain with constraints that reading a value of type typid
 * from text checks: the type itself, a composite's attributes, array
 * elements, a range's subtype, at any depth.  InvalidOid when there is
 * none: the input functions of base types are C, which only superusers
 * create, so then no role's code runs.
 */
static Oid
DomainReadWith(Oid typid)
{
	HeapTuple	tup;
	Form_pg_type typ;
	Oid			found = InvalidOid;

	check_stack_depth();
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", typid);
	typ = (Form_pg_type) GETSTRUCT(tup);
	switch (typ->typtype)
	{
		case TYPTYPE_DOMAIN:
			found = DomainHasConstraints(typid) ? typid :
				DomainReadWith(typ->typbasetype);
			break;
		case TYPTYPE_COMPOSITE:
			{
				TupleDesc	desc = lookup_rowtype_tupdesc(typid, -1);
				int			i;

				for (i = 0; i < desc->natts && !OidIsValid(found); i++)
					if (!TupleDescAttr(desc, i)->attisdropped)
						found = DomainReadWith(TupleDescAttr(desc, i)->atttypid);
				ReleaseTupleDesc(desc);
			}
			break;
		case TYPTYPE_RANGE:
			found = DomainReadWith(get_range_subtype(typid));
			break;
		case TYPTYPE_MULTIRANGE:
			found = DomainReadWith(get_multirange_range(typid));
			break;
		default:
			if (IsTrueArrayType(typ))
				found = DomainReadWith(typ->typelem);
			break;
	}
	ReleaseSysCache(tup);
	return found;
}

/*
 * fencing_key_types_1_0(types regtype[], OUT unkeyable regtype, OUT
 * runs_code text): what the update from 1.0 must know of a scope's key
 * types before it converts the scope: the first type that cannot key a
 * scope (it has no default btree operator class), and the first domain
 * with constraints that reading the keys would check, named for people
 * (NULL when there is none).  Through a temporary function of the update
 * script.
 */
Datum
fencing_key_types_1_0(PG_FUNCTION_ARGS)
{
	Datum	   *types;
	int			ntypes;
	int			i;
	TupleDesc	tupdesc;
	Datum		result[2] = {(Datum) 0, (Datum) 0};
	bool		result_nulls[2] = {true, true};

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("types must not be null")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(CreateTupleDescCopy(tupdesc));
	deconstruct_array(PG_GETARG_ARRAYTYPE_P(0), REGTYPEOID, sizeof(Oid), true,
					  TYPALIGN_INT, &types, NULL, &ntypes);
	for (i = 0; i < ntypes; i++)
	{
		Oid			type = DatumGetObjectId(types[i]);
		Oid			domain;

		if (result_nulls[0] && !OidIsValid(GetDefaultOpClass(type, BTREE_AM_OID)))
		{
			result[0] = ObjectIdGetDatum(type);
			result_nulls[0] = false;
		}
		if (result_nulls[1] && OidIsValid(domain = DomainReadWith(type)))
		{
			result[1] = CStringGetTextDatum(domain == type ?
											psprintf("domain %s", format_type_be_qualified(domain)) :
											psprintf("domain %s in type %s",
													 format_type_be_qualified(domain),
													 format_type_be_qualified(type)));
			result_nulls[1] = false;
		}
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, result, result_nulls)));
}
