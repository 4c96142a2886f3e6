/*-------------------------------------------------------------------------
 *
 * scope_storage.c
 *	  Where key and table scopes keep their fences, and who owns them.
 *
 * Each key or table scope has a table of its own in schema fencing,
 * created by the first protect() into it: fencing.scope_<h>, <h> 16 hex
 * digits of the SHA-256 of the scope's name (those created by fencing 1.1
 * have numbers instead), with one
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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/hash.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_class.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/syscache.h"
#include "utils/varlena.h"
#include "common/cryptohash.h"
#include "common/hashfn.h"
#include "common/sha2.h"

#include "fencing.h"

/* The lock protect() holds on a scope's name: see ScopeStorageFor() */
#define FENCING_SCOPE_NAME_LOCK		71

PG_FUNCTION_INFO_V1(fencing_scope_create);
PG_FUNCTION_INFO_V1(fencing_invalidate_guards);
PG_FUNCTION_INFO_V1(fencing_scope_key);

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
ScopeStorageLayout(void)
{
	return OidIsValid(RegistryOid());
}

/* Raise the error of a C function that needs the 1.1 objects. */
static void
RequireStorageLayout(void)
{
	if (!ScopeStorageLayout())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the objects of extension \"fencing\" are older than its library"),
				 errdetail("The extension's objects are at version 1.0; this needs version 1.1."),
				 errhint("Run ALTER EXTENSION fencing UPDATE.")));
}

/* Check a scope name: 1 to 255 bytes (22023). */
void
CheckScopeName(const char *scope_name)
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
CheckKeyColumnType(Relation rel, AttrNumber attnum, const char *name)
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

/* Look a scope up in the registry (inside SPI); false when it is absent. */
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
	rc = SPI_execute_with_args(for_update ?
							   "SELECT owner::pg_catalog.oid, storage::pg_catalog.oid, table_scope "
							   "FROM fencing.scope_storage "
							   "WHERE scope_name OPERATOR(pg_catalog.=) $1 FOR UPDATE" :
							   "SELECT owner::pg_catalog.oid, storage::pg_catalog.oid, table_scope "
							   "FROM fencing.scope_storage "
							   "WHERE scope_name OPERATOR(pg_catalog.=) $1",
							   1, argtypes, values, NULL, false, 1);
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
ScopeStorageRegistered(const char *scope_name)
{
	ScopeRegistryEntry entry;
	Oid			storage = InvalidOid;

	if (!ScopeStorageLayout())
		return InvalidOid;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
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
ScopeStorageOpen(const char *scope_name, MemoryContext cxt)
{
	ScopeRegistryEntry entry;

	if (!ReadRegistry(scope_name, false, &entry))
		return NULL;
	return ScopeStorageOpenRelation(entry.storage, scope_name,
									entry.table_scope, cxt);
}

/*
 * The same for a storage table named by the caller rather than by the
 * registry: on a Citus worker, the shard of a distributed scope storage
 * that is co-located with the shard being written (citus.c); the registry
 * lives on the coordinator.  NULL when the table cannot be opened.
 */
ScopeStorage *
ScopeStorageOpenRelation(Oid storage, const char *scope_name, bool table_scope,
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
 */
static bool
KeysMatchStorage(Relation rel, int nkeys, const AttrNumber *key_attnums,
				 Oid storage, bool table_scope, bool storage_table_scope,
				 char **why)
{
	Relation	srel = table_open(storage, AccessShareLock);
	TupleDesc	sdesc = RelationGetDescr(srel);
	bool		match = true;
	int			i;

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
	 * it with its rows, as any scope's storage.
	 */
	if (creating_extension)
	{
		(void) deleteDependencyRecordsForClass(RelationRelationId, storage,
											   ExtensionRelationId,
											   DEPENDENCY_EXTENSION);
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
 * The storage of scope_name for protecting rel with these key columns
 * (nkeys 0: table scope), created when the scope is new.  Raises 42501
 * when the scope belongs to a role the current user cannot act for, and
 * 42804 when its key types differ from the table's.  Holds a lock on the
 * scope's name until the transaction ends, so that concurrent protect()
 * and reset_scope() calls take turns.  Runs inside SPI.
 */
Oid
ScopeStorageFor(const char *scope_name, Relation rel, int nkeys,
				const AttrNumber *key_attnums, const char *const *key_names)
{
	ScopeRegistryEntry entry;
	LOCKTAG		tag;
	bool		table_scope = nkeys == 0;
	char	   *why = NULL;

	RequireStorageLayout();
	CheckScopeName(scope_name);
	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, RegistryOid(),
						 hash_bytes((const unsigned char *) scope_name,
									strlen(scope_name)),
						 FENCING_SCOPE_NAME_LOCK);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);

	if (ReadRegistry(scope_name, true, &entry))
	{
		if (!FencingActsFor(entry.owner))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for fencing scope \"%s\"", scope_name),
					 errdetail("The scope belongs to role \"%s\"; its fences were set by that role's tables.",
							   GetUserNameFromId(entry.owner, false)),
					 errhint("Protect the table with another scope_name, or have the extension's owner remove the scope with fencing.reset_scope(%s) if its fences are no longer wanted.",
							 quote_literal_cstr(scope_name))));
		if (!KeysMatchStorage(rel, nkeys, key_attnums, entry.storage,
							  table_scope, entry.table_scope, &why))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("the key columns of table \"%s\" do not match fencing scope \"%s\"",
							RelationGetRelationName(rel), scope_name),
					 errdetail_internal("%s", why),
					 errhint("Tables share a scope only with key columns of the same types and collations; use another scope_name.")));
		return entry.storage;
	}
	else
	{
		Oid		   *types = palloc(sizeof(Oid) * Max(nkeys, 1));
		Oid		   *collations = palloc(sizeof(Oid) * Max(nkeys, 1));
		int			i;

		CheckNotAnotherTablesName(scope_name, RelationGetRelid(rel));
		for (i = 0; i < nkeys; i++)
			KeyColumnType(rel, key_attnums[i], &types[i], &collations[i]);
		return CreateStorage(scope_name, GetUserId(), table_scope, nkeys,
							 types, collations, key_names,
							 !FencingCitusDistributesStorage(RelationGetRelid(rel)));
	}
}

