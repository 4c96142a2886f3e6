/*-------------------------------------------------------------------------
 *
 * citus.c
 *	  Distributed tables: the guard on Citus distributed and reference
 *	  tables.
 *
 * Citus is detected at run time (the extension "citus" in this database);
 * nothing here needs Citus' headers or library, and every entry point
 * returns at once where Citus is absent.  Citus' own catalogs are read
 * with SQL (pg_dist_partition, pg_dist_shard), as any client may.
 *
 * How the guard reaches every shard
 * ---------------------------------
 * protect() runs on the coordinator, against the distributed table (its
 * "shell": no rows live there).  Citus propagates the trigger DDL: a row
 * trigger created on the shell is created on every shard on every node,
 * and Citus copies a shell's triggers (pg_get_triggerdef) onto every shard
 * placement it creates later: shard moves, splits, rebalancing onto a new
 * node.  Citus refuses trigger DDL on distributed tables unless
 * citus.enable_unsafe_triggers is on; protect() and unprotect() turn it on
 * for their own trigger DDL only (FencingCitusBeginTriggerDdl).
 *
 * fencing.protected lives on the coordinator and names the shell; a worker
 * has no row for its shards.  So on a distributed table the guard trigger
 * carries its settings in its arguments, which travel with it to every
 * shard: fencing.guard('citus:1', 'fence_column=fence', 'strict=on').  On
 * a shard, fencing.protected says nothing and the guard reads its settings
 * from its own trigger (FencingCitusShardGuardConfig); it honours them only
 * on a relation that pg_dist_shard names as a shard, and fails closed
 * (SF005) on anything it cannot read.  The coordinator itself goes by
 * fencing.protected, as for any table.
 *
 * A stale write fails on the worker with SF001; Citus relays the error
 * with its SQLSTATE, DETAIL and HINT to the client of the coordinator.
 * The token reaches the worker in the row (the fence column) or, for
 * SET LOCAL fencing.token, when citus.propagate_set_commands = 'local'
 * (otherwise the worker sees no token and refuses the write with SF002:
 * it fails closed).
 *
 * Guarding the guard on shards
 * ----------------------------
 * The DDL guard of the coordinator refuses, on the shell, what it refuses
 * on any protected table; Citus runs the local command before sending it
 * to the shards, so a refused command reaches no worker.  On a worker the
 * shards are plain tables that a user may alter directly (with
 * citus.enable_manual_changes_to_shards = on).  The DDL guard (ddl_guard.c)
 * checks them by the same rules as any protected table: its ProtectionOf()
 * asks FencingCitusShardProtection whether a relation that
 * fencing.protected does not name is a shard of a protected table, and
 * gets the shard's fence and key columns and the name of its guard
 * trigger (zz_fencing_guard_<shardid>) from the trigger's arguments.
 * Commands that Citus itself sends from the coordinator (its internal
 * connections, recognised as Citus recognises them, by application_name)
 * are let through: the coordinator has checked them.
 *
 * TRUNCATE: Citus does not propagate statement triggers for TRUNCATE to
 * shards, but does copy them to the shard placements it creates later.  So
 * the guard's BEFORE TRUNCATE trigger is added to each shard when the guard
 * row trigger is created on it (fencing_citus_ddl_end, on the worker, in
 * the same transaction): at protect(), and again at every placement Citus
 * creates.  When the guard row trigger is dropped from a shard (unprotect()),
 * every fencing TRUNCATE trigger of that shard goes with it.  TRUNCATE of the
 * distributed table on the coordinator is refused by the shell's own
 * trigger before Citus truncates any shard.
 *
 * What is refused (0A000, each with a HINT naming what works)
 * ------------------------------------------------------------
 * Table scope (one fence for rows on many nodes); key scope without the
 * distribution column among the key columns (one key's rows on several
 * shards, each with its own fence); key scope on reference, single-shard,
 * range or append distributed tables, or by a distribution column of a
 * domain type (Citus co-locates only columns of one type, and the storage
 * is keyed by the base type); a scope_name shared by tables that are not
 * co-located, or whose storage is not co-located with the table, or that
 * lists the distribution column at another key position; a distributed
 * scope shared with a plain table and the other way round; a lease (leases
 * live on the coordinator, the guard runs on the workers); protect() of a
 * shard itself.
 *
 * Key scope on Citus
 * ------------------
 * 1. Storage, distributed co-located.  protect(tbl, key_columns => K) on a
 *    hash-distributed table whose distribution column d is the i-th of K
 *    finds or creates the scope's storage as on one server
 *    (FencingScopeStorageFor(): fencing.scope_<n> with columns key_1..key_k of
 *    K's base types and collations, fence, the unique index scope_<n>_key
 *    NULLS NOT DISTINCT, the registry row), and then
 *    (FencingCitusPrepareStorage), when this transaction created it, as
 *    the extension owner:
 *        ALTER TABLE fencing.scope_<n> REPLICA IDENTITY FULL;
 *        SELECT create_distributed_table('fencing.scope_<n>', 'key_<i>',
 *                                        colocate_with => '<tbl>');
 *    (its key columns may be NULL, so no index can be its replica identity;
 *    Citus moves and splits by logical replication and needs one).  An
 *    existing storage must be hash-distributed in the table's co-location
 *    group by key_<i> (CheckStorageColocation): a second table joins the
 *    scope only so.  Same shard count, same hash ranges, same nodes; Citus
 *    moves, splits and rebalances a co-location group as a whole, so each
 *    key's fence stays on the node of the key's rows.  Existing rows seed it
 *    (FencingCitusSeedScope, called by FencingSeedScopesFrom) with
 *        INSERT INTO storage SELECT K, fencing.max(fence) FROM tbl GROUP BY K
 *        ON CONFLICT (key_1..key_k) DO UPDATE ... (only upwards)
 *    which Citus pushes down to each pair of co-located shards.
 *    fencing.reset_scope() drops a distributed storage, shards and all, as
 *    it drops any (Citus propagates the DROP TABLE).
 *
 *    Citus lets one transaction reach a group of co-located shards as one
 *    user only ("modified in this transaction by a different user"), and
 *    the storage belongs to the extension owner: protect() runs the
 *    storage's distribution, its trigger DDL and the seeding as the
 *    extension owner (FencingCitusBeginTriggerDdl), the caller's ownership
 *    of the table being checked first.
 *
 * 2. The guard on a worker finds the co-located storage shard.  The guard
 *    trigger's arguments carry one 'key=<column>' per key column, in order,
 *    'scope=<scope_name>' and 'storage=scope_<n>', so every shard, including
 *    those created later, knows its scope without the coordinator's
 *    registry.  Firing on shard ledger_102008 (or on a partition's shard),
 *    the guard takes the shard id from its relation's name, confirmed in
 *    pg_dist_shard (which Citus syncs to every node), and the storage shard
 *    with the same hash range (ColocatedStorageShard), which must be a table
 *    of the extension owner in schema fencing on this node: co-location
 *    guarantees it; otherwise the guard fails closed with SF005.  That
 *    relation becomes cfg->scope through FencingScopeStorageOpenRelation() (the
 *    registry lives on the coordinator); from there the check and advance
 *    are the one-server code (scopes.c), unchanged, on that local table, in
 *    the worker's part of the distributed transaction, committed with the
 *    write.  The guard writes the storage shard itself, never the
 *    distributed storage: a query on a shard cannot start a distributed
 *    query.  The cache is the shard's guard config: a placement that moves
 *    is a new relation on its new node.  A table that is no shard (one
 *    undistributed after protect()) must not write the coordinator's empty
 *    shell of a distributed storage: it fails closed
 *    (FencingCitusCheckLocalStorage).
 *
 * 3. The first write of a new key inserts its storage row through the
 *    unique index, as on one server, so two sessions racing on a new key
 *    meet on that index entry in the one storage shard that covers the
 *    key: the second waits for the first's transaction and then compares
 *    against its committed fence.
 *
 * 4. Moves.  A logical-replication move or split copies the shards, then
 *    creates their triggers, then catches up: the guard fires on the target
 *    for the apply worker.  Citus replicates the table and its storage by
 *    one stream per table owner, in no set order between them; so on a
 *    shard in key scope the apply worker leaves the storage shard to its
 *    own stream instead of advancing it, which could make the storage
 *    stream's INSERT of the same key fail on the unique index and stall
 *    the move, and each stream waits for the other so that the move ends
 *    only with both complete (citus_transfer.c).  The source accepted every
 *    replayed write; the storage stream brings its fences.  Citus refuses
 *    an UPDATE of the distribution column, so a row never changes shard.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "citus.h"
#include "citus_shard.h"
#include "citus_transfer.h"
#include "cluster.h"
#include "ddl_guard.h"
#include "extension.h"
#include "fence.h"
#include "guard_config.h"
#include "protection.h"
#include "scope_storage.h"
#include "scopes.h"

static void FencingCitusCheckProtect(Relation rel, const char *fence_column,
									 int nkeys, Datum *keynames, bool strict,
									 const char *scope_name, const char *lease);
static const char *FencingCitusGuardArgs(Oid relid);
static int	FencingCitusBeginTriggerDdl(Oid relid);
static void FencingCitusEndTriggerDdl(int level);
static void FencingCitusShardGuardConfig(Relation rel, GuardConfig *cfg,
										 MemoryContext cxt);
static bool FencingCitusShardProtection(Oid relid, Oid *shell, char **guard_name,
										char **fence_column, int *nkeys,
										char ***key_columns);
static void FencingCitusPrepareStorage(Relation rel, Oid storage);
static bool FencingCitusDistributesStorage(Oid relid);
static bool FencingCitusSeedScope(const char *scope_name, const char *fence_column,
								  int nkeys, Datum *keynames, Oid source_relid);
static void FencingCitusCheckLocalStorage(Relation rel, ScopeStorage *scope);

PG_FUNCTION_INFO_V1(fencing_citus_ddl_end);

/* What pg_dist_partition says of a Citus table. */
typedef enum CitusKind
{
	CITUS_NONE,					/* not a Citus table */
	CITUS_HASH,					/* hash-distributed */
	CITUS_REFERENCE,			/* reference table */
	CITUS_SINGLE_SHARD,			/* distributed, one shard, no column */
	CITUS_LOCAL,				/* Citus-managed local table */
	CITUS_OTHER					/* range or append distributed */
} CitusKind;

