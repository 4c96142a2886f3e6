/*-------------------------------------------------------------------------
 *
 * errors.c
 *	  The errors of the SF class, raised in one place so that advance(),
 *	  the guard and the idempotency helpers speak with one voice.
 *
 * An on-call engineer reads these at night: the message names the token,
 * DETAIL says what it lost to, HINT says what the writer must do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "fence.h"

/*
 * Put the reason of an SF001 (FENCING_REASON_*) into the error's constraint
 * name field; used inside ereport() like errtable().
 */
int
FencingErrReason(const char *reason)
{
	return err_generic_string(PG_DIAG_CONSTRAINT_NAME, reason);
}

/*
 * The HINT of a stale token (older than fence): the lock was lost.  A
 * token of the fence's own epoch (generation) may also be a rightful
 * holder's after the lock service lost its numbers, when every holder is
 * refused: raising the generation is what helps then.  A token of an
 * older epoch comes from before a raise of the generation (or a
 * failover): taking the lock again, and reading the generation after
 * taking it, is what helps.
 */
static int
StaleHint(const Fence *token, const Fence *fence)
{
	char	   *token_s = FenceToCString(token);

	if (token->epoch < fence->epoch)
		return errhint("Token %s is of an older epoch than the fence: the lock was lost, or the generation was raised since it was granted. Stop writing, take the lock again and read the generation after taking it.",
					   token_s);
	return errhint("The lock that issued token %s was lost: stop writing, re-acquire the lock and retry with the new token. If every holder is refused, even right after it takes the lock, the lock service lost its numbers: raise its generation.",
				   token_s);
}

/*
 * Raise SF001: token is not newer than fence.
 *
 * rel, when given, is reported in the error's table and schema fields;
 * scope_desc, when given, names the scope whose fence was lost to.
 *
 * A token equal to the fence (strict mode) is no lost lock: its holder may
 * still hold the lock and have written with the same grant in an earlier
 * transaction (or the fence was seeded with it).  Its message says that
 * the token was used already, and what to do instead.
 */
void
FencingReportStaleToken(const Fence *token, const Fence *fence, Relation rel,
				 const char *scope_desc)
{
	char	   *token_s = FenceToCString(token);
	char	   *fence_s = FenceToCString(fence);
	bool		equal = FenceCmp(token, fence) == 0;

	if (rel != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(equal ? FENCING_REASON_TOKEN_ALREADY_USED :
								  FENCING_REASON_STALE_TOKEN),
				 equal ?
				 errmsg("fence token %s for table \"%s\" was already used",
						token_s, RelationGetRelationName(rel)) :
				 errmsg("stale fence token %s for table \"%s\"",
						token_s, RelationGetRelationName(rel)),
				 scope_desc ?
				 errdetail("The %s has already accepted fence token %s.",
						   scope_desc, fence_s) :
				 errdetail("The row has already accepted fence token %s.",
						   fence_s),
				 equal ?
				 errhint("A strict table accepts a token in one transaction only: the one whose write it accepted first. Retry a write through an idempotency key, take the lock again for a new token, or protect the table with strict => false to let one grant write in several transactions.") :
				 StaleHint(token, fence),
				 errtable(rel)));
	else
		ereport(ERROR,
				(errcode(ERRCODE_STALE_FENCE_TOKEN),
				 FencingErrReason(equal ? FENCING_REASON_TOKEN_ALREADY_USED :
								  FENCING_REASON_STALE_TOKEN),
				 equal ?
				 errmsg("fence token %s was already used", token_s) :
				 errmsg("stale fence token %s", token_s),
				 errdetail("The resource has already accepted fence token %s.",
						   fence_s),
				 equal ?
				 errhint("fencing.advance() in strict mode accepts a token once. Retry a write through an idempotency key, take the lock again for a new token, or pass strict => false to accept the same token again.") :
				 StaleHint(token, fence)));
	pg_unreachable();
}

