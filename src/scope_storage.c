/*-------------------------------------------------------------------------
 *
 * scope_storage.c
 *	  Where key and table scopes keep their fences, and who owns them.
 *
 * Each key or table scope has a table of its own in schema fencing,
 * created by the first protect() into it: fencing.scope_<h>, <h> 16 hex
 * digits of the SHA-256 of the scope's name (the update to 1.2 renames the
 * numbered ones of fencing 1.1 so, but for Citus-distributed ones), with one
 * column per key column of the protected table, of the same type (a
 * domain's base type) and collation, a fence column, and a unique index
 * on the key columns, NULLS NOT DISTINCT.  Two rows of protected tables
 * have the same key exactly when that index finds them equal: the default
 * btree equality of each column's type, under the column's collation.  A
 * table scope's table has one boolean key column, always true.
 *
 * The registry fencing.scope_storage names, for each scope, its table and
 * its owner: the role whose protect() created it.  protect() into a scope
 * is allowed to that role, its members and superusers only (42501
 * otherwise), and only for tables whose key columns have the scope's
 * types and collations (42804).  So no role can prepare fences that a
 * later protect() of another role's table would inherit.  Scopes outlive
 * their tables, as fences must: the extension's owner removes one on
 * purpose with fencing.reset_scope().
 *
 * The storage tables are not members of the extension: pg_dump dumps
 * them, with their rows, as ordinary tables of schema fencing, and
 * pg_upgrade carries them over; the registry is a configuration table.
 *
 * The registry is read as it is now (FencingExecuteLatest), at every
 * isolation level, and protect() and reset_scope() of one scope name take
 * turns on a lock of that name: a REPEATABLE READ or SERIALIZABLE caller
 * gets the answers a READ COMMITTED one gets.
 *
 * Seeding (FencingSeedScopesFrom): a table protected, or a partition or child
 * joining a protected tree, brings the fences of its rows into the scope.
 * It reads every row committed before it: under locks that keep writers
 * out (ShareRowExclusiveLock on every member), with a snapshot taken after
 * them, also under REPEATABLE READ and SERIALIZABLE, whose own snapshot
 * may predate rows committed while the lock was awaited (it seeds from the
 * latest committed state rather than fail: see FencingSeedScopesFrom).  It scans
 * the heap directly: row security never hides a row from it, and the only
 * code it runs is the key types' comparison functions, as the caller.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/hash.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/tuplesort.h"
#include "utils/varlena.h"
#include "common/cryptohash.h"
#include "common/hashfn.h"
#include "common/sha2.h"

#include "cluster.h"
#include "compat.h"
#include "extension.h"
#include "fence.h"
#include "scope_storage.h"
#include "scopes.h"

/* The lock protect() holds on a scope's name: see FencingScopeStorageFor() */
#define FENCING_SCOPE_NAME_LOCK		71

PG_FUNCTION_INFO_V1(fencing_scope_create);
PG_FUNCTION_INFO_V1(fencing_invalidate_guards);
PG_FUNCTION_INFO_V1(fencing_scope_key);
PG_FUNCTION_INFO_V1(fencing_reset_scope);

/* The OID of the registry, or InvalidOid while the objects are at 1.0. */
static Oid
RegistryOid(void)
{
	return get_relname_relid("scope_storage", FencingSchemaOid());
}

/*
 * Are the extension's objects at 1.1 or later (typed scope storage)?  A
 * database still at 1.0 keeps its fences in the table fencing.scopes
 * (scopes_1_0.c) until ALTER EXTENSION fencing UPDATE.
 */
bool
FencingScopeStorageLayout(void)
{
	return OidIsValid(RegistryOid());
}

/* Raise the error of a C function that needs the 1.1 objects. */
static void
RequireStorageLayout(void)
{
	if (!FencingScopeStorageLayout())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the objects of extension \"fencing\" are older than its library"),
				 errdetail("The extension's objects are at version 1.0; this needs version 1.1."),
				 errhint("Run ALTER EXTENSION fencing UPDATE.")));
}

/* Check a scope name: 1 to 255 bytes (22023). */
void
FencingCheckScopeName(const char *scope_name)
{
	size_t		len = strlen(scope_name);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scope_name must not be empty"),
				 errhint("Pass NULL to use the table's qualified name.")));
	if (len > FENCING_SCOPE_NAME_MAXLEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("scope_name is too long"),
				 errdetail("The scope name has %zu bytes; the maximum is %d.",
						   len, FENCING_SCOPE_NAME_MAXLEN)));
}

/* The base type and the collation of column attnum of rel. */
static void
KeyColumnType(Relation rel, AttrNumber attnum, Oid *type, Oid *collation)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);

	*type = getBaseType(att->atttypid);
	*collation = att->attcollation;
}

/*
 * The table of schema fencing whose row type type is, or is made of (as
 * a domain, array, range or composite type, at any depth); InvalidOid
 * when none.  Such a key column would make every scope's storage depend
 * on that table, and dropping it (fencing.reset_scope(), DROP EXTENSION)
 * would then have to drop a key column: another role could so pin it.
 */
static Oid
KeyTypeUsesFencingTable(Oid type, int depth)
{
	HeapTuple	tup;
	Form_pg_type typ;
	Oid			found = InvalidOid;

	check_stack_depth();
	if (depth > 32)
		return InvalidOid;
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	typ = (Form_pg_type) GETSTRUCT(tup);
	if (typ->typtype == TYPTYPE_DOMAIN)
		found = KeyTypeUsesFencingTable(typ->typbasetype, depth + 1);
	else if (OidIsValid(typ->typelem) && IsTrueArrayType(typ))
		found = KeyTypeUsesFencingTable(typ->typelem, depth + 1);
	else if (typ->typtype == TYPTYPE_RANGE)
		found = KeyTypeUsesFencingTable(get_range_subtype(type), depth + 1);
	else if (typ->typtype == TYPTYPE_MULTIRANGE)
		found = KeyTypeUsesFencingTable(get_multirange_range(type), depth + 1);
	else if (typ->typtype == TYPTYPE_COMPOSITE && OidIsValid(typ->typrelid))
	{
		if (get_rel_namespace(typ->typrelid) == FencingSchemaOid() &&
			get_rel_relkind(typ->typrelid) != RELKIND_COMPOSITE_TYPE)
			found = typ->typrelid;
		else
		{
			Relation	crel = relation_open(typ->typrelid, AccessShareLock);
			TupleDesc	desc = RelationGetDescr(crel);
			int			i;

			for (i = 0; i < desc->natts && !OidIsValid(found); i++)
				if (!TupleDescAttr(desc, i)->attisdropped)
					found = KeyTypeUsesFencingTable(TupleDescAttr(desc, i)->atttypid,
													depth + 1);
			relation_close(crel, AccessShareLock);
		}
	}
	ReleaseSysCache(tup);
	return found;
}

