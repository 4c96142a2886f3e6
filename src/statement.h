/*-------------------------------------------------------------------------
 *
 * statement.h
 *	  The writing statement (statement.c): the span during which the
 *	  guard's settings cannot change.
 *
 *-------------------------------------------------------------------------
 */
#ifndef FENCING_STATEMENT_H
#define FENCING_STATEMENT_H

extern void FencingStatementInit(void);

#endif							/* FENCING_STATEMENT_H */
