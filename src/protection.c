/*-------------------------------------------------------------------------
 *
 * protection.c
 *	  Is a relation protected, and through which table?  The cached,
 *	  invalidation-driven answer that the DDL guard asks on every DDL
 *	  command, and that the guard's settings cache uses for partitions and
 *	  inheritance children.
 *
 * A relation is protected when fencing.protected names it, or names one of
 * its ancestors: partition parents and inheritance parents, at any level
 * (a partition detached concurrently counts until the detach is final).
 *
 * The answer comes from one hash table per backend: every protected
 * relation of the database (the tables named in fencing.protected and all
 * their partitions and inheritance children) with the table that protects
 * it.  A relation that is not in it is not protected: a DDL command on an
 * unprotected table pays a hash probe, and touches no catalog and takes no
 * lock.  The table is built with a scan of fencing.protected (a fresh MVCC
 * snapshot, as no particular role: revoked privileges cannot blind the
 * guard) and find_all_inheritors(), and rebuilt after a relcache
 * invalidation of fencing.protected itself, of everything, or of one of
 * its members.  Every event that changes it sends one: protect(),
 * unprotect() and the DDL guard invalidate fencing.protected and the
 * trees they change; a partition's attach or detach invalidates the
 * parent, an inheritance link made or removed the child; a drop the
 * dropped relation; the statement trigger on fencing.protected (1.1)
 * covers any other writer.  Because invalidations are sent at commit and
 * received when a lock is taken, a look-up made under a lock on a relation
 * sees every protection committed by a transaction that held a conflicting
 * lock on it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/partition.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "compat.h"
#include "protection.h"

typedef struct ProtectionEntry
{
	Oid			relid;			/* hash key: a protected relation */
	Oid			through;		/* the table named in fencing.protected */
} ProtectionEntry;

/*
 * Every protected relation of the database: the tables named in
 * fencing.protected and all their partitions and inheritance children,
 * each with the table that protects it.  A relation not in it is not
 * protected, so the answer for an unprotected table is one hash probe.
 */
static HTAB *protections = NULL;
static bool protections_valid = false;
static bool building = false;
static bool invalidated_while_building = false;

/* fencing.protected and its primary key index, once looked up */
static Oid	protected_relid = InvalidOid;
static Oid	protected_pkey = InvalidOid;

/*
 * Relcache callback.  The set changes only when fencing.protected changes
 * (protect(), unprotect() and the DDL guard invalidate it, and so does its
 * statement trigger), or when a protected relation changes (a partition
 * attached or detached, a child inherits or disinherits: the parent or the
 * child gets an invalidation; a protected relation dropped).  Invalidations
 * of other relations, the DDL of unprotected tables, leave it alone.
 */
static void
InvalidateProtections(Datum arg pg_attribute_unused(), Oid relid)
{
	if (building)
	{
		/* cannot tell yet whether relid will be in the set: rebuild */
		invalidated_while_building = true;
		if (!OidIsValid(relid) || relid == protected_relid)
		{
			protected_relid = InvalidOid;
			protected_pkey = InvalidOid;
		}
		return;
	}
	if (!OidIsValid(relid) || relid == protected_relid)
	{
		/* everything, or fencing.protected itself (also: dropped) */
		protected_relid = InvalidOid;
		protected_pkey = InvalidOid;
		protections_valid = false;
	}
	else if (protections_valid &&
			 hash_search(protections, &relid, HASH_FIND, NULL) != NULL)
		protections_valid = false;	/* rebuilt at the next look-up */
}

/*
 * Register the relcache callback, before this backend caches anything
 * here.  Not at library load: PostgreSQL has room for ten relcache
 * callbacks in a backend, and one that never guards a write, such as the
 * walsender of a Citus shard split (Citus' caches, its decoder's and the
 * server's own take nine), must not run out of them for ours.
 */
static void
RegisterProtectionsCallback(void)
{
	static bool registered = false;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(InvalidateProtections, (Datum) 0);
		registered = true;
	}
}

/* Forget the set in this backend (after writing fencing.protected). */
void
FencingProtectionReset(void)
{
	InvalidateProtections((Datum) 0, InvalidOid);
}

/*
 * The OID of fencing.protected, or InvalidOid while it does not exist (the
 * extension is being created or dropped).
 */
Oid
FencingProtectedTableOid(void)
{
	Oid			nsp;
	Oid			table;
	Oid			pkey;
	Relation	rel;

	if (OidIsValid(protected_relid) && OidIsValid(protected_pkey))
		return protected_relid;
	RegisterProtectionsCallback();
	nsp = get_namespace_oid("fencing", true);
	if (!OidIsValid(nsp))
		return InvalidOid;
	table = get_relname_relid("protected", nsp);
	if (!OidIsValid(table))
		return InvalidOid;
	/* opening it may run the callback: set the statics only afterwards */
	rel = table_open(table, AccessShareLock);
	pkey = FencingRelationGetPrimaryKeyIndex(rel);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(pkey))
		return InvalidOid;
	protected_relid = table;
	protected_pkey = pkey;
	return table;
}