typedef struct CitusTable
{
	CitusKind	kind;
	int			colocationid;
	char	   *distcol;		/* distribution column, or NULL */
} CitusTable;


/* True while SyncShardTruncateGuard runs its own trigger DDL. */
static bool in_truncate_sync = false;

/* The settings of the protect() being run, for its guard's arguments. */
static struct
{
	Oid			relid;
	char		fence_column[NAMEDATALEN];
	bool		strict;
	/* key scope: its key columns, scope, and where the fences live */
	int			nkeys;			/* 0: row scope */
	char		keys[INDEX_MAX_KEYS][NAMEDATALEN];
	int			dist_key;		/* the distribution column is key_<dist_key> */
	int			colocationid;	/* of the table */
	char		scope_name[FENCING_SCOPE_NAME_MAXLEN + 1];
	char		storage[NAMEDATALEN];	/* fencing.<storage>, set by
										 * FencingCitusPrepareStorage */
	bool		as_owner;		/* the trigger DDL runs as the extension owner */
	FencingSavedUser saved;		/* and then this was the user */
} pending = {InvalidOid};


/*
 * Is this backend one of Citus' own connections (a coordinator sending DDL
 * or a shard transfer to this node)?  The same test as Citus' own
 * IsCitusInternalBackend(): application_name "citus_internal gpid=<n>" or
 * "citus_rebalancer gpid=<n>" with a non-zero global pid.
 */
static bool
CitusInternalBackend(void)
{
	static const char *const prefixes[] = {"citus_internal gpid=", "citus_rebalancer gpid="};
	size_t		i;

	if (application_name == NULL)
		return false;
	for (i = 0; i < lengthof(prefixes); i++)
	{
		size_t		len = strlen(prefixes[i]);
		const char *p = application_name + len;
		bool		nonzero = false;

		if (strncmp(application_name, prefixes[i], len) != 0 || *p == '\0')
			continue;
		for (; *p != '\0'; p++)
		{
			if (*p < '0' || *p > '9')
				break;
			if (*p != '0')
				nonzero = true;
		}
		if (*p == '\0' && nonzero)
			return true;
	}
	return false;
}

