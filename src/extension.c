/*-------------------------------------------------------------------------
 *
 * extension.c
 *	  The extension's own objects as every module needs them: its schema,
 *	  its type, its owner, and running SQL as that owner.
 *
 * The tables of the extension (fencing.protected, the scope storage,
 * fencing.idempotency_keys, fencing.leases) are written by no role but the
 * extension's owner.  The C functions that must write them switch to the
 * owner around their own, fully qualified SQL, as PostgreSQL's RI triggers
 * do, rather than being SECURITY DEFINER: the caller's arguments are
 * evaluated by the caller, and no SET clause's per-call GUC save and
 * restore is paid on the hot path.  An error in between needs no cleanup:
 * (sub)transaction abort restores the user and security context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "extension.h"

/* The OID of schema fencing (fixed by the control file). */
Oid
FencingSchemaOid(void)
{
	return get_namespace_oid("fencing", false);
}

/* The OID of type fencing.fence. */
Oid
FencingTypeOid(void)
{
	return GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid,
						   CStringGetDatum("fence"),
						   ObjectIdGetDatum(FencingSchemaOid()));
}

/* The extension's owner: the owner of its catalog table. */
Oid
FencingOwnerOid(void)
{
	Oid			relid = get_relname_relid("protected", FencingSchemaOid());
	HeapTuple	tup;
	Oid			owner;

	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/* Run as role until FencingRestoreUser(saved). */
void
FencingBecomeRole(Oid role, FencingSavedUser *saved)
{
	GetUserIdAndSecContext(&saved->userid, &saved->sec_context);
	SetUserIdAndSecContext(role,
						   saved->sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

/* Run as the extension's owner until FencingRestoreUser(saved). */
void
FencingBecomeOwner(FencingSavedUser *saved)
{
	FencingBecomeRole(FencingOwnerOid(), saved);
}

/* Back to the user FencingBecomeRole() or FencingBecomeOwner() saved. */
void
FencingRestoreUser(const FencingSavedUser *saved)
{
	SetUserIdAndSecContext(saved->userid, saved->sec_context);
}

/*
 * May the current user act for owner?  True for owner itself, its members
 * and superusers: what "belongs to" means for scopes, keys and leases.
 */
bool
FencingActsFor(Oid owner)
{
	return is_member_of_role(GetUserId(), owner);
}

/*
 * The schema-qualified, quoted name of a relation, for SQL the extension
 * builds; its OID when the relation has gone meanwhile.
 */
char *
FencingQualifiedName(Oid relid)
{
	char	   *name = get_rel_name(relid);

	if (name == NULL)
		return psprintf("%u", relid);
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  name);
}

/*
 * The owner of a relation, from the catalog cache (no lock needed);
 * InvalidOid when there is no such relation.
 */
Oid
FencingRelOwner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		return InvalidOid;
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Connect to SPI: every module's queries of the extension's tables go
 * through SPI_connect() here, FencingRunUtility() and FencingExecuteLatest()
 * (or SPI_execute*() with their own check of the result).
 */
void
FencingSpiConnect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

/*
 * Run one utility statement the extension built through SPI (connected by
 * the caller); elog, as for a cannot-happen, on any other outcome.
 */
void
FencingRunUtility(const char *sql)
{
	int			rc = SPI_execute(sql, false, 0);

	if (rc != SPI_OK_UTILITY)
		elog(ERROR, "SPI_execute failed for \"%s\": %s", sql,
			 SPI_result_code_string(rc));
}

/*
 * Run a query of the extension's own tables (inside SPI) under a snapshot
 * taken now rather than the transaction's: fencing.protected and the scope
 * registry say how tables are protected, and a transaction at REPEATABLE
 * READ or SERIALIZABLE must find them as they are, as it finds the system
 * catalogs, or it would judge writes, create scopes and drop storage by a
 * state that has changed since its snapshot.  Callers hold the locks that
 * keep what they read from changing before they act on it.  Arguments as
 * for SPI_execute_with_args(); returns the SPI result code.
 */
int
FencingExecuteLatest(const char *sql, int nargs, Oid *argtypes, Datum *values,
					 const char *nulls, bool read_only, long tcount)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);
	Snapshot	snapshot;
	int			rc;

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for \"%s\": %s", sql,
			 SPI_result_code_string(SPI_result));
	/* what this transaction wrote so far, too */
	if (!read_only)
		CommandCounterIncrement();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	rc = SPI_execute_snapshot(plan, values, nulls, snapshot, InvalidSnapshot,
							  read_only, true, tcount);
	UnregisterSnapshot(snapshot);
	SPI_freeplan(plan);
	return rc;
}