/*
 * Fetch the row of fencing.protected naming relid, or NULL.  The caller
 * has opened fencing.protected (rel) and passes its primary key index;
 * the tuple is a copy.
 */
static HeapTuple
FetchProtectedRow(Relation rel, Oid pkey, Oid relid)
{
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, pkey, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		tup = heap_copytuple(tup);
	systable_endscan(scan);
	return tup;
}

/*
 * Build the set: every table named in fencing.protected (read with a fresh
 * MVCC snapshot, as no particular role), then their partitions and
 * inheritance children at any level (detach-pending ones included: they
 * are still attached for readers).  A member reached from two protected
 * tables keeps the first; protect() and the DDL guard keep a tree to one.
 */
static void
BuildProtections(Oid table)
{
	HASHCTL		ctl;
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *listed = NIL;
	ListCell   *lc;
	bool		found;

	if (protections != NULL)
		hash_destroy(protections);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(ProtectionEntry);
	ctl.hcxt = CacheMemoryContext;
	protections = hash_create("fencing protections", 64, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	rel = table_open(table, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 0, NULL);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Oid			relid = DatumGetObjectId(heap_getattr(tup, 1, RelationGetDescr(rel),
														  &isnull));

		if (!isnull)
			listed = lappend_oid(listed, relid);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	foreach(lc, listed)
	{
		Oid			relid = lfirst_oid(lc);
		ProtectionEntry *entry = hash_search(protections, &relid, HASH_ENTER, &found);

		entry->through = relid;
	}
	foreach(lc, listed)
	{
		Oid			relid = lfirst_oid(lc);
		ListCell   *lm;

		/* a table dropped by this very command is still listed (sql_drop) */
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)) ||
			!has_subclass(relid))
			continue;
		foreach(lm, find_all_inheritors(relid, NoLock, NULL))
		{
			Oid			member = lfirst_oid(lm);
			ProtectionEntry *entry = hash_search(protections, &member, HASH_ENTER, &found);

			if (!found)
				entry->through = relid;
		}
	}
	list_free(listed);
}

/*
 * The table named in fencing.protected that protects relid: relid itself,
 * or its protected partition or inheritance ancestor.  InvalidOid when
 * relid is not protected, or the extension's catalog is missing.
 *
 * This is the one-line question for every module: "is relid protected,
 * and through which table?".
 */
Oid
FencingProtectedBy(Oid relid)
{
	ProtectionEntry *entry;
	Oid			table;

	if (!OidIsValid(relid))
		return InvalidOid;
	table = FencingProtectedTableOid();
	if (!OidIsValid(table))
		return InvalidOid;
	if (!protections_valid)
	{
		building = true;
		invalidated_while_building = false;
		PG_TRY();
		{
			BuildProtections(table);
		}
		PG_FINALLY();
		{
			building = false;
		}
		PG_END_TRY();
		/* answer from what was built; build again next time if it moved */
		protections_valid = !invalidated_while_building;
	}
	entry = hash_search(protections, &relid, HASH_FIND, NULL);
	return entry ? entry->through : InvalidOid;
}

/*
 * The settings of protected table relid (named in fencing.protected) that
 * the DDL guard needs: its fence column and key columns (*nkeys -1 in row
 * scope).  False when relid is not named there.
 */
bool
FencingProtectionColumns(Oid relid, char **fence_column, int *nkeys,
						 char ***key_columns)
{
	Oid			table = FencingProtectedTableOid();
	Oid			pkey = protected_pkey;
	Relation	rel;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	bool		found;
	Datum		d;

	*fence_column = NULL;
	*nkeys = -1;
	*key_columns = NULL;
	if (!OidIsValid(table))
		return false;
	rel = table_open(table, AccessShareLock);
	tup = FetchProtectedRow(rel, pkey, relid);
	desc = RelationGetDescr(rel);
	found = tup != NULL;
	if (found)
	{
		AttrNumber	fence_att = get_attnum(table, "fence_column");
		AttrNumber	keys_att = get_attnum(table, "key_columns");

		if (fence_att <= 0 || keys_att <= 0)
			elog(ERROR, "fencing.protected has no column fence_column or key_columns");
		d = heap_getattr(tup, fence_att, desc, &isnull);
		if (!isnull)
			*fence_column = pstrdup(NameStr(*DatumGetName(d)));
		d = heap_getattr(tup, keys_att, desc, &isnull);
		if (!isnull)
		{
			Datum	   *elems;
			int			k;

			deconstruct_array(DatumGetArrayTypeP(d), NAMEOID, NAMEDATALEN,
							  false, TYPALIGN_CHAR, &elems, NULL, nkeys);
			*key_columns = palloc(sizeof(char *) * Max(*nkeys, 1));
			for (k = 0; k < *nkeys; k++)
				(*key_columns)[k] = pstrdup(NameStr(*DatumGetName(elems[k])));
		}
		heap_freetuple(tup);
	}
	table_close(rel, AccessShareLock);
	return found;
}