/* What Citus says of relid (pg_dist_partition); CITUS_NONE when nothing. */
static CitusTable
GetCitusTable(Oid relid)
{
	CitusTable	result = {CITUS_NONE, 0, NULL};
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	MemoryContext outer = CurrentMemoryContext;
	int			rc;

	if (!FencingCitusPresent())
		return result;
	FencingSpiConnect();
	rc = SPI_execute_with_args("SELECT p.partmethod::pg_catalog.text, p.repmodel::pg_catalog.text, "
							   "p.colocationid, "
							   "CASE WHEN p.partkey IS NULL OR p.partkey OPERATOR(pg_catalog.=) '' THEN NULL "
							   "ELSE pg_catalog.column_to_column_name(p.logicalrelid, p.partkey) END "
							   "FROM pg_catalog.pg_dist_partition p "
							   "WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
							   1, argtypes, values, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_dist_partition: %s", SPI_result_code_string(rc));
	if (SPI_processed > 0)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *method = SPI_getvalue(tup, desc, 1);
		char	   *repmodel = SPI_getvalue(tup, desc, 2);
		bool		isnull;
		char	   *distcol = SPI_getvalue(tup, desc, 4);

		result.colocationid = DatumGetInt32(SPI_getbinval(tup, desc, 3, &isnull));
		if (method == NULL)
			result.kind = CITUS_OTHER;
		else if (method[0] == 'h')
			result.kind = CITUS_HASH;
		else if (method[0] == 'n' && repmodel != NULL && repmodel[0] == 't')
			result.kind = CITUS_REFERENCE;
		else if (method[0] == 'n' && result.colocationid == 0)
			result.kind = CITUS_LOCAL;
		else if (method[0] == 'n')
			result.kind = CITUS_SINGLE_SHARD;
		else
			result.kind = CITUS_OTHER;
		if (distcol != NULL)
			result.distcol = MemoryContextStrdup(outer, distcol);
	}
	SPI_finish();
	return result;
}

/* Is relid a Citus table (distributed, reference or Citus-managed local)? */
static bool
IsCitusTable(Oid relid)
{
	return GetCitusTable(relid).kind != CITUS_NONE;
}

/*
 * Refuse, before anything else is done, a scope that cannot hold across
 * shards, and remember the settings that the guard trigger of a Citus
 * table carries (FencingCitusGuardArgs).  Called by protect().
 */
static void
CheckScopeColocation(Relation rel, CitusTable *ct, const char *scope_name)
{
	Oid			argtypes[2] = {TEXTOID, OIDOID};
	Datum		values[2];
	uint64		i;
	int			rc;
	List	   *others = NIL;
	ListCell   *lc;
	MemoryContext callercxt = CurrentMemoryContext;

	values[0] = CStringGetTextDatum(scope_name);
	values[1] = ObjectIdGetDatum(RelationGetRelid(rel));
	FencingSpiConnect();
	rc = SPI_execute_with_args("SELECT relid::pg_catalog.oid FROM fencing.protected "
							   "WHERE scope_name OPERATOR(pg_catalog.=) $1 "
							   "AND key_columns IS NOT NULL "
							   "AND relid::pg_catalog.oid OPERATOR(pg_catalog.<>) $2",
							   2, argtypes, values, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.protected: %s", SPI_result_code_string(rc));
	for (i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			other = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 1, &isnull));
		/* the list must outlive SPI_finish(), which frees SPI's memory */
		MemoryContext spicxt = MemoryContextSwitchTo(callercxt);

		others = lappend_oid(others, other);
		MemoryContextSwitchTo(spicxt);
	}
	SPI_finish();

	foreach(lc, others)
	{
		Oid			other = lfirst_oid(lc);
		CitusTable	ot;

		/* partitions of one protected tree share its scope by design */
		if (get_rel_relispartition(other) &&
			list_member_oid(get_partition_ancestors(other), RelationGetRelid(rel)))
			continue;
		ot = GetCitusTable(other);
		if (ot.kind == CITUS_NONE && ct->kind == CITUS_NONE)
			continue;
		if (ot.kind == CITUS_HASH && ct->kind == CITUS_HASH &&
			ot.colocationid == ct->colocationid)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fencing scope \"%s\" cannot be shared by tables \"%s\" and \"%s\"",
						scope_name, get_rel_name(other), RelationGetRelationName(rel)),
				 errdetail("Table \"%s\" and table \"%s\" are not co-located: a key's fence would not live on the node of the key's rows in both.",
						   get_rel_name(other), RelationGetRelationName(rel)),
				 errhint("Distribute both tables co-located (create_distributed_table(..., colocate_with => '%s')); a table not yet protected in this scope may use another scope_name instead.",
						 FencingQualifiedName(other))));
	}
}

/*
 * A key scope's storage, when it exists, must be distributed co-located
 * with rel (a hash-distributed table whose distribution column is key
 * column dist_key of its key columns), by its key_<dist_key>; a table that
 * is not distributed (ct->kind CITUS_NONE) can share only a storage that
 * is not distributed either.  0A000 otherwise, naming what works.
 */
static void
CheckStorageColocation(Relation rel, CitusTable *ct, int dist_key,
					   const char *scope_name, Oid storage)
{
	CitusTable	st = GetCitusTable(storage);
	char	   *want;

	if (st.kind == CITUS_NONE && ct->kind == CITUS_NONE)
		return;
	if (ct->kind == CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fencing scope \"%s\" cannot hold on table \"%s\"",
						scope_name, RelationGetRelationName(rel)),
				 errdetail("The scope keeps its fences on the shards of distributed tables, and table \"%s\" is not distributed.",
						   RelationGetRelationName(rel)),
				 errhint("Distribute the table co-located with the scope's tables first; a table not yet protected in this scope may use another scope_name instead.")));
	if (st.kind == CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fencing scope \"%s\" cannot hold on distributed table \"%s\"",
						scope_name, RelationGetRelationName(rel)),
				 errdetail("The scope keeps its fences in one table on the coordinator, and the guard runs on the node of each shard."),
				 errhint("A table not yet protected in this scope may use another scope_name: a new scope of a distributed table keeps its fences co-located with its shards.")));
	if (st.kind != CITUS_HASH || st.colocationid != ct->colocationid)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fencing scope \"%s\" cannot hold on distributed table \"%s\"",
						scope_name, RelationGetRelationName(rel)),
				 errdetail("The scope keeps its fences co-located with the tables already in it, and table \"%s\" is not co-located with them: a key's fence would not live on the node of the key's rows.",
						   RelationGetRelationName(rel)),
				 errhint("Distribute the table co-located with the scope's tables (create_distributed_table(..., colocate_with => '%s') or update_distributed_table_colocation()); a table not yet protected in this scope may use another scope_name instead.",
						 FencingQualifiedName(storage))));
	want = psprintf("key_%d", dist_key);
	if (st.distcol == NULL || strcmp(st.distcol, want) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fencing scope \"%s\" cannot hold on distributed table \"%s\"",
						scope_name, RelationGetRelationName(rel)),
				 errdetail("The scope's fences are distributed by its key column %s, and the distribution column \"%s\" of table \"%s\" is key column %d.",
						   st.distcol ? st.distcol + 4 : "?", ct->distcol,
						   RelationGetRelationName(rel), dist_key),
				 errhint("List the key columns so that the distribution column \"%s\" comes at position %s, as in the tables already in the scope; a table not yet protected in this scope may use another scope_name instead.",
						 ct->distcol, st.distcol ? st.distcol + 4 : "?")));
}