/*
 * Check that a key column's type can key a scope: its values must be
 * comparable by a default btree operator class, and it may not be made of
 * the row type of a table of schema fencing (0A000 otherwise).
 */
void
FencingCheckKeyColumnType(Relation rel, AttrNumber attnum, const char *name)
{
	Oid			type;
	Oid			collation;
	Oid			fencing_table;

	KeyColumnType(rel, attnum, &type, &collation);
	fencing_table = KeyTypeUsesFencingTable(TupleDescAttr(RelationGetDescr(rel),
														  attnum - 1)->atttypid, 0);
	if (OidIsValid(fencing_table))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("key column \"%s\" of table \"%s\" cannot key a fence scope",
						name, RelationGetRelationName(rel)),
				 errdetail("Its type %s is made of the row type of table %s, which belongs to the extension fencing.",
						   format_type_be(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid),
						   FencingQualifiedName(fencing_table)),
				 errhint("Key the scope by columns of other types."),
				 errtablecol(rel, attnum)));
	if (!OidIsValid(GetDefaultOpClass(type, BTREE_AM_OID)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("key column \"%s\" of table \"%s\" cannot key a fence scope",
						name, RelationGetRelationName(rel)),
				 errdetail("Type %s has no default btree operator class, so fencing cannot tell when two of its values are the same key.",
						   format_type_be(type)),
				 errhint("Use a key column of a type with a default btree operator class, such as text, integer, uuid or date."),
				 errtablecol(rel, attnum)));
}

/* A row of the registry. */
typedef struct ScopeRegistryEntry
{
	Oid			owner;
	Oid			storage;
	bool		table_scope;
} ScopeRegistryEntry;

/*
 * Look a scope up in the registry (inside SPI), as it is now (see
 * FencingExecuteLatest); false when it is absent.  for_update locks the
 * row (a row changed since the transaction's snapshot then fails with
 * 40001 under REPEATABLE READ and SERIALIZABLE).
 */
static bool
ReadRegistry(const char *scope_name, bool for_update, ScopeRegistryEntry *entry)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	FencingSavedUser saved;
	int			rc;
	bool		isnull;

	values[0] = CStringGetTextDatum(scope_name);
	FencingBecomeOwner(&saved);
	rc = FencingExecuteLatest(for_update ?
							  "SELECT owner::pg_catalog.oid, storage::pg_catalog.oid, table_scope "
							  "FROM fencing.scope_storage "
							  "WHERE scope_name OPERATOR(pg_catalog.=) $1 FOR UPDATE" :
							  "SELECT owner::pg_catalog.oid, storage::pg_catalog.oid, table_scope "
							  "FROM fencing.scope_storage "
							  "WHERE scope_name OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, !for_update, 1);
	FencingRestoreUser(&saved);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.scope_storage: %s",
			 SPI_result_code_string(rc));
	if (SPI_processed == 0)
		return false;
	entry->owner = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
												  SPI_tuptable->tupdesc, 1, &isnull));
	entry->storage = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 2, &isnull));
	entry->table_scope = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 3, &isnull));
	return true;
}

/*
 * The storage table of scope_name, or InvalidOid when the scope is not
 * registered (or the objects are still at 1.0).  Connects to SPI itself.
 */
Oid
FencingScopeStorageRegistered(const char *scope_name)
{
	ScopeRegistryEntry entry;
	Oid			storage = InvalidOid;

	if (!FencingScopeStorageLayout())
		return InvalidOid;
	FencingSpiConnect();
	if (ReadRegistry(scope_name, false, &entry))
		storage = entry.storage;
	SPI_finish();
	return storage;
}

/* The unique index of a storage table on its key columns. */
static Oid
StorageIndex(Relation rel)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		bool		ok = idx->rd_index->indisunique && idx->rd_index->indisvalid &&
			idx->rd_index->indnatts == RelationGetDescr(rel)->natts - 1 &&
			idx->rd_rel->relam == BTREE_AM_OID;
		int			i;

		for (i = 0; ok && i < idx->rd_index->indnatts; i++)
			ok = idx->rd_index->indkey.values[i] == i + 1;
		index_close(idx, AccessShareLock);
		if (ok)
			return lfirst_oid(lc);
	}
	return InvalidOid;
}

/*
 * What the guard needs of a scope's storage (allocated in cxt), or NULL
 * when the scope is not registered.  Runs inside SPI.
 */
ScopeStorage *
FencingScopeStorageOpen(const char *scope_name, MemoryContext cxt)
{
	ScopeRegistryEntry entry;

	if (!ReadRegistry(scope_name, false, &entry))
		return NULL;
	return FencingScopeStorageOpenRelation(entry.storage, scope_name,
									entry.table_scope, cxt);
}

/*
 * The same for a storage table named by the caller rather than by the
 * registry: on a Citus worker, the shard of a distributed scope storage
 * that is co-located with the shard being written (citus.c); the registry
 * lives on the coordinator.  NULL when the table cannot be opened.
 */
