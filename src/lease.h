/*-------------------------------------------------------------------------
 *
 * lease.h
 *	  The built-in leases, as the guard checks them (lease.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_LEASE_H
#define FENCING_LEASE_H

#include "fence.h"

/*
 * lease.c: the guard's check of a table protected with a lease.
 * FencingReportLeaseLost() also counts the rejection in fencing.lease_stats.
 */
extern bool FencingLeaseHeldWith(const char *lease, const Fence *token, Oid table_owner);
extern void FencingCheckLeaseForTable(const char *lease, Oid table_owner, Relation rel);
pg_noreturn extern void FencingReportLeaseLost(const char *lease, const Fence *token,
										Relation rel);

#endif							/* FENCING_LEASE_H */
