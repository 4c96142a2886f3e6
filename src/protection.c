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
 * The nearest protected ancestor wins; the DDL guard and protect() keep a
 * tree to one protection.
 *
 * The answer is computed with an index scan of fencing.protected (as no
 * particular role: revoked privileges cannot blind the guard) and of
 * pg_inherits, and cached per relation.  Each answer depends on the
 * relation and its ancestors; those relations are "watched", and a
 * relcache invalidation of any of them, of fencing.protected itself, or of
 * everything, empties the cache.  Every event that changes an answer sends
 * one: protect() and unprotect() invalidate the tree they change and
 * fencing.protected; a table's drop, a partition's attach or detach and an
 * inheritance link made or removed invalidate the child; the statement
 * trigger on fencing.protected (1.1) covers direct writes.  An unrelated
 * DDL command does not empty the cache, so a command on an unprotected
 * table pays a hash look-up, after the first one.
 *
 * fencing.protected is read with a fresh MVCC snapshot: a lookup made
 * after taking a lock on a relation sees every protection committed by a
 * transaction that held a conflicting lock on it.
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
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/relcache.h"

#include "fencing.h"

typedef struct ProtectionEntry
{
	Oid			relid;			/* hash key */
	Oid			through;		/* InvalidOid: not protected */
} ProtectionEntry;

static HTAB *protection_cache = NULL;	/* relid -> ProtectionEntry */
static HTAB *watched = NULL;	/* relids whose invalidation empties it */
static bool cache_stale = false;
static uint64 cache_generation = 0;

/* fencing.protected and its primary key index, once looked up */
static Oid	protected_relid = InvalidOid;
static Oid	protected_pkey = InvalidOid;

/* Relcache callback: empty the cache when an answer may have changed. */
static void
InvalidateProtections(Datum arg pg_attribute_unused(), Oid relid)
{
	if (!OidIsValid(relid) || relid == protected_relid)
	{
		/* everything, or fencing.protected itself (also: dropped) */
		protected_relid = InvalidOid;
		protected_pkey = InvalidOid;
	}
	else if (watched == NULL ||
			 hash_search(watched, &relid, HASH_FIND, NULL) == NULL)
		return;
	/* emptied at the next look-up: never free memory inside a callback */
	cache_stale = true;
	cache_generation++;
}

/* Register the relcache callback; called from _PG_init. */
void
FencingProtectionInit(void)
{
	CacheRegisterRelcacheCallback(InvalidateProtections, (Datum) 0);
}

/* Empty the cache of this backend (after writing fencing.protected). */
void
FencingProtectionReset(void)
{
	InvalidateProtections((Datum) 0, InvalidOid);
}

/* Create (or empty) the two hash tables. */
static void
ResetCache(void)
{
	HASHCTL		ctl;

	if (protection_cache != NULL)
		hash_destroy(protection_cache);
	if (watched != NULL)
		hash_destroy(watched);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(ProtectionEntry);
	ctl.hcxt = CacheMemoryContext;
	protection_cache = hash_create("fencing protections", 64, &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.entrysize = sizeof(Oid);
	watched = hash_create("fencing watched relations", 64, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	cache_stale = false;
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
	nsp = get_namespace_oid("fencing", true);
	if (!OidIsValid(nsp))
		return InvalidOid;
	table = get_relname_relid("protected", nsp);
	if (!OidIsValid(table))
		return InvalidOid;
	/* opening it may run the callback: set the statics only afterwards */
	rel = table_open(table, AccessShareLock);
#if PG_VERSION_NUM >= 180000
	/* PostgreSQL 18 added deferrable_ok; ours is not deferrable */
	pkey = RelationGetPrimaryKeyIndex(rel, false);
#else
	pkey = RelationGetPrimaryKeyIndex(rel);
#endif
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

/* Is relid itself named in fencing.protected (rel, with index pkey)? */
static bool
IsListed(Relation rel, Oid pkey, Oid relid)
{
	HeapTuple	tup = FetchProtectedRow(rel, pkey, relid);

	if (tup == NULL)
		return false;
	heap_freetuple(tup);
	return true;
}

/*
 * The parents of relid, in pg_inherits order (partitions have one).
 * Detach-pending links count: the partition is still attached to readers.
 */
static List *
Parents(Oid relid)
{
	Relation	inh;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	List	   *result = NIL;

	inh = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(inh, InheritsRelidSeqnoIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
		result = lappend_oid(result, ((Form_pg_inherits) GETSTRUCT(tup))->inhparent);
	systable_endscan(scan);
	table_close(inh, AccessShareLock);
	return result;
}

/*
 * Compute the answer for relid: itself, else the nearest listed ancestor
 * (breadth first).  *seen receives relid and every ancestor looked at.
 */
static Oid
ComputeProtectedBy(Oid table, Oid pkey, Oid relid, List **seen)
{
	Relation	rel;
	List	   *queue;
	Oid			result = InvalidOid;
	int			i;

	/* the callback may forget the OIDs while we look: keep our copies */
	rel = table_open(table, AccessShareLock);
	*seen = list_make1_oid(relid);
	if (IsListed(rel, pkey, relid))
	{
		table_close(rel, AccessShareLock);
		return relid;
	}
	queue = Parents(relid);
	/* a bounded walk: pg_inherits has no cycles, but be safe */
	for (i = 0; i < list_length(queue) && i < 10000; i++)
	{
		Oid			parent = list_nth_oid(queue, i);

		if (list_member_oid(*seen, parent))
			continue;
		*seen = lappend_oid(*seen, parent);
		if (IsListed(rel, pkey, parent))
		{
			result = parent;
			break;
		}
		queue = list_concat(queue, Parents(parent));
	}
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * The table named in fencing.protected that protects relid: relid itself,
 * or its nearest protected partition or inheritance ancestor.  InvalidOid
 * when relid is not protected, or the extension's catalog is missing.
 *
 * This is the one-line question for every module: "is relid protected,
 * and through which table?".
 */
Oid
FencingProtectedBy(Oid relid)
{
	ProtectionEntry *entry;
	List	   *seen;
	ListCell   *lc;
	uint64		generation;
	Oid			table = FencingProtectedTableOid();
	Oid			pkey = protected_pkey;
	Oid			through;
	bool		found;

	if (!OidIsValid(relid) || !OidIsValid(table))
		return InvalidOid;
	if (protection_cache == NULL || cache_stale)
		ResetCache();
	entry = hash_search(protection_cache, &relid, HASH_FIND, NULL);
	if (entry != NULL)
		return entry->through;

	generation = cache_generation;
	through = ComputeProtectedBy(table, pkey, relid, &seen);

	/* an invalidation that arrived meanwhile may concern this answer */
	if (generation == cache_generation && !cache_stale)
	{
		entry = hash_search(protection_cache, &relid, HASH_ENTER, &found);
		entry->through = through;
		foreach(lc, seen)
		{
			Oid			r = lfirst_oid(lc);

			(void) hash_search(watched, &r, HASH_ENTER, &found);
		}
	}
	list_free(seen);
	return through;
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
