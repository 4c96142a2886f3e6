/*-------------------------------------------------------------------------
 *
 * statement.c
 *	  The writing statement: tells the settings (guc.c) when a statement
 *	  that writes runs, so that nothing it evaluates can change the token
 *	  that its writes are judged by.
 *
 * A write's token must be the writer's.  PostgreSQL runs other roles' code
 * at many places during a write: column defaults, domain and table CHECKs,
 * generated columns, row security policies, index expressions, triggers,
 * rules, and the functions, casts and operators they call.  Rather than
 * guard each of those places, this module marks the one span that holds
 * them all: the executor's run and finish of a statement that writes
 * (INSERT, UPDATE, DELETE, MERGE, a data-modifying WITH, and the actions
 * that rules add to them), and COPY FROM.  The check hooks of the settings
 * refuse a change inside that span (55P02).  Triggers and rules run their
 * own statements inside it, so they are covered too; AFTER triggers fire
 * in ExecutorFinish, which is inside as well.
 *
 * The span is kept with PG_TRY, as pg_stat_statements keeps its nesting
 * level: an error leaves it, whatever catches the error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/copy.h"
#include "executor/executor.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"

#include "compat.h"
#include "settings.h"
#include "statement.h"

static ExecutorRun_hook_type prev_ExecutorRun = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;

/*
 * Does the statement write?  A SELECT with a data-modifying WITH writes;
 * so does a rule's action that does not set the command tag (it runs as
 * part of the statement the rule rewrote).
 */
static inline bool
StatementWrites(QueryDesc *queryDesc)
{
	return queryDesc->operation != CMD_SELECT ||
		queryDesc->plannedstmt->hasModifyingCTE ||
		!queryDesc->plannedstmt->canSetTag;
}

static void
RunExecutor(FENCING_EXECUTOR_RUN_PARAMS)
{
	if (prev_ExecutorRun)
		prev_ExecutorRun(FENCING_EXECUTOR_RUN_ARGS);
	else
		standard_ExecutorRun(FENCING_EXECUTOR_RUN_ARGS);
}

static void
FinishExecutor(QueryDesc *queryDesc)
{
	if (prev_ExecutorFinish)
		prev_ExecutorFinish(queryDesc);
	else
		standard_ExecutorFinish(queryDesc);
}

static void
RunUtility(PlannedStmt *pstmt, const char *queryString,
		   bool readOnlyTree, ProcessUtilityContext context,
		   ParamListInfo params, QueryEnvironment *queryEnv,
		   DestReceiver *dest, QueryCompletion *qc)
{
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/* A statement that reads only runs as it would without us. */
static void
FencingExecutorRun(FENCING_EXECUTOR_RUN_PARAMS)
{
	if (!StatementWrites(queryDesc))
	{
		RunExecutor(FENCING_EXECUTOR_RUN_ARGS);
		return;
	}
	FencingWriteBegin();
	PG_TRY();
	{
		RunExecutor(FENCING_EXECUTOR_RUN_ARGS);
	}
	PG_CATCH();
	{
		FencingWriteEnd(false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingWriteEnd(true);
}

/* AFTER triggers fire here: still inside the statement. */
static void
FencingExecutorFinish(QueryDesc *queryDesc)
{
	if (!StatementWrites(queryDesc))
	{
		FinishExecutor(queryDesc);
		return;
	}
	FencingWriteBegin();
	PG_TRY();
	{
		FinishExecutor(queryDesc);
	}
	PG_CATCH();
	{
		FencingWriteEnd(false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingWriteEnd(true);
}

/* COPY FROM writes without the executor's run: the same span around it. */
static void
FencingProcessUtility(PlannedStmt *pstmt, const char *queryString,
					  bool readOnlyTree, ProcessUtilityContext context,
					  ParamListInfo params, QueryEnvironment *queryEnv,
					  DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (!IsA(parsetree, CopyStmt) || !((CopyStmt *) parsetree)->is_from)
	{
		RunUtility(pstmt, queryString, readOnlyTree, context,
				   params, queryEnv, dest, qc);
		return;
	}
	FencingWriteBegin();
	PG_TRY();
	{
		RunUtility(pstmt, queryString, readOnlyTree, context,
				   params, queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		FencingWriteEnd(false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingWriteEnd(true);
}

/* Install the hooks; called from _PG_init. */
void
FencingStatementInit(void)
{
	prev_ExecutorRun = ExecutorRun_hook;
	ExecutorRun_hook = FencingExecutorRun;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = FencingExecutorFinish;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = FencingProcessUtility;
}