static void
FencingCitusCheckProtect(Relation rel, const char *fence_column, int nkeys,
						 Datum *keynames, bool strict, const char *scope_name,
						 const char *lease)
{
	Oid			relid = RelationGetRelid(rel);
	CitusTable	ct;
	Oid			shell;
	Oid			storage = InvalidOid;
	const char *what;
	int			i;
	int			dist_key = 0;

	/* a protect() that failed left it; its user was restored by the abort */
	pending.relid = InvalidOid;
	pending.as_owner = false;
	if (!FencingCitusPresent())
		return;

	shell = FencingCitusShardOf(relid);
	if (OidIsValid(shell))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot protect \"%s\", a shard of distributed table \"%s\"",
						RelationGetRelationName(rel), get_rel_name(shell)),
				 errhint("Call fencing.protect('%s') on the coordinator: its guard reaches every shard.",
						 FencingQualifiedName(shell))));

	ct = GetCitusTable(relid);
	if (nkeys > 0)
	{
		CheckScopeColocation(rel, &ct, scope_name);
		storage = FencingScopeStorageRegistered(scope_name);
	}
	if (ct.kind == CITUS_NONE)
	{
		/* a table that Citus does not know cannot join a distributed scope */
		if (OidIsValid(storage))
			CheckStorageColocation(rel, &ct, 0, scope_name, storage);
		return;
	}

	what = ct.kind == CITUS_REFERENCE ? "reference table" : "distributed table";

	/* a database still at 1.0 lacks the event trigger that guards shards */
	if (!OidIsValid(get_event_trigger_oid("fencing_citus_ddl_end", true)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot protect %s \"%s\" with fencing 1.0", what,
						RelationGetRelationName(rel)),
				 errdetail("Guarding the shards of Citus tables needs the objects of fencing 1.1."),
				 errhint("Run ALTER EXTENSION fencing UPDATE.")));
	if (lease != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot protect %s \"%s\" with a lease", what,
						RelationGetRelationName(rel)),
				 errdetail("The guard runs on the node of each shard; leases live on the coordinator."),
				 errhint("Protect it without a lease: the tokens the lease issues are still checked against every row.")));
	if (nkeys == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table scope cannot hold on %s \"%s\"", what,
						RelationGetRelationName(rel)),
				 errdetail("A table scope keeps one fence for the whole table, whose rows live on several nodes."),
				 ct.kind == CITUS_HASH && ct.distcol != NULL ?
				 errhint("Use row scope (key_columns => NULL), or key scope with the distribution column \"%s\" among the key columns.",
						 ct.distcol) :
				 errhint("Use row scope (key_columns => NULL).")));
	if (nkeys > 0)
	{
		AttrNumber	distattnum;
		Oid			disttype;

		if (ct.kind == CITUS_REFERENCE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key scope cannot hold on reference table \"%s\"",
							RelationGetRelationName(rel)),
					 errdetail("A reference table is written on every node; a key's fence cannot live with all of its copies."),
					 errhint("Use row scope (key_columns => NULL).")));
		if (ct.kind != CITUS_HASH || ct.distcol == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key scope cannot hold on %s \"%s\"", what,
							RelationGetRelationName(rel)),
					 errdetail("Key scope needs a hash-distributed table: each key's fence lives in the shard co-located with the key's rows."),
					 errhint("Use row scope (key_columns => NULL), or distribute the table by hash on a column (create_distributed_table(..., '<column>')).")));
		for (i = 0; i < nkeys; i++)
			if (strcmp(NameStr(*DatumGetName(keynames[i])), ct.distcol) == 0)
				dist_key = i + 1;
		if (dist_key == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key scope without the distribution column cannot hold on distributed table \"%s\"",
							RelationGetRelationName(rel)),
					 errdetail("The rows of one key would live on several shards, each with a fence of its own."),
					 errhint("Add the distribution column \"%s\" to key_columns, or use row scope (key_columns => NULL).",
							 ct.distcol)));

		/*
		 * The storage's key column is of the base type of the table's
		 * column; Citus co-locates only distribution columns of one type.
		 */
		distattnum = get_attnum(relid, ct.distcol);
		disttype = get_atttype(relid, distattnum);
		if (getBaseType(disttype) != disttype)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("key scope cannot hold on distributed table \"%s\"",
							RelationGetRelationName(rel)),
					 errdetail("Its distribution column \"%s\" is of domain type %s; the fences are keyed by the base type, which Citus cannot co-locate with it.",
							   ct.distcol, format_type_be(disttype)),
					 errhint("Use row scope (key_columns => NULL), or distribute the table by a column of a base type.")));
		if (OidIsValid(storage))
			CheckStorageColocation(rel, &ct, dist_key, scope_name, storage);
	}

	/* the guard trigger will carry these settings */
	pending.relid = relid;
	strlcpy(pending.fence_column, fence_column, NAMEDATALEN);
	pending.strict = strict;
	pending.nkeys = Max(nkeys, 0);
	for (i = 0; i < nkeys; i++)
		strlcpy(pending.keys[i], NameStr(*DatumGetName(keynames[i])), NAMEDATALEN);
	pending.dist_key = dist_key;
	pending.colocationid = ct.colocationid;
	strlcpy(pending.scope_name, scope_name, sizeof(pending.scope_name));
	pending.storage[0] = '\0';
}

/* Was relation relid created by the current transaction? */
static bool
CreatedInThisTransaction(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		result;

	if (!HeapTupleIsValid(tup))
		return false;
	result = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tup->t_data));
	ReleaseSysCache(tup);
	return result;
}

/*
 * protect() of a distributed table in key scope, once FencingScopeStorageFor()
 * has found or created the scope's storage (under the lock on the scope's
 * name): a storage this transaction created is distributed co-located
 * with the table, by the key column of the table's distribution column;
 * an existing one must be so already.  Then the guard's arguments name
 * it.  Nothing to do for any other table.
 */
