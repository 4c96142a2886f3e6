/*-------------------------------------------------------------------------
 *
 * advance.c
 *	  fencing.advance(current, token, strict): compare-and-advance for use
 *	  inside UPDATE, without triggers.
 *
 * Atomicity comes from where it is evaluated: in UPDATE ... SET fence =
 * fencing.advance(fence, token), "fence" is the row version that the
 * UPDATE has locked (READ COMMITTED re-evaluates on the newest version;
 * REPEATABLE READ and SERIALIZABLE fail with 40001 on a concurrent
 * update), so no other writer can slip in between check and write.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

#include "fence.h"

PG_FUNCTION_INFO_V1(fence_advance);

/*
 * Return token when it beats current (or current is NULL); raise SF001
 * otherwise, SF002 for a NULL token.  A NULL strict flag means strict.
 */
Datum
fence_advance(PG_FUNCTION_ARGS)
{
	Fence	   *current;
	Fence	   *token;
	bool		strict = true;
	int			cmp;

	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_FENCE_TOKEN_REQUIRED),
				 errmsg("fence token must not be null"),
				 errdetail("fencing.advance() was called without a token."),
				 errhint("Pass the fence token that came with the lock.")));
	token = PG_GETARG_FENCE_P(1);
	if (PG_ARGISNULL(0))
		PG_RETURN_FENCE_P(token);
	current = PG_GETARG_FENCE_P(0);
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
		strict = PG_GETARG_BOOL(2);

	cmp = FenceCmp(token, current);
	if (cmp > 0 || (cmp == 0 && !strict))
		PG_RETURN_FENCE_P(token);
	FencingReportStaleToken(token, current, NULL, NULL);
	PG_RETURN_NULL();			/* not reached */
}