ScopeStorage *
FencingScopeStorageOpenRelation(Oid storage, const char *scope_name, bool table_scope,
						 MemoryContext cxt)
{
	ScopeStorage *scope;
	Relation	rel;
	Relation	idx;
	MemoryContext oldcxt;
	int			i;

	rel = try_table_open(storage, AccessShareLock);
	if (rel == NULL)
		return NULL;

	oldcxt = MemoryContextSwitchTo(cxt);
	scope = palloc0(sizeof(ScopeStorage));
	scope->scope_name = pstrdup(scope_name);
	scope->relid = storage;
	scope->table_scope = table_scope;
	scope->indexid = StorageIndex(rel);
	scope->nkeys = RelationGetDescr(rel)->natts - 1;
	if (!OidIsValid(scope->indexid) || scope->nkeys < 1)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_ALTERED),
				 errmsg("the fence storage of scope \"%s\" has been altered",
						scope_name),
				 errdetail("Table \"%s\" has lost its unique index on the key columns.",
						   RelationGetRelationName(rel)),
				 errtable(rel)));
	scope->types = palloc(sizeof(Oid) * scope->nkeys);
	scope->collations = palloc(sizeof(Oid) * scope->nkeys);
	scope->typlen = palloc(sizeof(int16) * scope->nkeys);
	scope->typbyval = palloc(sizeof(bool) * scope->nkeys);
	scope->eqprocs = palloc(sizeof(RegProcedure) * scope->nkeys);
	scope->eq = palloc0(sizeof(FmgrInfo) * scope->nkeys);
	scope->cmp = palloc0(sizeof(FmgrInfo) * scope->nkeys);
	scope->hash = palloc0(sizeof(FmgrInfo) * scope->nkeys);
	scope->out = palloc0(sizeof(FmgrInfo) * scope->nkeys);
	scope->hashable = true;

	idx = index_open(scope->indexid, AccessShareLock);
	for (i = 0; i < scope->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);
		Oid			opfamily = idx->rd_opfamily[i];
		Oid			opcintype = idx->rd_opcintype[i];
		Oid			eqop;
		Oid			hashopclass;
		Oid			outfunc;
		bool		isvarlena;

		scope->types[i] = att->atttypid;
		scope->collations[i] = idx->rd_indcollation[i];
		scope->typlen[i] = att->attlen;
		scope->typbyval[i] = att->attbyval;
		eqop = get_opfamily_member(opfamily, opcintype, opcintype,
								   BTEqualStrategyNumber);
		if (!OidIsValid(eqop))
			elog(ERROR, "missing equality operator for type %s in opfamily %u",
				 format_type_be(opcintype), opfamily);
		scope->eqprocs[i] = get_opcode(eqop);
		fmgr_info_cxt(scope->eqprocs[i], &scope->eq[i], cxt);
		fmgr_info_cxt(get_opfamily_proc(opfamily, opcintype, opcintype, BTORDER_PROC),
					  &scope->cmp[i], cxt);
		hashopclass = GetDefaultOpClass(att->atttypid, HASH_AM_OID);
		if (OidIsValid(hashopclass))
		{
			Oid			hfamily = get_opclass_family(hashopclass);
			Oid			hintype = get_opclass_input_type(hashopclass);
			Oid			hproc = get_opfamily_proc(hfamily, hintype, hintype,
												  HASHSTANDARD_PROC);

			/* the hash must agree with the btree's equality */
			if (OidIsValid(hproc) &&
				get_opfamily_member(hfamily, hintype, hintype,
									HTEqualStrategyNumber) == eqop)
				fmgr_info_cxt(hproc, &scope->hash[i], cxt);
			else
				scope->hashable = false;
		}
		else
			scope->hashable = false;
		getTypeOutputInfo(att->atttypid, &outfunc, &isvarlena);
		fmgr_info_cxt(outfunc, &scope->out[i], cxt);
	}
	index_close(idx, AccessShareLock);
	MemoryContextSwitchTo(oldcxt);
	table_close(rel, AccessShareLock);
	return scope;
}

/*
 * Do the key columns of rel match a scope's storage: the same number, the
 * same (base) types and the same collations?  *why says how they differ.
 * SF005 when the storage table is gone.
 */
static bool
KeysMatchStorage(Relation rel, int nkeys, const AttrNumber *key_attnums,
				 const char *scope_name, Oid storage, bool table_scope,
				 bool storage_table_scope, char **why)
{
	Relation	srel = try_table_open(storage, AccessShareLock);
	TupleDesc	sdesc;
	bool		match = true;
	int			i;

	if (srel == NULL)
		FencingReportScopeStorageMissing(scope_name, InvalidOid);
	sdesc = RelationGetDescr(srel);

	if (table_scope != storage_table_scope)
	{
		*why = table_scope ?
			pstrdup("The scope is a key scope, and the table is protected in table scope.") :
			pstrdup("The scope is a table scope, and the table is protected in key scope.");
		match = false;
	}
	else if (!table_scope && sdesc->natts - 1 != nkeys)
	{
		*why = psprintf("The scope has %d key columns, and the table %d.",
						sdesc->natts - 1, nkeys);
		match = false;
	}
	for (i = 0; match && !table_scope && i < nkeys; i++)
	{
		Form_pg_attribute satt = TupleDescAttr(sdesc, i);
		Oid			type;
		Oid			collation;

		KeyColumnType(rel, key_attnums[i], &type, &collation);
		if (type != satt->atttypid || collation != satt->attcollation)
		{
			*why = psprintf("Key column %d of the scope is of type %s%s%s, and column \"%s\" of the table of type %s%s%s.",
							i + 1, format_type_be(satt->atttypid),
							OidIsValid(satt->attcollation) ? " COLLATE " : "",
							OidIsValid(satt->attcollation) ? generate_collation_name(satt->attcollation) : "",
							NameStr(TupleDescAttr(RelationGetDescr(rel), key_attnums[i] - 1)->attname),
							format_type_be(type),
							OidIsValid(collation) ? " COLLATE " : "",
							OidIsValid(collation) ? generate_collation_name(collation) : "");
			match = false;
		}
	}
	table_close(srel, AccessShareLock);
	return match;
}

/*
 * The name of the storage table of scope_name, attempt 1, 2, ...:
 * scope_ and the first 16 hex digits of the SHA-256 of the scope's name,
 * with _<attempt> from the second attempt on.
 */
static char *
StorageName(const char *scope_name, int attempt)
{
	pg_cryptohash_ctx *ctx = pg_cryptohash_create(PG_SHA256);
	uint8		digest[PG_SHA256_DIGEST_LENGTH];
	char		hex[17];
	int			i;

	if (ctx == NULL ||
		pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) scope_name, strlen(scope_name)) < 0 ||
		pg_cryptohash_final(ctx, digest, sizeof(digest)) < 0)
		elog(ERROR, "could not compute the SHA-256 of scope name \"%s\"", scope_name);
	pg_cryptohash_free(ctx);
	for (i = 0; i < 8; i++)
		snprintf(hex + 2 * i, 3, "%02x", digest[i]);
	if (attempt <= 1)
		return psprintf("scope_%s", hex);
	return psprintf("scope_%s_%d", hex, attempt);
}

/*
 * Create the storage table of a new scope, owned by the extension's owner,
 * and register it with its owner.  types and collations describe the key
 * columns (ignored for table scope).  Runs inside SPI, as the caller.
 */