/*
 * Raise SF001 for a write to rel whose writer may not read what it lost
 * to (visibility.c): the message names its own token, DETAIL says that
 * the fence (and, in key or table scope, the key) is not shown, the HINT
 * is the same.  scope_name is NULL in row scope.
 */
void
FencingReportStaleTokenHidden(const Fence *token, Relation rel, const char *scope_name)
{
	char	   *token_s = FenceToCString(token);

	ereport(ERROR,
			(errcode(ERRCODE_STALE_FENCE_TOKEN),
			 FencingErrReason(FENCING_REASON_STALE_TOKEN),
			 errmsg("stale fence token %s for table \"%s\"",
					token_s, RelationGetRelationName(rel)),
			 scope_name ?
			 errdetail("A key of scope \"%s\" has already accepted a fence token that token %s does not beat; the key and that fence are shown only to roles that may read table \"%s\" past its row security policies.",
					   scope_name, token_s, RelationGetRelationName(rel)) :
			 errdetail("The row has already accepted a fence token that token %s does not beat; that fence is shown only to roles that may read table \"%s\" past its row security policies.",
					   token_s, RelationGetRelationName(rel)),
			 errhint("The lock that issued token %s was lost: stop writing, re-acquire the lock and retry with the new token.",
					 token_s),
			 errtable(rel)));
	pg_unreachable();
}

/*
 * Raise SF002 for a write to rel that needs a token and has none.
 *
 * what says which write it was, for example "UPDATE".
 */
void
FencingReportTokenRequired(Relation rel, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCE_TOKEN_REQUIRED),
			 errmsg("%s on table \"%s\" requires a fence token",
					what, RelationGetRelationName(rel)),
			 errdetail("Table \"%s\" is protected by fencing and this write carries no token.",
					   RelationGetRelationName(rel)),
			 errhint("Set the token with SET LOCAL fencing.token = '<epoch>:<counter>', or write the new token into the fence column."),
			 errtable(rel)));
	pg_unreachable();
}

/* Raise SF002 when fencing.token and the fence column disagree. */
void
FencingReportConflictingTokens(const Fence *setting, const Fence *column,
						Relation rel)
{
	ereport(ERROR,
			(errcode(ERRCODE_FENCE_TOKEN_REQUIRED),
			 errmsg("conflicting fence tokens for table \"%s\"",
					RelationGetRelationName(rel)),
			 errdetail("The setting fencing.token is %s but the write puts %s in the fence column.",
					   FenceToCString(setting), FenceToCString(column)),
			 errhint("Carry one token per write: either set fencing.token or write the fence column, not two different tokens."),
			 errtable(rel)));
	pg_unreachable();
}

/*
 * Raise SF005: the fences of scope_name are gone (its storage table, or
 * its row of the registry, while a table is protected into it).  Nothing
 * can rebuild them: the fences in the rows of its tables may be older than
 * the lost ones (a row deleted, a key advanced by another table of the
 * scope), so starting the scope again from them could let a stale writer
 * in.  Its tables refuse every write until the fences are back.
 */
void
FencingReportScopeStorageMissing(const char *scope_name, Oid relid)
{
	if (OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_FENCING_GUARD_ALTERED),
				 errmsg("the fence storage of scope \"%s\" of table \"%s\" is missing",
						scope_name, get_rel_name(relid)),
				 errdetail("The table is protected in this scope, but the scope's fences are gone; starting the scope again from the fences in the table's rows could let a token older than a lost fence write."),
				 errhint("Restore the scope's storage table and its row of fencing.scope_storage from a backup (pg_dump keeps both); until then writes to the table are refused.")));
	ereport(ERROR,
			(errcode(ERRCODE_FENCING_GUARD_ALTERED),
			 errmsg("the fence storage of scope \"%s\" is missing", scope_name),
			 errdetail("The scope's fences are gone; starting the scope again from the fences in its tables' rows could let a token older than a lost fence write."),
			 errhint("Restore the scope's storage table and its row of fencing.scope_storage from a backup (pg_dump keeps both); until then writes to its tables are refused.")));
}