static void
FencingCitusPrepareStorage(Relation rel, Oid storage)
{
	CitusTable	ct;
	CitusTable	st;

	if (pending.relid != RelationGetRelid(rel) || pending.nkeys == 0)
		return;
	ct = GetCitusTable(RelationGetRelid(rel));
	st = GetCitusTable(storage);
	if (st.kind == CITUS_NONE && CreatedInThisTransaction(storage))
	{
		Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
		Datum		values[3];
		FencingSavedUser saved;
		int			rc;

		values[0] = CStringGetTextDatum(FencingQualifiedName(storage));
		values[1] = CStringGetTextDatum(psprintf("key_%d", pending.dist_key));
		values[2] = CStringGetTextDatum(FencingQualifiedName(RelationGetRelid(rel)));
		FencingSpiConnect();
		FencingBecomeOwner(&saved);
		/* the storage's key columns may be NULL: no index can identify a row */
		FencingRunUtility(psprintf("ALTER TABLE %s REPLICA IDENTITY FULL", FencingQualifiedName(storage)));
		rc = SPI_execute_with_args("SELECT pg_catalog.create_distributed_table($1::pg_catalog.regclass, $2, "
								   "colocate_with => $3)",
								   3, argtypes, values, NULL, false, 0);
		if (rc != SPI_OK_SELECT)
			elog(ERROR, "could not distribute the fence storage of scope \"%s\": %s",
				 pending.scope_name, SPI_result_code_string(rc));
		FencingRestoreUser(&saved);
		SPI_finish();
	}
	CheckStorageColocation(rel, &ct, pending.dist_key, pending.scope_name, storage);
	strlcpy(pending.storage, get_rel_name(storage), NAMEDATALEN);
}

/*
 * Will protect() of relid distribute a storage it creates now?  Such a
 * storage gets none of the triggers that keep a storage's rows local under
 * logical replication (replication.c): Citus moves and splits it by
 * logical replication of its own.
 */
static bool
FencingCitusDistributesStorage(Oid relid)
{
	return OidIsValid(pending.relid) && pending.relid == relid && pending.nkeys > 0;
}

/*
 * FencingSeedScopesFrom() of a scope whose storage is distributed: advance each
 * key's fence to the highest among source_relid's rows with one INSERT ...
 * SELECT, which Citus runs on each pair of co-located shards.  Runs as the
 * extension's owner, who owns the storage and is a superuser (the
 * extension is not trusted): row security hides no row from it, and the
 * key columns, of the distribution column's type and types Citus
 * co-locates, compare with built-in operator classes.  False when the
 * storage is not distributed: the caller seeds it as on one server.
 *
 * Every row committed before it is read at READ COMMITTED: the worker
 * runs the statement with a snapshot of its own, taken after the trigger
 * DDL of protect() or ATTACH took each shard's lock, which waited for the
 * shard's writers (also those writing the shard directly, and those whose
 * two-phase commit reaches the worker after the coordinator).  At
 * REPEATABLE READ and SERIALIZABLE, Citus runs the worker's part at the
 * same level, with a snapshot taken when the transaction first reached
 * the worker, before those locks: such a row could be missed, and no
 * snapshot of ours can reach the worker.  So it refuses (0A000), before
 * writing anything, with the way that works.
 */
static bool
FencingCitusSeedScope(const char *scope_name, const char *fence_column,
					  int nkeys, Datum *keynames, Oid source_relid)
{
	Oid			storage;
	StringInfoData sql;
	FencingSavedUser saved;
	int			rc;
	int			i;

	if (!FencingCitusPresent() || nkeys == 0)
		return false;
	storage = FencingScopeStorageRegistered(scope_name);
	if (!OidIsValid(storage) || GetCitusTable(storage).kind == CITUS_NONE)
		return false;
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot seed the fences of distributed scope \"%s\" under REPEATABLE READ or SERIALIZABLE",
						scope_name),
				 errdetail("The rows of table \"%s\" are read on the workers, where this transaction's snapshot may predate rows committed while it waited for the shards' locks.",
						   get_rel_name(source_relid)),
				 errhint("Run it in a READ COMMITTED transaction.")));

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s AS s (", FencingQualifiedName(storage));
	for (i = 0; i < nkeys; i++)
		appendStringInfo(&sql, "key_%d, ", i + 1);
	appendStringInfoString(&sql, "fence) SELECT ");
	for (i = 0; i < nkeys; i++)
		appendStringInfo(&sql, "%s, ", quote_identifier(NameStr(*DatumGetName(keynames[i]))));
	appendStringInfo(&sql, "fencing.max(%s) FROM %s WHERE %s IS NOT NULL GROUP BY ",
					 quote_identifier(fence_column), FencingQualifiedName(source_relid),
					 quote_identifier(fence_column));
	for (i = 0; i < nkeys; i++)
		appendStringInfo(&sql, "%s%d", i > 0 ? ", " : "", i + 1);
	appendStringInfoString(&sql, " ON CONFLICT (");
	for (i = 0; i < nkeys; i++)
		appendStringInfo(&sql, "%skey_%d", i > 0 ? ", " : "", i + 1);
	appendStringInfoString(&sql, ") DO UPDATE SET fence = EXCLUDED.fence "
						   "WHERE s.fence OPERATOR(fencing.<) EXCLUDED.fence");

	FencingSpiConnect();
	FencingBecomeOwner(&saved);
	rc = SPI_execute(sql.data, false, 0);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "could not seed fencing scope \"%s\": %s", scope_name,
			 SPI_result_code_string(rc));
	FencingRestoreUser(&saved);
	SPI_finish();
	return true;
}

/*
 * The guard on a table that is not a shard (the coordinator's own tables)
 * must not write a storage that Citus distributes: its rows live on the
 * shards, and what the guard wrote into the coordinator's empty shell
 * would fence nothing.  Such a table (one undistributed after protect(),
 * say) fails closed with SF005.
 */
static void
FencingCitusCheckLocalStorage(Relation rel, ScopeStorage *scope)
{
	if (scope == NULL || !FencingCitusPresent() || !IsCitusTable(scope->relid))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("the fence storage of scope \"%s\" is distributed and table \"%s\" is not",
					scope->scope_name, RelationGetRelationName(rel)),
			 errdetail("The scope's fences live on the shards of its distributed tables; table \"%s\" was protected as one of them.",
					   RelationGetRelationName(rel)),
			 errhint("Distribute the table again, co-located with the scope's tables (create_distributed_table(..., colocate_with => '%s')).",
					 FencingQualifiedName(scope->relid)),
			 errtable(rel)));
}

/*
 * The arguments of the guard trigger of relid, as SQL ("" when it needs
 * none): the settings of a Citus table, checked by FencingCitusCheckProtect
 * in this same protect().
 */