static Oid
CreateStorage(const char *scope_name, Oid owner, bool table_scope, int nkeys,
			  const Oid *types, const Oid *collations,
			  const char *const *key_names, bool keep_local)
{
	StringInfoData sql;
	FencingSavedUser saved;
	char	   *name;
	char	   *qname;
	Oid			storage;
	int			i;
	int			rc;
	Oid			argtypes[4] = {TEXTOID, OIDOID, OIDOID, BOOLOID};
	Datum		values[4];

	FencingBecomeOwner(&saved);

	/*
	 * The name comes from the scope's name (StorageName), the same in every
	 * database: a dump of one database restored into another that has
	 * scopes of other names brings storage tables of other names, and a
	 * logical replica that protects the same tables has the same storage
	 * tables as its publisher.  A name taken by a table of an earlier
	 * installation (DROP EXTENSION of an extension whose schema existed
	 * before it) or of a restore gets a suffix.
	 */
	for (i = 1;; i++)
	{
		name = StorageName(scope_name, i);
		if (!OidIsValid(get_relname_relid(name, FencingSchemaOid())) &&
			!OidIsValid(get_relname_relid(psprintf("%s_key", name),
										  FencingSchemaOid())))
			break;
	}
	qname = quote_qualified_identifier("fencing", name);

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", qname);
	if (table_scope)
		appendStringInfoString(&sql, "table_scope boolean NOT NULL CHECK (table_scope)");
	else
		for (i = 0; i < nkeys; i++)
		{
			appendStringInfo(&sql, "%skey_%d %s", i > 0 ? ", " : "", i + 1,
							 format_type_be_qualified(types[i]));
			if (OidIsValid(collations[i]))
				appendStringInfo(&sql, " COLLATE %s",
								 generate_collation_name(collations[i]));
		}
	/* half-full pages: room for the HOT updates of hot keys */
	appendStringInfoString(&sql, ", fence fencing.fence NOT NULL) USING heap WITH (fillfactor = 50)");
	FencingRunUtility(sql.data);

	resetStringInfo(&sql);
	appendStringInfo(&sql, "CREATE UNIQUE INDEX %s ON %s (",
					 quote_identifier(psprintf("%s_key", name)), qname);
	if (table_scope)
		appendStringInfoString(&sql, "table_scope");
	else
		for (i = 0; i < nkeys; i++)
			appendStringInfo(&sql, "%skey_%d", i > 0 ? ", " : "", i + 1);
	appendStringInfoString(&sql, ") NULLS NOT DISTINCT");
	FencingRunUtility(sql.data);

	resetStringInfo(&sql);
	appendStringInfo(&sql, "COMMENT ON TABLE %s IS %s", qname,
					 quote_literal_cstr(psprintf("fences of %s scope %s: one row per key, written by the fencing guard",
												 table_scope ? "table" : "key",
												 scope_name)));
	FencingRunUtility(sql.data);
	for (i = 0; !table_scope && i < nkeys; i++)
	{
		resetStringInfo(&sql);
		appendStringInfo(&sql, "COMMENT ON COLUMN %s.key_%d IS %s", qname, i + 1,
						 quote_literal_cstr(psprintf("key column \"%s\" of the table that created the scope",
													 key_names[i])));
		FencingRunUtility(sql.data);
	}
	/* its keys are read through fencing.scopes, by roles that may (visibility.c) */
	FencingRunUtility(psprintf("REVOKE ALL ON %s FROM PUBLIC", qname));

	/*
	 * Under logical replication of a whole database, the subscriber keeps
	 * its own fences (replication.c): a replica identity for replicated
	 * updates, and the triggers, once the objects have them (the update
	 * from 1.0 creates storage before the function exists; the update to
	 * 1.2 gives them to the storage tables it finds), unless Citus is to
	 * distribute the storage (keep_local false: its shard moves replicate
	 * it).
	 */
	FencingRunUtility(psprintf("ALTER TABLE %s REPLICA IDENTITY FULL", qname));
	if (keep_local &&
		OidIsValid(LookupFuncName(list_make2(makeString("fencing"), makeString("local_state")),
								  0, NULL, true)))
	{
		FencingRunUtility(psprintf("CREATE TRIGGER fencing_local_state BEFORE INSERT OR UPDATE OR DELETE "
								   "ON %s FOR EACH ROW EXECUTE FUNCTION fencing.local_state('storage')",
								   qname));
		FencingRunUtility(psprintf("CREATE TRIGGER fencing_local_state_truncate BEFORE TRUNCATE "
								   "ON %s FOR EACH STATEMENT EXECUTE FUNCTION fencing.local_state('storage')",
								   qname));
		FencingRunUtility(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER fencing_local_state", qname));
		FencingRunUtility(psprintf("ALTER TABLE %s ENABLE ALWAYS TRIGGER fencing_local_state_truncate", qname));
	}

	storage = get_relname_relid(name, FencingSchemaOid());

	/*
	 * Created while an extension script runs (the update from 1.0 converting
	 * scopes, or another extension's script calling protect()), the table
	 * became a member of that extension: it is not one, pg_dump must dump
	 * it with its rows, as any scope's storage.  PostgreSQL 18 makes the
	 * table's row type and its array type members too: neither is, or
	 * dropping the table would drop the extension with it.
	 */
	if (creating_extension)
	{
		Oid			rowtype = get_rel_type_id(storage);

		(void) deleteDependencyRecordsForClass(RelationRelationId, storage,
											   ExtensionRelationId,
											   DEPENDENCY_EXTENSION);
		if (OidIsValid(rowtype))
		{
			Oid			arraytype = get_array_type(rowtype);

			(void) deleteDependencyRecordsForClass(TypeRelationId, rowtype,
												   ExtensionRelationId,
												   DEPENDENCY_EXTENSION);
			if (OidIsValid(arraytype))
				(void) deleteDependencyRecordsForClass(TypeRelationId, arraytype,
													   ExtensionRelationId,
													   DEPENDENCY_EXTENSION);
		}
		/* and its privileges are no extension's initial privileges */
		removeExtObjInitPriv(storage, RelationRelationId);
	}

	values[0] = CStringGetTextDatum(scope_name);
	values[1] = ObjectIdGetDatum(owner);
	values[2] = ObjectIdGetDatum(storage);
	values[3] = BoolGetDatum(table_scope);
	rc = SPI_execute_with_args("INSERT INTO fencing.scope_storage (scope_name, owner, storage, table_scope) "
							   "VALUES ($1, $2::pg_catalog.regrole, $3::pg_catalog.regclass, $4)",
							   4, argtypes, values, NULL, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "could not register scope \"%s\": %s", scope_name,
			 SPI_result_code_string(rc));

	FencingRestoreUser(&saved);
	return storage;
}

/*
 * A new scope may not take the name of a table the caller does not own:
 * that name is the table's default scope_name, and a scope created under
 * it would belong to the caller, who could then keep the table's owner
 * from protecting it (42501, until the extension's owner resets it).
 */
static void
CheckNotAnotherTablesName(const char *scope_name, Oid relid)
{
	List	   *names = NIL;
	Oid			nsp;
	Oid			other;

	/* default scope names are always schema-qualified: schema.table */
	if (!SplitIdentifierString(pstrdup(scope_name), '.', &names) ||
		list_length(names) != 2)
		return;
	/* no privilege check: the name is taken whether we may see it or not */
	nsp = get_namespace_oid(linitial(names), true);
	if (!OidIsValid(nsp))
		return;
	other = get_relname_relid(lsecond(names), nsp);
	if (OidIsValid(other) && other != relid &&
		!FencingOwnsRelation(other, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for fencing scope \"%s\"", scope_name),
				 errdetail("The scope name is the name of table \"%s\", which you do not own.",
						   get_rel_name(other)),
				 errhint("Choose another scope_name.")));
}

