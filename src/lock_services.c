/*-------------------------------------------------------------------------
 *
 * lock_services.c
 *	  Helpers for tokens that come from a lock service outside PostgreSQL
 *	  (etcd, ZooKeeper, Redis): fencing.fence_from_zxid() and
 *	  fencing.set_token().
 *
 * A ZooKeeper zxid is a 64-bit number, the leader's epoch in its high 32
 * bits and a counter in its low 32 bits.  fence_from_zxid() splits it so
 * that fences compare exactly as zxids do, and puts a generation above
 * ZooKeeper's epoch: after ZooKeeper loses its data its zxids start again
 * from 0, and a raised generation is what keeps the new grants ahead of
 * the old ones.
 *
 * set_token() is set_config('fencing.token', token, true) for a token that
 * a driver binds as a parameter ($1), which SET LOCAL cannot take.  It
 * calls the very function set_config() calls, in the caller's session
 * and transaction, so every rule that applies to setting fencing.token
 * applies to it alike.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

#include "fence.h"
#include "provenance.h"
#include "statement.h"

PG_FUNCTION_INFO_V1(fence_from_zxid);
PG_FUNCTION_INFO_V1(fence_set_token);

/*
 * fencing.fence_from_zxid(zxid, generation): the fence
 * ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff).
 */
Datum
fence_from_zxid(PG_FUNCTION_ARGS)
{
	int64		zxid = PG_GETARG_INT64(0);
	int32		generation = PG_GETARG_INT32(1);
	Fence	   *result;

	if (zxid < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("zxid %lld is out of range for a fence token",
						(long long) zxid),
				 errdetail("A ZooKeeper zxid is not negative: its high 32 bits are the leader's epoch, its low 32 bits a counter."),
				 errhint("Pass the czxid of the lock's znode as ZooKeeper reports it.")));
	if (generation < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("generation %d is out of range for a fence token",
						generation),
				 errdetail("The generation goes into the epoch above ZooKeeper's own epoch: it must be between 0 and 2147483647."),
				 errhint("Start the generation at 0 and raise it by one after each loss of ZooKeeper's data.")));

	result = (Fence *) palloc(sizeof(Fence));
	/* both parts are below 2^31, so the epoch stays below 2^63 */
	result->epoch = ((int64) generation << 32) | (zxid >> 32);
	result->counter = zxid & INT64CONST(0xffffffff);
	PG_RETURN_FENCE_P(result);
}

/* set_config('fencing.token', token, is_local => true) itself, not a copy */
static void
SetTokenLocally(const Fence *token)
{
	(void) DirectFunctionCall3(set_config_by_name,
							   CStringGetTextDatum("fencing.token"),
							   CStringGetTextDatum(FenceToCString(token)),
							   BoolGetDatum(true));
}

/*
 * fencing.set_token(token): set fencing.token for the rest of the current
 * transaction, as SET LOCAL does, and return the token.
 */
Datum
fence_set_token(PG_FUNCTION_ARGS)
{
	Fence	   *token;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_FENCE_TOKEN_REQUIRED),
				 errmsg("fence token must not be null"),
				 errdetail("fencing.set_token() was called without a token."),
				 errhint("Pass the fence token that came with the lock.")));
	token = PG_GETARG_FENCE_P(0);

	/*
	 * The call that loaded the library (a session without the preload)
	 * ran in no frame the hooks saw: when it is the statement's only call,
	 * SELECT fencing.set_token($1), it is the session's own.
	 */
	if (FencingUnseenCallOf(fcinfo->flinfo->fn_oid))
	{
		int			depth = FencingFramePush(FENCING_FRAME_ALLOW, "calls a function", true);

		PG_TRY();
		{
			SetTokenLocally(token);
		}
		PG_CATCH();
		{
			FencingFramePop(depth, false);
			PG_RE_THROW();
		}
		PG_END_TRY();
		FencingFramePop(depth, true);
	}
	else
		SetTokenLocally(token);
	PG_RETURN_FENCE_P(token);
}