static const char *
FencingCitusGuardArgs(Oid relid)
{
	StringInfoData args;
	int			i;

	if (!OidIsValid(relid) || pending.relid != relid)
		return "";
	initStringInfo(&args);
	appendStringInfo(&args, "'" CITUS_ARGS_TAG "', %s, '%s'",
					 quote_literal_cstr(psprintf("fence_column=%s", pending.fence_column)),
					 pending.strict ? "strict=on" : "strict=off");
	if (pending.nkeys > 0)
	{
		if (pending.storage[0] == '\0')
			elog(ERROR, "the fence storage of scope \"%s\" is not prepared",
				 pending.scope_name);
		for (i = 0; i < pending.nkeys; i++)
			appendStringInfo(&args, ", %s",
							 quote_literal_cstr(psprintf("key=%s", pending.keys[i])));
		appendStringInfo(&args, ", %s, %s",
						 quote_literal_cstr(psprintf("scope=%s", pending.scope_name)),
						 quote_literal_cstr(psprintf("storage=%s", pending.storage)));
	}
	return args.data;
}

/*
 * Before the extension's own trigger DDL on relid: on a Citus table, turn
 * on citus.enable_unsafe_triggers (without it Citus refuses trigger DDL on
 * distributed and reference tables) until FencingCitusEndTriggerDdl, as a
 * function's SET clause would.  Returns the GUC nest level to end, or -1.
 */
static int
FencingCitusBeginTriggerDdl(Oid relid)
{
	int			level;

	if (!IsCitusTable(relid))
		return -1;
	level = NewGUCNestLevel();
	(void) set_config_option("citus.enable_unsafe_triggers", "on",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);

	/*
	 * Key scope: Citus lets one transaction reach a group of co-located
	 * shards as one user only, and the storage (the extension owner's) was
	 * just distributed into the table's group and is seeded after: the
	 * trigger DDL of protect() runs as the extension's owner too, the
	 * caller's ownership of the table being checked already.
	 */
	if (pending.relid == relid && pending.nkeys > 0 && pending.storage[0] != '\0' &&
		!pending.as_owner)
	{
		FencingBecomeOwner(&pending.saved);
		pending.as_owner = true;
	}
	return level;
}

/* After the trigger DDL: the setting and the user as they were. */
static void
FencingCitusEndTriggerDdl(int level)
{
	if (pending.as_owner)
	{
		FencingRestoreUser(&pending.saved);
		pending.as_owner = false;
		pending.storage[0] = '\0';
	}
	if (level >= 0)
		AtEOXact_GUC(true, level);
}

/*
 * The shard of the scope storage storage_shell (a distributed table of
 * schema fencing) that is co-located with shard rel on this node: the one
 * with rel's hash range (co-located shards have the same ranges; a split
 * splits the whole co-location group).  InvalidOid when this node holds no
 * such shard of the extension's owner.
 */
static Oid
ColocatedStorageShard(Relation rel, Oid storage_shell)
{
	int64		shardid = FencingCitusShardIdInName(RelationGetRelid(rel));
	Oid			argtypes[2] = {INT8OID, OIDOID};
	Datum		values[2];
	Oid			shard = InvalidOid;
	int			rc;

	if (shardid == 0 || !OidIsValid(storage_shell))
		return InvalidOid;
	values[0] = Int64GetDatum(shardid);
	values[1] = ObjectIdGetDatum(storage_shell);
	FencingSpiConnect();
	rc = SPI_execute_with_args("SELECT pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid))::pg_catalog.oid "
							   "FROM pg_catalog.pg_dist_shard me, pg_catalog.pg_dist_shard s "
							   "WHERE me.shardid OPERATOR(pg_catalog.=) $1 "
							   "AND s.logicalrelid OPERATOR(pg_catalog.=) $2::pg_catalog.regclass "
							   "AND s.shardminvalue OPERATOR(pg_catalog.=) me.shardminvalue "
							   "AND s.shardmaxvalue OPERATOR(pg_catalog.=) me.shardmaxvalue",
							   2, argtypes, values, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_dist_shard: %s", SPI_result_code_string(rc));
	if (SPI_processed == 1)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
			shard = DatumGetObjectId(d);
	}
	SPI_finish();

	/* a table of the extension's owner in schema fencing, nothing else */
	if (OidIsValid(shard) &&
		(get_rel_namespace(shard) != FencingSchemaOid() ||
		 get_rel_relkind(shard) != RELKIND_RELATION ||
		 FencingRelOwner(shard) != FencingOwnerOid()))
		shard = InvalidOid;
	return shard;
}

/* Raise SF005: shard rel's key scope cannot be checked here. */
static void
ReportShardScopeBroken(Relation rel, Oid shell, const char *scope_name,
					   const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("the fencing guard of shard \"%s\" cannot find the fences of scope \"%s\"",
					RelationGetRelationName(rel), scope_name),
			 errdetail_internal("%s", detail),
			 errhint("Call fencing.protect('%s') on the coordinator again to repair its guard; if the table is no longer co-located with the scope's storage, co-locate it with the storage again (update_distributed_table_colocation).",
					 FencingQualifiedName(shell)),
			 errtable(rel)));
}

/*
 * The guard settings of a shard, from the arguments of its guard trigger,
 * into cfg (allocated in cxt).  Leaves cfg unprotected when rel is not a
 * shard of a Citus table or its trigger carries no settings we can read:
 * the guard then fails closed.  In key scope, the scope's fences are in
 * the co-located shard of its storage on this node, which must be there
 * (SF005 otherwise).
 */