/*
 * Take the lock protect() and reset_scope() hold on a scope's name until
 * the transaction ends, so that they take turns: what one of them reads of
 * the scope (as it is now) cannot change before it commits.
 */
static void
LockScopeName(const char *scope_name)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, RegistryOid(),
						 hash_bytes((const unsigned char *) scope_name,
									strlen(scope_name)),
						 FENCING_SCOPE_NAME_LOCK);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/*
 * Raise 42501: the current user may not protect rel into scope_name, which
 * belongs to owner.  The remedy depends on whether rel is protected in the
 * scope already (its owner changed since): then another scope_name would
 * start its fences again from its rows, lower than the scope's may be.
 */
static void
ReportScopeOfAnotherRole(const char *scope_name, Oid owner, Relation rel,
						 bool protected_here)
{
	char	   *owner_name = GetUserNameFromId(owner, true);

	if (protected_here)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for fencing scope \"%s\"", scope_name),
				 owner_name != NULL ?
				 errdetail("Table \"%s\" is protected in this scope, which belongs to role \"%s\".",
						   RelationGetRelationName(rel), owner_name) :
				 errdetail("Table \"%s\" is protected in this scope, which belongs to a role that no longer exists (OID %u).",
						   RelationGetRelationName(rel), owner),
				 errhint("Have the extension's owner give the scope to the table's owner: UPDATE fencing.scope_storage SET owner = %s WHERE scope_name = %s.",
						 quote_literal_cstr(GetUserNameFromId(rel->rd_rel->relowner, false)),
						 quote_literal_cstr(scope_name))));
	if (owner_name == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for fencing scope \"%s\"", scope_name),
				 errdetail("The scope belongs to a role that no longer exists (OID %u); its fences were set by that role's tables.",
						   owner),
				 errhint("Have the extension's owner remove the scope with fencing.reset_scope(%s), or protect the table with another scope_name.",
						 quote_literal_cstr(scope_name))));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied for fencing scope \"%s\"", scope_name),
			 errdetail("The scope belongs to role \"%s\"; its fences were set by that role's tables.",
					   owner_name),
			 errhint("Protect the table with another scope_name, or have the extension's owner remove the scope with fencing.reset_scope(%s) if its fences are no longer wanted.",
					 quote_literal_cstr(scope_name))));
}

/*
 * The storage of scope_name for protecting rel with these key columns
 * (nkeys 0: table scope), created when the scope is new.  Raises 42501
 * when the scope belongs to a role the current user cannot act for, and
 * 42804 when its key types differ from the table's.  protected_here: rel
 * is protected in this scope already, so a scope that is not there has
 * lost its fences (SF005, never created again from the rows).  Holds a
 * lock on the scope's name until the transaction ends, so that concurrent
 * protect() and reset_scope() calls take turns; reads the registry as it
 * is now, so that a caller at REPEATABLE READ or SERIALIZABLE sees a scope
 * created since its snapshot (and gets 42501, not a unique violation).
 * Runs inside SPI.
 */
Oid
FencingScopeStorageFor(const char *scope_name, Relation rel, int nkeys,
				const AttrNumber *key_attnums, const char *const *key_names,
				bool protected_here)
{
	ScopeRegistryEntry entry;
	bool		table_scope = nkeys == 0;
	char	   *why = NULL;

	RequireStorageLayout();
	FencingCheckScopeName(scope_name);
	LockScopeName(scope_name);

	if (ReadRegistry(scope_name, true, &entry))
	{
		if (!FencingActsFor(entry.owner))
			ReportScopeOfAnotherRole(scope_name, entry.owner, rel, protected_here);
		if (!KeysMatchStorage(rel, nkeys, key_attnums, scope_name, entry.storage,
							  table_scope, entry.table_scope, &why))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("the key columns of table \"%s\" do not match fencing scope \"%s\"",
							RelationGetRelationName(rel), scope_name),
					 errdetail_internal("%s", why),
					 errhint("Tables share a scope only with key columns of the same types and collations; a table not yet protected in this scope may use another scope_name instead.")));
		return entry.storage;
	}
	else
	{
		Oid		   *types = palloc(sizeof(Oid) * Max(nkeys, 1));
		Oid		   *collations = palloc(sizeof(Oid) * Max(nkeys, 1));
		int			i;

		if (protected_here)
			FencingReportScopeStorageMissing(scope_name, RelationGetRelid(rel));
		CheckNotAnotherTablesName(scope_name, RelationGetRelid(rel));
		for (i = 0; i < nkeys; i++)
			KeyColumnType(rel, key_attnums[i], &types[i], &collations[i]);
		return CreateStorage(scope_name, GetUserId(), table_scope, nkeys,
							 types, collations, key_names,
							 !FencingClusterDistributesStorage(RelationGetRelid(rel)));
	}
}

/* What FencingSeedScopesFrom() reads of one relation with rows. */
typedef struct SeedSource
{
	Relation	rel;
	AttrNumber	fence_attnum;
	AttrNumber	key_attnums[INDEX_MAX_KEYS];
} SeedSource;

/*
 * Find the fence and key columns of member (a member of the tree being
 * seeded; its columns may sit at other positions than the protected
 * table's) by name.
 */
