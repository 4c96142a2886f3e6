/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  The Citus integration: registered from _PG_init behind the
 *	  interface of cluster.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_CITUS_H
#define FENCING_CITUS_H

extern void FencingCitusInit(void);

#endif							/* FENCING_CITUS_H */