static void
FencingCitusShardGuardConfig(Relation rel, GuardConfig *cfg, MemoryContext cxt)
{
	Trigger    *t;
	Oid			shell;
	FencingCitusGuardTriggerArgs args;
	AttrNumber	attnum;
	AttrNumber	key_attnums[INDEX_MAX_KEYS];
	ScopeStorage *scope = NULL;
	MemoryContext old;
	int			i;

	t = FencingCitusGuardTrigger(rel);
	if (t == NULL || !FencingCitusParseGuardArgs(t, &args))
		return;
	shell = FencingCitusShardOf(RelationGetRelid(rel));
	if (!OidIsValid(shell))
		return;
	attnum = get_attnum(RelationGetRelid(rel), args.fence_column);
	if (attnum <= 0 || get_atttype(RelationGetRelid(rel), attnum) != FencingTypeOid())
		return;

	if (args.nkeys > 0)
	{
		Oid			storage_shell = get_relname_relid(args.storage, FencingSchemaOid());
		Oid			storage_shard;

		for (i = 0; i < args.nkeys; i++)
		{
			key_attnums[i] = get_attnum(RelationGetRelid(rel), args.keys[i]);
			if (key_attnums[i] <= 0)
				ReportShardScopeBroken(rel, shell, args.scope_name,
									   psprintf("Its key column \"%s\" is missing.", args.keys[i]));
		}
		storage_shard = ColocatedStorageShard(rel, storage_shell);
		if (!OidIsValid(storage_shard))
			ReportShardScopeBroken(rel, shell, args.scope_name,
								   psprintf("This node holds no shard of \"fencing.%s\" co-located with it.",
											args.storage));
		scope = FencingScopeStorageOpenRelation(storage_shard, args.scope_name, false, cxt);
		if (scope == NULL)
			ReportShardScopeBroken(rel, shell, args.scope_name,
								   psprintf("The shard of \"fencing.%s\" co-located with it cannot be opened.",
											args.storage));
	}

	old = MemoryContextSwitchTo(cxt);
	cfg->protected = true;
	cfg->protected_relid = shell;
	cfg->fence_attnum = attnum;
	cfg->key_out = NULL;
	cfg->strict = args.strict;
	cfg->lease = NULL;
	if (args.nkeys > 0)
	{
		cfg->nkeys = args.nkeys;
		cfg->key_attnums = palloc(sizeof(AttrNumber) * args.nkeys);
		memcpy(cfg->key_attnums, key_attnums, sizeof(AttrNumber) * args.nkeys);
		cfg->scope_name = pstrdup(args.scope_name);
		cfg->scope = scope;
	}
	else
	{
		cfg->nkeys = -1;
		cfg->key_attnums = NULL;
		cfg->scope_name = FencingQualifiedName(shell);
	}
	MemoryContextSwitchTo(old);
}

/*
 * The DDL guard's question (ddl_guard.c, ProtectionOf) about a relation
 * that fencing.protected does not name: is relid a shard of a protected
 * Citus table, on a worker?  fencing.protected lives on the coordinator;
 * a shard's settings travel in its guard trigger's arguments.  Then the
 * distributed table, the name of the shard's guard trigger (Citus names it
 * zz_fencing_guard_<shardid>) and the fence and key columns, for the same
 * rules as any protected table's.  False for Citus' own connections: what
 * they run was checked on the coordinator.  The cheap questions first, and
 * no lock: the DDL guard asks at ddl_command_start too.  Settings it
 * cannot read leave the columns unguarded and the triggers guarded.
 */
static bool
FencingCitusShardProtection(Oid relid, Oid *shell, char **guard_name,
							char **fence_column, int *nkeys, char ***key_columns)
{
	Trigger		t;
	FencingCitusGuardTriggerArgs args;
	int			i;

	if (FencingCitusShardIdInName(relid) == 0 || !FencingCitusPresent() || CitusInternalBackend())
		return false;
	if (!FencingCitusCatalogGuardTrigger(relid, &t))
		return false;
	*shell = FencingCitusShardOf(relid);
	if (!OidIsValid(*shell))
		return false;
	*guard_name = t.tgname;
	*fence_column = NULL;
	*nkeys = -1;
	*key_columns = NULL;
	if (FencingCitusParseGuardArgs(&t, &args))
	{
		*fence_column = args.fence_column;
		if (args.nkeys > 0)
		{
			*nkeys = args.nkeys;
			*key_columns = palloc(sizeof(char *) * args.nkeys);
			for (i = 0; i < args.nkeys; i++)
				(*key_columns)[i] = args.keys[i];
		}
	}
	return true;
}

/* The relation of a trigger's object name ([schema,] table, trigger). */
static RangeVar *
TriggerRelation(List *object)
{
	if (list_length(object) < 2)
		return NULL;
	return makeRangeVarFromNameList(list_truncate(list_copy(object),
												  list_length(object) - 1));
}

/* Does relid have a trigger calling fencing.guard_truncate()? */
static bool
HasTruncateGuard(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;
	int			i;

	if (td == NULL)
		return false;
	for (i = 0; i < td->numtriggers; i++)
		if (TRIGGER_FOR_TRUNCATE(td->triggers[i].tgtype) &&
			FencingCitusIsFencingFunction(td->triggers[i].tgfoid, "guard_truncate"))
			return true;
	return false;
}

/*
 * Bring the TRUNCATE guard of shard relid (and of its partitions) in line
 * with its row guard: add it where the row guard is, drop every fencing
 * TRUNCATE trigger where it is not.  Runs as the shard's owner, inside SPI.
 */
static void
SyncShardTruncateGuard(Oid relid)
{
	List	   *tree = find_all_inheritors(relid, ShareRowExclusiveLock, NULL);
	ListCell   *lc;

	foreach(lc, tree)
	{
		Oid			member = lfirst_oid(lc);
		Relation	rel = relation_open(member, NoLock);
		bool		guarded = FencingCitusGuardTrigger(rel) != NULL;
		bool		truncate = HasTruncateGuard(rel);
		char	   *qname = FencingQualifiedName(member);
		List	   *drop = NIL;
		ListCell   *ld;
		FencingSavedUser saved;

		if (!guarded && truncate && rel->trigdesc != NULL)
		{
			int			i;

			for (i = 0; i < rel->trigdesc->numtriggers; i++)
				if (FencingCitusIsFencingFunction(rel->trigdesc->triggers[i].tgfoid, "guard_truncate"))
					drop = lappend(drop, pstrdup(rel->trigdesc->triggers[i].tgname));
		}
		relation_close(rel, NoLock);

		FencingBecomeRole(FencingRelOwner(member), &saved);
		if (guarded && !truncate)
		{
			FencingRunUtility(psprintf("CREATE TRIGGER " FENCING_TRUNCATE_TRIGGER
							" BEFORE TRUNCATE ON %s"
							" FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()",
							qname));
			FencingRunUtility(psprintf("ALTER TABLE ONLY %s ENABLE ALWAYS TRIGGER " FENCING_TRUNCATE_TRIGGER,
							qname));
		}
		foreach(ld, drop)
			FencingRunUtility(psprintf("DROP TRIGGER IF EXISTS %s ON %s",
							quote_identifier((char *) lfirst(ld)), qname));
		FencingRestoreUser(&saved);
	}
}

/* SyncShardTruncateGuard() as the DDL guard's suspended work */
static void
SyncShardTruncateGuardOf(Oid relid, void *arg pg_attribute_unused())
{
	SyncShardTruncateGuard(relid);
}

/*
 * A partition created under a protected distributed table gets the guard's
 * TRUNCATE trigger (ddl_guard.c) just before Citus distributes it, which
 * Citus refuses for a table with triggers unless citus.enable_unsafe_triggers
 * is on: say so, rather than let Citus ask to drop the triggers.
 */