/*
 * Advance the fences of protected_relid's scope to the highest fence among
 * source_relid's rows of each key (source may be the table itself, or a
 * partition or child joining it).  Reads source as the current user; a
 * seeded fence is no write of this transaction: it does not make an equal
 * token acceptable in strict mode.  Nothing to do in row scope.
 */
void
SeedScopesFrom(Oid protected_relid, Oid source_relid)
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
	StringInfoData sql;
	Portal		portal;
	int			rc;
	int			i;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	values[0] = ObjectIdGetDatum(protected_relid);
	rc = SPI_execute_with_args("SELECT fence_column, key_columns, scope_name "
							   "FROM fencing.protected WHERE relid OPERATOR(pg_catalog.=) $1",
							   1, argtypes, values, NULL, false, 1);
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

	/* citus: a distributed storage is seeded on its shards (citus.c) */
	if (FencingCitusSeedScope(scope_name, fence_column, nkeys, keynames, source_relid))
	{
		SPI_finish();
		return;
	}

	scope = ScopeStorageOpen(scope_name, CurrentMemoryContext);
	if (scope == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_ALTERED),
				 errmsg("fencing scope \"%s\" of table \"%s\" is missing",
						scope_name, get_rel_name(protected_relid)),
				 errhint("Call fencing.protect() on the table again to repair its guard.")));

	/* the highest fence of each key among the source's rows */
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (i = 0; i < nkeys; i++)
		appendStringInfo(&sql, "%s, ", quote_identifier(NameStr(*DatumGetName(keynames[i]))));
	appendStringInfo(&sql, "fencing.max(%s) FROM %s WHERE %s IS NOT NULL",
					 quote_identifier(fence_column),
					 quote_qualified_identifier(get_namespace_name(get_rel_namespace(source_relid)),
												get_rel_name(source_relid)),
					 quote_identifier(fence_column));
	if (nkeys > 0)
	{
		appendStringInfoString(&sql, " GROUP BY ");
		for (i = 0; i < nkeys; i++)
			appendStringInfo(&sql, "%s%d", i > 0 ? ", " : "", i + 1);
	}

	portal = SPI_cursor_open_with_args(NULL, sql.data, 0, NULL, NULL, NULL, true, 0);
	for (;;)
	{
		uint64		row;

		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		for (row = 0; row < SPI_processed; row++)
		{
			HeapTuple	rtup = SPI_tuptable->vals[row];
			TupleDesc	rdesc = SPI_tuptable->tupdesc;
			Datum		key[INDEX_MAX_KEYS];
			bool		nulls[INDEX_MAX_KEYS];
			Datum		fence;
			bool		fence_null;

			fence = SPI_getbinval(rtup, rdesc, nkeys + 1, &fence_null);
			if (fence_null)
				continue;		/* a table without fences */
			if (scope->table_scope)
			{
				key[0] = BoolGetDatum(true);
				nulls[0] = false;
			}
			else
				for (i = 0; i < nkeys; i++)
					key[i] = SPI_getbinval(rtup, rdesc, i + 1, &nulls[i]);
			{
				Fence		current;

				(void) ScopeFollow(scope, key, nulls, DatumGetFenceP(fence),
								   &current);
			}
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_finish();
}

/*
 * Make every backend read the guard settings again (relcache invalidation
 * of all relations, sent at commit): the update from 1.0 moves every
 * scope to typed storage.
 */
void
ScopeStorageInvalidateAll(void)
{
	CacheInvalidateRelcacheAll();
}

/*
 * fencing.scope_create(scope_name, owner, key_types, key_collations,
 * key_names): create and register the storage of a new scope (key_names,
 * which may be NULL, go into the columns' comments).  Internal: the update
 * from 1.0 calls it to convert the scopes of fencing.scopes; protect()
 * does the same through ScopeStorageFor().
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
	CheckScopeName(scope_name);
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

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
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
	ScopeStorageInvalidateAll();
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
