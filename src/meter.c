/*-------------------------------------------------------------------------
 *
 * meter.c
 *	  The first meter: fencing.raise_fence(), which raises a key- or
 *	  table-scope fence of a protected table to a token without writing a
 *	  row.
 *
 * A new holder takes its lock, then writes.  Between the two, the fence
 * still holds the old holder's last token, and an old holder that wakes up
 * in that window is accepted: nothing newer has been written yet.
 * raise_fence() closes the window: the new holder raises the fences of
 * what it is about to write the moment it takes the lock, and the old
 * holder's next write is refused (SF001 stale_token).
 *
 * It is a guarded write of the fence alone, with the guard's rules: the
 * caller needs a privilege to write the table (INSERT or UPDATE), a stale
 * token is refused, in a strict table an equal token is accepted only
 * from the transaction that wrote it first, a table protected with a
 * lease accepts only the lease's live token, and the refusal shows the
 * key and the fence only to roles that may read them.  Row scope has no
 * fence apart from the rows: its holders raise a row's fence with
 * UPDATE ... SET fence = token.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "cluster.h"
#include "fence.h"
#include "guard_config.h"
#include "extension.h"
#include "lease.h"
#include "protection.h"
#include "scopes.h"
#include "stats.h"
#include "visibility.h"

PG_FUNCTION_INFO_V1(fencing_raise_fence);

/*
 * 42501 unless the caller may write relid: INSERT or UPDATE on the table,
 * or on one of its columns.  Checked before the table is locked.
 */
static void
CheckMayWrite(Oid relid)
{
	Oid			userid = GetUserId();
	bool		is_missing = false;

	/* any of the two is enough (the check takes any bit of the mode) */
	if (pg_class_aclcheck_ext(relid, userid, ACL_INSERT | ACL_UPDATE,
							  &is_missing) == ACLCHECK_OK)
		return;
	if (is_missing)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (pg_attribute_aclcheck_all(relid, userid, ACL_INSERT, ACLMASK_ANY) == ACLCHECK_OK ||
		pg_attribute_aclcheck_all(relid, userid, ACL_UPDATE, ACLMASK_ANY) == ACLCHECK_OK)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for table %s", get_rel_name(relid)),
			 errdetail("Raising a table's fence is a write: it needs the INSERT or UPDATE privilege on the table.")));
}

/* The key columns of cfg as a list for messages: "(a, b)". */
static char *
KeyColumnNames(Relation rel, GuardConfig *cfg)
{
	StringInfoData buf;
	int			i;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (i = 0; i < cfg->nkeys; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(NameStr(TupleDescAttr(RelationGetDescr(rel),
																cfg->key_attnums[i] - 1)->attname)));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * The key of scope cfg from its text values: each converted by the input
 * function of its key column's type, under the column's type modifier, as
 * a literal written into the column would be.
 */
static void
KeyFromText(Relation rel, GuardConfig *cfg, ArrayType *arr,
			Datum *key, bool *nulls)
{
	Datum	   *elems;
	bool	   *elem_nulls;
	int			nelems;
	int			i;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
				 errmsg("the key values must be a one-dimensional array")));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT,
					  &elems, &elem_nulls, &nelems);

	if (cfg->nkeys == 0)
	{
		if (nelems != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("table \"%s\" is protected in table scope: its fence has no key",
							RelationGetRelationName(rel)),
					 errdetail("fencing.raise_fence() got %d key value(s).", nelems),
					 errhint("Call fencing.raise_fence('%s', token) with no key values.",
							 FencingQualifiedName(RelationGetRelid(rel)))));
		key[0] = BoolGetDatum(true);
		nulls[0] = false;
		return;
	}
	if (nelems != cfg->nkeys)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("table \"%s\" has %d key column(s) %s, and fencing.raise_fence() got %d key value(s)",
						RelationGetRelationName(rel), cfg->nkeys,
						KeyColumnNames(rel, cfg), nelems),
				 errhint("Give one value per key column, in this order.")));

	for (i = 0; i < cfg->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel),
											  cfg->key_attnums[i] - 1);
		Oid			typinput;
		Oid			typioparam;

		nulls[i] = elem_nulls[i];
		if (nulls[i])
		{
			key[i] = (Datum) 0;
			continue;
		}
		getTypeInputInfo(att->atttypid, &typinput, &typioparam);
		key[i] = OidInputFunctionCall(typinput, TextDatumGetCString(elems[i]),
									  typioparam, att->atttypmod);
	}
}