static void
CheckNewPartitionOfCitusTable(RangeVar *parent_rv)
{
	Oid			parent = RangeVarGetRelid(parent_rv, NoLock, true);
	const char *unsafe;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	bool		protected;
	int			rc;

	if (!OidIsValid(parent) || !IsCitusTable(parent))
		return;
	unsafe = GetConfigOption("citus.enable_unsafe_triggers", true, false);
	if (unsafe != NULL && strcmp(unsafe, "on") == 0)
		return;

	/* the parent, or the root it is a partition of, protected */
	values[0] = ObjectIdGetDatum(get_rel_relispartition(parent) ?
								 llast_oid(get_partition_ancestors(parent)) : parent);
	FencingSpiConnect();
	rc = SPI_execute_with_args("SELECT 1 FROM fencing.protected p "
							   "WHERE p.relid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
							   1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "could not read fencing.protected: %s", SPI_result_code_string(rc));
	protected = SPI_processed > 0;
	SPI_finish();
	if (!protected)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("creating a partition of protected distributed table \"%s\" needs citus.enable_unsafe_triggers",
					get_rel_name(parent)),
			 errdetail("The partition gets the fencing triggers, and Citus distributes a table with triggers only when citus.enable_unsafe_triggers is on."),
			 errhint("SET citus.enable_unsafe_triggers = on for this command.")));
}

/*
 * fencing.citus_ddl_end(): the ddl_command_end event trigger of CREATE and
 * DROP TRIGGER, CREATE TABLE and ALTER TABLE.  When the guard row trigger is created on a shard
 * (protect(), or a placement Citus creates), give the shard its TRUNCATE
 * guard; when it is dropped (unprotect()), take the shard's TRUNCATE guards
 * away; when a partition joins a shard (and so the guard's clone), give it
 * the TRUNCATE guard too.  Nothing to do where Citus is absent or on a table
 * that is not a shard.
 */
Datum
fencing_citus_ddl_end(PG_FUNCTION_ARGS)
{
	Node	   *parsetree;
	RangeVar   *rv = NULL;
	Oid			relid;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_EVENT_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"%s\" was not called by the event trigger manager",
						"citus_ddl_end")));
	parsetree = ((EventTriggerData *) fcinfo->context)->parsetree;
	/* our own trigger DDL below fires this event trigger too */
	if (in_truncate_sync)
		PG_RETURN_NULL();
	if (IsA(parsetree, CreateTrigStmt))
		rv = ((CreateTrigStmt *) parsetree)->relation;
	else if (IsA(parsetree, DropStmt) &&
			 ((DropStmt *) parsetree)->removeType == OBJECT_TRIGGER &&
			 list_length(((DropStmt *) parsetree)->objects) == 1)
		rv = TriggerRelation(linitial(((DropStmt *) parsetree)->objects));
	else if (IsA(parsetree, AlterTableStmt))
	{
		ListCell   *lc;

		/* a partition attached to a shard gets the guard's clone */
		foreach(lc, ((AlterTableStmt *) parsetree)->cmds)
			if (lfirst_node(AlterTableCmd, lc)->subtype == AT_AttachPartition)
				rv = ((AlterTableStmt *) parsetree)->relation;
	}
	else if (IsA(parsetree, CreateStmt) &&
			 ((CreateStmt *) parsetree)->partbound != NULL &&
			 list_length(((CreateStmt *) parsetree)->inhRelations) == 1)
	{
		rv = linitial_node(RangeVar, ((CreateStmt *) parsetree)->inhRelations);
		if (FencingCitusPresent())
			CheckNewPartitionOfCitusTable(rv);
	}

	/*
	 * The guard arriving on a shard that a shard transfer fills: its scope's
	 * fences first (citus_transfer.c).  After the command's own DDL, under
	 * its lock on the table.
	 */
	if (IsA(parsetree, CreateTrigStmt) || IsA(parsetree, AlterTableStmt))
	{
		RangeVar   *target = IsA(parsetree, CreateTrigStmt) ?
			((CreateTrigStmt *) parsetree)->relation :
			((AlterTableStmt *) parsetree)->relation;

		FencingCitusAwaitTransferDdl(RangeVarGetRelid(target, NoLock, true));
	}

	if (rv == NULL || !FencingCitusPresent())
		PG_RETURN_NULL();
	relid = RangeVarGetRelid(rv, NoLock, true);
	if (!OidIsValid(relid) || !OidIsValid(FencingCitusShardOf(relid)))
		PG_RETURN_NULL();

	/*
	 * With the DDL guard suspended, restored as it was after: this may run
	 * inside protect() or unprotect() itself, when Citus executes their
	 * DDL on a placement of this node.
	 */
	FencingSpiConnect();
	in_truncate_sync = true;
	PG_TRY();
	{
		FencingRunWithDdlGuardSuspended(SyncShardTruncateGuardOf, relid, NULL);
	}
	PG_FINALLY();
	{
		in_truncate_sync = false;
	}
	PG_END_TRY();
	SPI_finish();
	PG_RETURN_NULL();
}

/*
 * A write that the apply worker replays into a shard being filled by a
 * shard transfer (citus_transfer.c); a row-scope shard's counters are its
 * distributed table's.
 */
static bool
FencingCitusFollowReplayHook(Relation rel, AttrNumber *fence_attnum,
							 Oid *stats_relid)
{
	*stats_relid = InvalidOid;
	if (!FencingCitusFollowReplay(rel, fence_attnum))
		return false;
	if (*fence_attnum != InvalidAttrNumber)
		*stats_relid = FencingCitusShardOf(RelationGetRelid(rel));
	return true;
}

/* What the core asks of Citus (cluster.h), registered from _PG_init. */
static const FencingClusterHooks citus_hooks = {
	.check_protect = FencingCitusCheckProtect,
	.guard_args = FencingCitusGuardArgs,
	.begin_trigger_ddl = FencingCitusBeginTriggerDdl,
	.end_trigger_ddl = FencingCitusEndTriggerDdl,
	.shard_guard_config = FencingCitusShardGuardConfig,
	.shard_protection = FencingCitusShardProtection,
	.prepare_storage = FencingCitusPrepareStorage,
	.distributes_storage = FencingCitusDistributesStorage,
	.seed_scope = FencingCitusSeedScope,
	.check_local_storage = FencingCitusCheckLocalStorage,
	.follow_replay = FencingCitusFollowReplayHook,
};

void
FencingCitusInit(void)
{
	FencingClusterRegister(&citus_hooks);
	FencingCitusTransferInit();
}
