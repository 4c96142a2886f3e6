/*-------------------------------------------------------------------------
 *
 * statement.h
 *	  The phases of a statement (statement.c): hooks that tell the frames
 *	  of provenance.c what the backend is doing.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_STATEMENT_H
#define FENCING_STATEMENT_H

extern void FencingStatementInit(void);
extern bool FencingUnseenCallOf(Oid funcid);

#endif							/* FENCING_STATEMENT_H */