static void
SeedColumns(SeedSource *src, ScopeStorage *scope, const char *fence_column,
			int nkeys, Datum *keynames)
{
	Oid			relid = RelationGetRelid(src->rel);
	int			i;

	src->fence_attnum = get_attnum(relid, fence_column);
	if (src->fence_attnum <= 0 || get_atttype(relid, src->fence_attnum) != FencingTypeOid())
		elog(ERROR, "fence column \"%s\" of relation \"%s\" is missing",
			 fence_column, RelationGetRelationName(src->rel));
	for (i = 0; i < nkeys; i++)
	{
		const char *name = NameStr(*DatumGetName(keynames[i]));

		src->key_attnums[i] = get_attnum(relid, name);
		if (src->key_attnums[i] <= 0)
			elog(ERROR, "key column \"%s\" of relation \"%s\" is missing",
				 name, RelationGetRelationName(src->rel));
		/* the DDL guard keeps a tree's key columns of one type */
		if (!scope->table_scope &&
			getBaseType(get_atttype(relid, src->key_attnums[i])) != scope->types[i])
			elog(ERROR, "key column \"%s\" of relation \"%s\" does not match its scope",
				 name, RelationGetRelationName(src->rel));
	}
}

/*
 * A sort of (key..., fence) by key in the storage index's order: the
 * storage's key types and collations, the btree "<" of its operator
 * families, NULLs last (as FencingScopeKeyCompare orders them).
 */
static Tuplesortstate *
BeginKeySort(ScopeStorage *scope, TupleDesc *desc)
{
	Relation	idx = index_open(scope->indexid, AccessShareLock);
	AttrNumber	attnums[INDEX_MAX_KEYS];
	Oid			operators[INDEX_MAX_KEYS];
	Oid			collations[INDEX_MAX_KEYS];
	bool		nulls_first[INDEX_MAX_KEYS];
	int			i;

	*desc = CreateTemplateTupleDesc(scope->nkeys + 1);
	for (i = 0; i < scope->nkeys; i++)
	{
		TupleDescInitEntry(*desc, i + 1, NULL, scope->types[i], -1, 0);
		TupleDescInitEntryCollation(*desc, i + 1, scope->collations[i]);
		attnums[i] = i + 1;
		operators[i] = get_opfamily_member(idx->rd_opfamily[i], idx->rd_opcintype[i],
										   idx->rd_opcintype[i], BTLessStrategyNumber);
		if (!OidIsValid(operators[i]))
			elog(ERROR, "missing ordering operator for type %s in opfamily %u",
				 format_type_be(idx->rd_opcintype[i]), idx->rd_opfamily[i]);
		collations[i] = scope->collations[i];
		nulls_first[i] = false;
	}
	TupleDescInitEntry(*desc, scope->nkeys + 1, NULL, FencingTypeOid(), -1, 0);
	index_close(idx, AccessShareLock);
	return tuplesort_begin_heap(*desc, scope->nkeys, attnums, operators,
								collations, nulls_first, maintenance_work_mem,
								NULL, TUPLESORT_NONE);
}

/*
 * Read every row of src visible to snapshot that has a fence: in table
 * scope, raise *max to the highest fence; in key scope, put (key, fence)
 * into sort.
 */
static void
ScanSeedSource(SeedSource *src, ScopeStorage *scope, Snapshot snapshot,
			   Tuplesortstate *sort, TupleTableSlot *sortslot,
			   Fence *max, bool *have_max)
{
	TableScanDesc scan = table_beginscan(src->rel, snapshot, 0, NULL);
	TupleTableSlot *slot = table_slot_create(src->rel, NULL);
	MemoryContext rowcxt = AllocSetContextCreate(CurrentMemoryContext,
												 "fencing seed row",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt;
	int			i;

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		Datum		fence;

		CHECK_FOR_INTERRUPTS();
		fence = slot_getattr(slot, src->fence_attnum, &isnull);
		if (isnull)
			continue;			/* a row without a fence fences nothing */
		if (scope->table_scope)
		{
			if (!*have_max || FenceCmp(DatumGetFenceP(fence), max) > 0)
				*max = *DatumGetFenceP(fence);
			*have_max = true;
			continue;
		}
		MemoryContextReset(rowcxt);
		oldcxt = MemoryContextSwitchTo(rowcxt);
		ExecClearTuple(sortslot);
		for (i = 0; i < scope->nkeys; i++)
		{
			Datum		value = slot_getattr(slot, src->key_attnums[i], &isnull);

			/* a key is stored alone, never as a pointer into a TOAST table */
			if (!isnull && scope->typlen[i] == -1 &&
				VARATT_IS_EXTERNAL(DatumGetPointer(value)))
				value = PointerGetDatum(detoast_external_attr((struct varlena *)
															  DatumGetPointer(value)));
			sortslot->tts_values[i] = value;
			sortslot->tts_isnull[i] = isnull;
		}
		sortslot->tts_values[scope->nkeys] = fence;
		sortslot->tts_isnull[scope->nkeys] = false;
		ExecStoreVirtualTuple(sortslot);
		tuplesort_puttupleslot(sort, sortslot);
		MemoryContextSwitchTo(oldcxt);
	}
	if (sortslot != NULL)
		ExecClearTuple(sortslot);
	MemoryContextDelete(rowcxt);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
}

/*
 * Advance each key of scope to the highest fence of its rows, from sort
 * (sorted by key: the rows of one key are neighbours).
 */
static void
SeedSortedKeys(ScopeStorage *scope, Tuplesortstate *sort, TupleDesc desc)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	MemoryContext keycxt = AllocSetContextCreate(CurrentMemoryContext,
												 "fencing seed key",
												 ALLOCSET_DEFAULT_SIZES);
	Datum		key[INDEX_MAX_KEYS];
	bool		nulls[INDEX_MAX_KEYS];
	Fence		max;
	bool		have = false;
	int			i;

	while (tuplesort_gettupleslot(sort, true, false, slot, NULL))
	{
		Fence	   *fence;
		MemoryContext oldcxt;

		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(slot);
		fence = DatumGetFenceP(slot->tts_values[scope->nkeys]);
		if (have && FencingScopeKeyCompare(scope, key, nulls, slot->tts_values,
									slot->tts_isnull) == 0)
		{
			if (FenceCmp(fence, &max) > 0)
				max = *fence;
			continue;
		}
		if (have)
			FencingScopeSeed(scope, key, nulls, &max);
		/* a new key: keep a copy, the slot's tuple goes with the next one */
		MemoryContextReset(keycxt);
		oldcxt = MemoryContextSwitchTo(keycxt);
		for (i = 0; i < scope->nkeys; i++)
		{
			nulls[i] = slot->tts_isnull[i];
			key[i] = nulls[i] ? (Datum) 0 :
				datumCopy(slot->tts_values[i], scope->typbyval[i], scope->typlen[i]);
		}
		MemoryContextSwitchTo(oldcxt);
		max = *fence;
		have = true;
	}
	if (have)
		FencingScopeSeed(scope, key, nulls, &max);
	MemoryContextDelete(keycxt);
	ExecDropSingleTupleTableSlot(slot);
}

