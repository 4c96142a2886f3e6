/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Shims for the server APIs that differ between the PostgreSQL
 *	  releases fencing builds on (15 to 18; built and tested on 15 and
 *	  18).  Each names the release that changed the API.  Included by
 *	  fencing.h, so every C file has them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_COMPAT_H
#define FENCING_COMPAT_H

#include "postgres.h"

#include "access/genam.h"
#include "utils/guc.h"

/*
 * PostgreSQL 16 replaced the per-object-class ownership checks
 * (pg_class_ownercheck and friends) with object_ownercheck().
 */
#if PG_VERSION_NUM >= 160000
#define FencingOwnsRelation(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define FencingOwnsRelation(relid, roleid) pg_class_ownercheck((relid), (roleid))
#endif

/*
 * PostgreSQL 15 renamed EmitWarningsOnPlaceholders() to
 * MarkGUCPrefixReserved().
 */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/*
 * PostgreSQL 18 removed pg_attribute_noreturn(), written after a function
 * declaration, in favour of pg_noreturn (C11's _Noreturn), written before
 * it.  Before 18, pg_noreturn is GCC's attribute in the same place.
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * PostgreSQL 18 added an IndexScanInstrumentation argument to
 * index_beginscan() (for EXPLAIN ANALYZE's index search counts); NULL
 * means none.
 */
#if PG_VERSION_NUM >= 180000
#define FencingIndexBeginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#else
#define FencingIndexBeginscan(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#endif

/*
 * PostgreSQL 16 moved the settings' memory into a memory context of its
 * own: the "extra" that a check hook hands back is freed with guc_free()
 * (a pfree() that asserts the context), so it must come from guc_malloc().
 * Up to 15 it came from malloc() and was freed with free().  A malloc()ed
 * extra on 16 or later makes the server pfree() memory it never palloc()ed
 * at the end of every transaction that set the value.  guc_malloc(LOG, ...)
 * returns NULL when out of memory, as malloc() does.
 */
#if PG_VERSION_NUM >= 160000
#define FencingGucMalloc(size) guc_malloc(LOG, (size))
#else
#define FencingGucMalloc(size) malloc(size)
#endif

#endif							/* FENCING_COMPAT_H */