/*
 * fencing.raise_fence(tbl, token, VARIADIC key) → fence
 *
 * Raise the fence of key (key scope) or of the table (table scope) of
 * protected table tbl to token; SF001 when token does not beat it.
 */
Datum
fencing_raise_fence(PG_FUNCTION_ARGS)
{
	Oid			relid;
	Fence	   *token;
	ArrayType  *keyarr;
	Relation	rel;
	GuardConfig *cfg;
	Datum		key[INDEX_MAX_KEYS];
	bool		nulls[INDEX_MAX_KEYS];
	Fence		lost_to;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table must not be null")));
	relid = PG_GETARG_OID(0);
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the array of key values must not be null"),
				 errhint("Pass no key values for a table-scope fence.")));
	keyarr = PG_GETARG_ARRAYTYPE_P(2);

	/* checks before locks: a role that may not write learns it at once */
	CheckMayWrite(relid);
	if (!OidIsValid(FencingProtectedBy(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" is not protected", get_rel_name(relid)),
				 errhint("Protect it first with fencing.protect().")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_FENCE_TOKEN_REQUIRED),
				 errmsg("fencing.raise_fence() on table \"%s\" requires a fence token",
						get_rel_name(relid)),
				 errhint("Pass the token of the lock just taken.")));
	token = PG_GETARG_FENCE_P(1);
	PreventCommandIfReadOnly("fencing.raise_fence()");

	/* the lock of a write */
	rel = table_open(relid, RowExclusiveLock);
	cfg = FencingGetGuardConfig(rel);

	if (cfg->nkeys < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" is protected in row scope: it has no fence apart from its rows",
						RelationGetRelationName(rel)),
				 errhint("Raise a row's fence with UPDATE %s SET %s = '%s' WHERE ...",
						 FencingQualifiedName(relid),
						 quote_identifier(NameStr(TupleDescAttr(RelationGetDescr(rel),
																cfg->fence_attnum - 1)->attname)),
						 FenceToCString(token))));
	if (cfg->legacy_scopes)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the scopes of extension \"fencing\" are still those of version 1.0"),
				 errhint("Update the extension with ALTER EXTENSION fencing UPDATE.")));
	if (FencingClusterDistributesStorage(cfg->protected_relid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fencing.raise_fence() does not reach the shards of distributed table \"%s\"",
						RelationGetRelationName(rel)),
				 errhint("Raise a key's fence by a write of a row with that key, carrying the token.")));

	/*
	 * Row security: the answer would tell a role whether a key it cannot
	 * see exists and how new its fence is, and the raise would block the
	 * key's writers; only roles that bypass the policies may raise fences.
	 */
	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("fencing.raise_fence() is not available to role \"%s\" on table \"%s\"",
						GetUserNameFromId(GetUserId(), false),
						RelationGetRelationName(rel)),
				 errdetail("Row security applies to the role on this table, and the fence of a key belongs to every row with that key, visible or not."),
				 errhint("Raise the fence by a write of the row itself, carrying the token, or call fencing.raise_fence() as a role that bypasses row security.")));

	KeyFromText(rel, cfg, keyarr, key, nulls);

	/* with a lease, only its current, live token may write (lease.c) */
	if (cfg->lease != NULL &&
		!FencingLeaseHeldWith(cfg->lease, token, cfg->table_owner))
	{
		FencingStatsCount(cfg->stats, FENCING_STAT_REJECTED_LEASE);
		FencingReportLeaseLost(cfg->lease, token, rel);
	}

	if (!FencingScopeCheckAndAdvance(cfg->scope, key, nulls, token,
									 cfg->strict, &lost_to))
	{
		FencingStatsCount(cfg->stats, FenceCmp(token, &lost_to) == 0 ?
						  FENCING_STAT_REJECTED_ALREADY_USED :
						  FENCING_STAT_REJECTED_STALE);
		if (!FencingMayReadGuardedKeys(rel, cfg))
			FencingReportStaleTokenHidden(token, rel, cfg->scope_name);
		FencingReportStaleToken(token, &lost_to, rel,
								cfg->nkeys == 0 ?
								psprintf("scope \"%s\"", cfg->scope_name) :
								psprintf("scope \"%s\" key %s", cfg->scope_name,
										 FencingScopeKeyToText(cfg->scope, key, nulls)));
	}
	FencingStatsCount(cfg->stats, FENCING_STAT_ACCEPTED);

	table_close(rel, NoLock);
	PG_RETURN_FENCE_P(FenceCopy(token));
}