/*
 * Advance the fences of protected_relid's scope to the highest fence among
 * the rows of source_relid and its partitions and inheritance children
 * (source may be the protected table itself, or a table joining its tree:
 * ATTACH PARTITION, INHERIT).  Nothing to do in row scope, whose fences
 * are the rows' own.
 *
 * Every row committed before this returns is read.  Writers are kept out
 * first: ShareRowExclusiveLock on every member, which protect() holds
 * already, ATTACH PARTITION holds stronger, and INHERIT holds once the
 * child's guard triggers are in (so a row written before the guard was
 * there has committed or rolled back).  Then a snapshot is taken, also
 * under REPEATABLE READ and SERIALIZABLE: their own snapshot may predate
 * rows that committed while the lock was awaited.  Seeding from the
 * latest committed state rather than failing with 40001 is what an
 * operator switching protection on for a busy table wants: with writers
 * committing all the time, such a protect() would fail nearly every time
 * it waited, and retrying it would not help; and reading the newest state
 * can only raise a fence, never let a stale writer in.
 *
 * The rows are read by a heap scan, not a query: no row security policy
 * (FORCE ROW LEVEL SECURITY, policies of partitions or children) hides a
 * row from it, and no role's code runs with rights it does not have.  The
 * rows are grouped by key with the scope's own btree order (a sort that
 * spills to disk beyond maintenance_work_mem), as the caller.  A seeded
 * fence is no write of this transaction: it does not make an equal token
 * acceptable in strict mode.
 */
void
FencingSeedScopesFrom(Oid protected_relid, Oid source_relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		keys;
	char	   *fence_column;
	char	   *scope_name;
	Datum	   *keynames = NULL;
	int			nkeys;
	ScopeStorage *scope;
	List	   *members;
	ListCell   *lc;
	Snapshot	snapshot;
	Tuplesortstate *sort = NULL;
	TupleDesc	sortdesc = NULL;
	TupleTableSlot *sortslot = NULL;
	Fence		max;
	bool		have_max = false;
	int			rc;

	FencingSpiConnect();
	values[0] = ObjectIdGetDatum(protected_relid);
	rc = FencingExecuteLatest("SELECT fence_column, key_columns, scope_name "
							  "FROM fencing.protected WHERE relid OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.protected: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
	{
		SPI_finish();
		return;
	}
	tup = SPI_copytuple(SPI_tuptable->vals[0]);
	desc = SPI_tuptable->tupdesc;
	keys = SPI_getbinval(tup, desc, 2, &isnull);
	if (isnull)
	{
		SPI_finish();
		return;					/* row scope */
	}
	fence_column = pstrdup(NameStr(*DatumGetName(SPI_getbinval(tup, desc, 1, &isnull))));
	scope_name = TextDatumGetCString(SPI_getbinval(tup, desc, 3, &isnull));
	deconstruct_array(DatumGetArrayTypeP(keys), NAMEOID, NAMEDATALEN, false,
					  TYPALIGN_CHAR, &keynames, NULL, &nkeys);

	/* no writer of the source may be left (see above) */
	members = find_all_inheritors(source_relid, ShareRowExclusiveLock, NULL);

	/* citus: a distributed storage is seeded on its shards (citus.c) */
	if (FencingClusterSeedScope(scope_name, fence_column, nkeys, keynames, source_relid))
	{
		SPI_finish();
		return;
	}

	/* (allocations in SPI's memory, until SPI_finish() at the end) */
	scope = FencingScopeStorageOpen(scope_name, CurrentMemoryContext);
	if (scope == NULL)
		FencingReportScopeStorageMissing(scope_name, protected_relid);

	if (!scope->table_scope)
	{
		sort = BeginKeySort(scope, &sortdesc);
		sortslot = MakeSingleTupleTableSlot(sortdesc, &TTSOpsVirtual);
	}

	/* after the locks: every row committed so far, at every isolation level */
	CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	foreach(lc, members)
	{
		SeedSource	src;

		src.rel = table_open(lfirst_oid(lc), NoLock);
		if (src.rel->rd_rel->relkind == RELKIND_RELATION)
		{
			SeedColumns(&src, scope, fence_column, nkeys, keynames);
			ScanSeedSource(&src, scope, snapshot, sort, sortslot, &max, &have_max);
		}
		else if (src.rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot seed fencing scope \"%s\" from \"%s\"",
							scope_name, RelationGetRelationName(src.rel)),
					 errdetail("Only tables and partitioned tables can be part of a protected table.")));
		table_close(src.rel, NoLock);
	}
	UnregisterSnapshot(snapshot);

	if (scope->table_scope)
	{
		Datum		key[1] = {BoolGetDatum(true)};
		bool		nulls[1] = {false};

		if (have_max)
			FencingScopeSeed(scope, key, nulls, &max);
	}
	else
	{
		tuplesort_performsort(sort);
		SeedSortedKeys(scope, sort, sortdesc);
		tuplesort_end(sort);
		ExecDropSingleTupleTableSlot(sortslot);
	}
	SPI_finish();
}

/*
 * Make every backend read the guard settings again (relcache invalidation
 * of all relations, sent at commit): the update from 1.0 moves every
 * scope to typed storage.
 */
void
FencingScopeStorageInvalidateAll(void)
{
	CacheInvalidateRelcacheAll();
}

/*
 * fencing.scope_create(scope_name, owner, key_types, key_collations,
 * key_names): create and register the storage of a new scope (key_names,
 * which may be NULL, go into the columns' comments).  Internal: the update
 * from 1.0 calls it to convert the scopes of fencing.scopes; protect()
 * does the same through FencingScopeStorageFor().
 */
Datum
fencing_scope_create(PG_FUNCTION_ARGS)
{
	char	   *scope_name;
	Oid			owner;
	ArrayType  *types_arr;
	ArrayType  *colls_arr;
	Datum	   *types;
	Datum	   *colls;
	int			ntypes;
	int			ncolls;
	Oid		   *type_oids;
	Oid		   *coll_oids;
	const char **names;
	ScopeRegistryEntry entry;
	Oid			storage;
	int			i;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the arguments of fencing.scope_create() must not be null"),
				 errdetail("Only key_names may be null.")));
	scope_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	owner = PG_GETARG_OID(1);
	types_arr = PG_GETARG_ARRAYTYPE_P(2);
	colls_arr = PG_GETARG_ARRAYTYPE_P(3);
	RequireStorageLayout();
	FencingCheckScopeName(scope_name);
	deconstruct_array(types_arr, REGTYPEOID, sizeof(Oid), true, TYPALIGN_INT,
					  &types, NULL, &ntypes);
	deconstruct_array(colls_arr, OIDOID, sizeof(Oid), true, TYPALIGN_INT,
					  &colls, NULL, &ncolls);
	if (ntypes != ncolls || ntypes > INDEX_MAX_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key_types and key_collations must have the same length, at most %d",
						INDEX_MAX_KEYS)));
	type_oids = palloc(sizeof(Oid) * Max(ntypes, 1));
	coll_oids = palloc(sizeof(Oid) * Max(ntypes, 1));
	names = palloc(sizeof(char *) * Max(ntypes, 1));
	if (PG_NARGS() > 4 && !PG_ARGISNULL(4))
	{
		Datum	   *keynames;
		int			nnames;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(4), NAMEOID, NAMEDATALEN, false,
						  TYPALIGN_CHAR, &keynames, NULL, &nnames);
		if (nnames != ntypes)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key_names must name as many columns as key_types")));
		for (i = 0; i < ntypes; i++)
			names[i] = pstrdup(NameStr(*DatumGetName(keynames[i])));
	}
	else
		for (i = 0; i < ntypes; i++)
			names[i] = psprintf("key_%d", i + 1);
	for (i = 0; i < ntypes; i++)
	{
		type_oids[i] = getBaseType(DatumGetObjectId(types[i]));
		coll_oids[i] = DatumGetObjectId(colls[i]);
		if (!OidIsValid(GetDefaultOpClass(type_oids[i], BTREE_AM_OID)))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("type %s cannot key a fence scope", format_type_be(type_oids[i])),
					 errdetail("It has no default btree operator class.")));
	}

	FencingSpiConnect();
	if (ReadRegistry(scope_name, true, &entry))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("fencing scope \"%s\" already exists", scope_name)));
	storage = CreateStorage(scope_name, owner, ntypes == 0, ntypes,
							type_oids, coll_oids, names, true);
	SPI_finish();
	PG_RETURN_OID(storage);
}

/*
 * fencing.invalidate_guards(): make every backend read its guard settings
 * again once this transaction commits (the update from 1.0 calls it).
 */
Datum
fencing_invalidate_guards(PG_FUNCTION_ARGS)
{
	(void) fcinfo;
	FencingScopeStorageInvalidateAll();
	PG_RETURN_VOID();
}

/*
 * fencing.scope_key(VARIADIC text[]): a key as the fencing.scopes view
 * spells it, for finding a scope's fence by hand: the JSON array of the
 * values' text forms (null for NULL).
 */
Datum
fencing_scope_key(PG_FUNCTION_ARGS)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *values;
	bool	   *nulls;
	int			n;
	int			i;
	StringInfoData buf;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &values, &nulls, &n);
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		if (nulls[i])
			appendStringInfoString(&buf, "null");
		else
			escape_json(&buf, TextDatumGetCString(values[i]));
	}
	appendStringInfoChar(&buf, ']');
	PG_RETURN_TEXT_P(cstring_to_text(buf.data));
}

/*
 * fencing.reset_scope(scope_name): forget a scope that no protected table
 * uses (its fences and its owner), so that any role may protect into the
 * name again; returns the number of fences dropped.  EXECUTE is the
 * extension owner's (and whom it grants it to); the work is done as the
 * extension owner, who owns the registry and the storage.
 *
 * It takes the lock protect() takes on the scope's name and reads the
 * registry and fencing.protected as they are now, so that a caller at
 * REPEATABLE READ or SERIALIZABLE never drops a scope that a table was
 * protected into after its snapshot was taken, or while it waited: it
 * gets 55006, as a READ COMMITTED caller does.
 */
Datum
fencing_reset_scope(PG_FUNCTION_ARGS)
{
	char	   *scope_name;
	ScopeRegistryEntry entry;
	FencingSavedUser saved;
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];
	char	   *users = NULL;
	int64		fences;
	int			rc;
	bool		isnull;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("scope_name must not be null")));
	scope_name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	RequireStorageLayout();
	LockScopeName(scope_name);

	FencingSpiConnect();
	if (!ReadRegistry(scope_name, true, &entry))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("fencing scope \"%s\" does not exist", scope_name)));

	FencingBecomeOwner(&saved);
	values[0] = CStringGetTextDatum(scope_name);
	rc = FencingExecuteLatest("SELECT pg_catalog.string_agg(p.relid::pg_catalog.text, ', ' "
							  "ORDER BY p.relid::pg_catalog.text) "
							  "FROM fencing.protected p "
							  "WHERE p.scope_name OPERATOR(pg_catalog.=) $1 "
							  "AND p.key_columns IS NOT NULL",
							  1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read fencing.protected: %s", SPI_result_code_string(rc));
	users = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	if (users != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("fencing scope \"%s\" is in use", scope_name),
				 errdetail("Protected in this scope: %s.", users),
				 errhint("Call fencing.unprotect() on those tables first.")));

	/* no table uses the scope, and none can start to before we commit */
	if (get_rel_name(entry.storage) == NULL)
		fences = 0;				/* its storage was dropped by hand */
	else
	{
		rc = FencingExecuteLatest(psprintf("SELECT pg_catalog.count(*) FROM %s",
										   FencingQualifiedName(entry.storage)),
								  0, NULL, NULL, NULL, true, 1);
		if (rc != SPI_OK_SELECT || SPI_processed != 1)
			elog(ERROR, "could not count the fences of scope \"%s\": %s",
				 scope_name, SPI_result_code_string(rc));
		fences = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											 SPI_tuptable->tupdesc, 1, &isnull));
		/*
		 * CASCADE: another role may have built a view, a function or a
		 * column on the storage table, and must not be able to keep the
		 * scope (PostgreSQL names each dropped object in a NOTICE)
		 */
		FencingRunUtility(psprintf("DROP TABLE %s CASCADE",
								   FencingQualifiedName(entry.storage)));
	}
	rc = FencingExecuteLatest("DELETE FROM fencing.scope_storage s "
							  "WHERE s.scope_name OPERATOR(pg_catalog.=) $1",
							  1, argtypes, values, NULL, false, 0);
	if (rc != SPI_OK_DELETE || SPI_processed != 1)
		elog(ERROR, "could not remove scope \"%s\" from fencing.scope_storage: %s",
			 scope_name, SPI_result_code_string(rc));
	FencingRestoreUser(&saved);
	SPI_finish();
	PG_RETURN_INT64(fences);
}
