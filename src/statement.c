/*-------------------------------------------------------------------------
 *
 * statement.c
 *	  The phases of a statement: hooks into parse analysis, the planner,
 *	  the executor, utility commands and the function manager, each of
 *	  which tells provenance.c what the backend is doing, so that only the
 *	  session's own commands change the token that writes are judged by.
 *
 * Every phase of a statement gets a frame (provenance.h):
 *
 *	planning, executor start and end, a reading run, a finish, a
 *	utility command ........................................ DENY
 *	the run and finish of a statement that writes (INSERT, UPDATE,
 *	DELETE, MERGE, a data-modifying WITH, a rule's added actions),
 *	COPY FROM ............................................. WRITE
 *	SET, SET LOCAL, RESET, DO ............................. ALLOW
 *	the run of a call by name (SELECT f($1), CALL p($1)) .. CALL: its
 *	arguments are DENY; the body of each function it names is ALLOW
 *	(the function manager hook); SELECT set_config('fencing.token',
 *	...) is ALLOW whole, being PostgreSQL's own function
 *
 * A statement counts as the session's own only where the session sent it
 * (no frame around it: the top level), inside an ALLOW frame (a routine
 * the session called by name runs statements of its own), or directly
 * under EXECUTE of a prepared statement the session sent.  Between
 * statements no frame is open, which is DENY too: binding a parameter's
 * value runs a domain's checks there.  Parse analysis has no hook before
 * it, only after it, where the settings are checked against the frames
 * (what a literal's input ran).
 *
 * A frame is kept with PG_TRY, as pg_stat_statements keeps its nesting
 * level: an error leaves it, whatever catches the error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "commands/copy.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/planner.h"
#include "parser/analyze.h"
#include "tcop/pquery.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/portal.h"

#include "compat.h"
#include "provenance.h"
#include "settings.h"
#include "statement.h"

static post_parse_analyze_hook_type prev_post_parse_analyze = NULL;
static planner_hook_type prev_planner = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorRun_hook_type prev_ExecutorRun = NULL;
static ExecutorFinish_hook_type prev_ExecutorFinish = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static needs_fmgr_hook_type prev_needs_fmgr_hook = NULL;
static fmgr_hook_type prev_fmgr_hook = NULL;

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

/*
 * Does set_config() name one of the guard's settings: a constant
 * fencing.token or fencing.bypass, or a parameter the session binds?
 */
static bool
SetsGuardSetting(FuncExpr *f)
{
	Node	   *name;

	if (f->funcid != F_SET_CONFIG || list_length(f->args) < 1)
		return false;
	name = linitial(f->args);
	if (IsA(name, Param))
		return true;
	if (IsA(name, Const) && !((Const *) name)->constisnull)
	{
		char	   *s = TextDatumGetCString(((Const *) name)->constvalue);

		return pg_strcasecmp(s, "fencing.token") == 0 ||
			pg_strcasecmp(s, "fencing.bypass") == 0;
	}
	return false;
}

/* What CallsByName() collects while it walks a statement's expressions */
typedef struct CallsContext
{
	Oid		   *callees;
	int			ncallees;
} CallsContext;

/*
 * Collect the functions an expression calls by name: explicitly, not as a
 * cast or behind an operator.
 */
static bool
CollectCalls(Node *node, CallsContext *cx)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr) &&
		((FuncExpr *) node)->funcformat == COERCE_EXPLICIT_CALL &&
		cx->ncallees < FENCING_MAX_CALLEES)
		cx->callees[cx->ncallees++] = ((FuncExpr *) node)->funcid;
	return expression_tree_walker(node, CollectCalls, cx);
}

/*
 * Is the statement a call by name: a SELECT (or VALUES) with no FROM,
 * WHERE or other clause, SELECT f($1), SELECT f($1) IS NOT NULL, SELECT
 * f($1), g($2), or SELECT * FROM f($1)?  Returns how many functions it
 * names (their OIDs in callees, at most FENCING_MAX_CALLEES), and in
 * *setter whether one of its columns is set_config() of a guard's setting
 * (PostgreSQL's own function, whose body no hook sees: the whole run is
 * then the session's, and whatever its arguments did, the value it sets
 * is the session's); 0 when it is no call by name.
 */
static int
CallsByName(PlannedStmt *stmt, Oid *callees, bool *setter)
{
	Plan	   *plan = stmt->planTree;
	CallsContext cx;

	*setter = false;
	if (stmt->commandType != CMD_SELECT || stmt->hasModifyingCTE ||
		!stmt->canSetTag || stmt->utilityStmt != NULL ||
		stmt->subplans != NIL || plan == NULL)
		return 0;

	cx.callees = callees;
	cx.ncallees = 0;
	if (IsA(plan, FunctionScan))
	{
		FunctionScan *fs = (FunctionScan *) plan;

		if (list_length(fs->functions) != 1 || fs->funcordinality ||
			plan->qual != NIL || plan->initPlan != NIL)
			return 0;
		(void) CollectCalls(((RangeTblFunction *) linitial(fs->functions))->funcexpr, &cx);
	}
	else
	{
		List	   *tlist = plan->targetlist;
		ListCell   *lc;

		if (IsA(plan, ProjectSet))
			plan = outerPlan(plan);
		if (plan == NULL || !IsA(plan, Result) || outerPlan(plan) != NULL ||
			((Result *) plan)->resconstantqual != NULL || plan->qual != NIL ||
			plan->initPlan != NIL)
			return 0;
		foreach(lc, tlist)
		{
			Node	   *expr = (Node *) lfirst_node(TargetEntry, lc)->expr;

			while (IsA(expr, RelabelType))
				expr = (Node *) ((RelabelType *) expr)->arg;
			if (IsA(expr, FuncExpr) &&
				((FuncExpr *) expr)->funcformat == COERCE_EXPLICIT_CALL &&
				SetsGuardSetting((FuncExpr *) expr))
				*setter = true;
		}
		(void) CollectCalls((Node *) tlist, &cx);
	}
	return cx.ncallees;
}

/*
 * Is a statement the session's own?  Inside frames, when the innermost
 * allows it (provenance.c).  With no frame open, only when it is the
 * statement the session sent: a statement of the portal PostgreSQL runs
 * for it, started or run at the top level.  Code that runs with no frame
 * open but is no such statement (a domain's check while a parameter is
 * bound, a deferred trigger at COMMIT) runs its statements as its own.
 */
static bool
SessionsOwn(PlannedStmt *stmt)
{
	if (FencingFrameDepth() > 0)
		return FencingFrameEligible();
	return ActivePortal != NULL &&
		(ActivePortal->status == PORTAL_ACTIVE || ActivePortal->status == PORTAL_READY ||
		 ActivePortal->status == PORTAL_DEFINED) &&
		list_member_ptr(ActivePortal->stmts, stmt);
}

/*
 * The phase to name for a frame of a statement that is not the session's
 * own, begun with no frame open: code that runs before the session's
 * statement does (a domain's check while a parameter is bound, a literal's
 * input while the statement is parsed).
 */
static inline const char *
PhaseOutside(const char *phase)
{
	return FencingFrameDepth() == 0 ? "is parsed or its parameters are bound" : phase;
}

/* After parse analysis: what a literal's input ran changed nothing. */
static void
FencingPostParseAnalyze(ParseState *pstate, Query *query, JumbleState *jstate)
{
	if (prev_post_parse_analyze)
		prev_post_parse_analyze(pstate, query, jstate);
	FencingCheckProvenance();
}

/* The planner folds functions, estimates with them, fills caches: DENY. */
static PlannedStmt *
FencingPlanner(Query *parse, const char *query_string, int cursorOptions,
			   ParamListInfo boundParams)
{
	PlannedStmt *result;
	int			depth = FencingFramePush(FENCING_FRAME_DENY, "is planned", false);

	PG_TRY();
	{
		if (prev_planner)
			result = prev_planner(parse, query_string, cursorOptions, boundParams);
		else
			result = standard_planner(parse, query_string, cursorOptions, boundParams);
	}
	PG_CATCH();
	{
		FencingFramePop(depth, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingFramePop(depth, true);
	return result;
}

/*
 * Executor start: DENY.  A call by name of the session's asks the
 * function manager for its callees' entries and exits first (fmgr_info()
 * decides that here, when the executor looks the functions up).
 */
static void
FencingExecutorStart(QueryDesc *queryDesc, int eflags)
{
	Oid			callees[FENCING_MAX_CALLEES];
	bool		setter;
	bool		own = SessionsOwn(queryDesc->plannedstmt);
	volatile int n = 0;
	int			depth;

	if (own)
		n = CallsByName(queryDesc->plannedstmt, callees, &setter);
	if (n > 0)
		FencingMarkCallees(callees, n);
	depth = FencingFramePush(FENCING_FRAME_DENY,
							 own ? "starts" : PhaseOutside("starts"), false);
	PG_TRY();
	{
		if (prev_ExecutorStart)
			prev_ExecutorStart(queryDesc, eflags);
		else
			standard_ExecutorStart(queryDesc, eflags);
	}
	PG_CATCH();
	{
		FencingFramePop(depth, false);
		if (n > 0)
			FencingUnmarkCallees(callees, n);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingFramePop(depth, true);
}

/*
 * Executor run: WRITE for a statement that writes, ALLOW for the
 * session's own set_config() of a guard's setting, CALL for a call by
 * name of the session's, DENY for every other read.
 */
static void
FencingExecutorRun(FENCING_EXECUTOR_RUN_PARAMS)
{
	Oid			callees[FENCING_MAX_CALLEES];
	bool		setter = false;
	volatile bool writes = StatementWrites(queryDesc);
	bool		own = !writes && SessionsOwn(queryDesc->plannedstmt);
	int			n = 0;
	int			depth;

	if (own)
		n = CallsByName(queryDesc->plannedstmt, callees, &setter);
	if (writes)
		depth = FencingFramePush(FENCING_FRAME_WRITE, "writes", false);
	else if (setter)
		depth = FencingFramePush(FENCING_FRAME_ALLOW, "sets a setting", true);
	else if (n > 0)
		depth = FencingFramePushCall("evaluates the arguments of a call", callees, n);
	else
		depth = FencingFramePush(FENCING_FRAME_DENY,
								 own ? "reads" : PhaseOutside("reads"), false);
	PG_TRY();
	{
		if (prev_ExecutorRun)
			prev_ExecutorRun(FENCING_EXECUTOR_RUN_ARGS);
		else
			standard_ExecutorRun(FENCING_EXECUTOR_RUN_ARGS);
	}
	PG_CATCH();
	{
		FencingFramePop(depth, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingFramePop(depth, true);
	if (writes)
		FencingRaiseDeferredError();
}

/* AFTER triggers fire here: still inside a statement that writes. */
static void
FencingExecutorFinish(QueryDesc *queryDesc)
{
	volatile bool writes = StatementWrites(queryDesc);
	int			depth;

	depth = writes ?
		FencingFramePush(FENCING_FRAME_WRITE, "writes", false) :
		FencingFramePush(FENCING_FRAME_DENY, "finishes", false);
	PG_TRY();
	{
		if (prev_ExecutorFinish)
			prev_ExecutorFinish(queryDesc);
		else
			standard_ExecutorFinish(queryDesc);
	}
	PG_CATCH();
	{
		FencingFramePop(depth, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingFramePop(depth, true);
	if (writes)
		FencingRaiseDeferredError();
}

/* Executor end: DENY; the callees of a call by name are forgotten. */
static void
FencingExecutorEnd(QueryDesc *queryDesc)
{
	Oid			callees[FENCING_MAX_CALLEES];
	bool		setter;
	volatile int n = 0;
	int			depth;

	/* the frames around are those its start saw: marked then, if at all */
	if (SessionsOwn(queryDesc->plannedstmt))
		n = CallsByName(queryDesc->plannedstmt, callees, &setter);
	depth = FencingFramePush(FENCING_FRAME_DENY, "ends", false);

	PG_TRY();
	{
		if (prev_ExecutorEnd)
			prev_ExecutorEnd(queryDesc);
		else
			standard_ExecutorEnd(queryDesc);
	}
	PG_CATCH();
	{
		FencingFramePop(depth, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingFramePop(depth, true);
	if (n > 0)
		FencingUnmarkCallees(callees, n);
}

/*
 * Would this utility command reset a guard's setting without asking its
 * check hook?  RESET ALL and DISCARD ALL assign the reset values directly.
 */
static bool
ResetsSettingsUnasked(Node *parsetree)
{
	bool		resets_all;

	if (IsA(parsetree, VariableSetStmt))
		resets_all = ((VariableSetStmt *) parsetree)->kind == VAR_RESET_ALL;
	else if (IsA(parsetree, DiscardStmt))
		resets_all = ((DiscardStmt *) parsetree)->target == DISCARD_ALL;
	else
		return false;
	return resets_all && (FencingTokenSettingRaw() != NULL || FencingBypass);
}

/*
 * Utility commands: SET, RESET and DO are ALLOW where the session sent
 * them; CALL is a call by name; COPY FROM writes; EXECUTE runs a prepared
 * statement as if the session sent it; everything else is DENY.
 */
static void
FencingProcessUtility(PlannedStmt *pstmt, const char *queryString,
					  bool readOnlyTree, ProcessUtilityContext context,
					  ParamListInfo params, QueryEnvironment *queryEnv,
					  DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	bool		own = FencingFrameDepth() > 0 ? FencingFrameEligible() :
		context == PROCESS_UTILITY_TOPLEVEL && SessionsOwn(pstmt);
	bool		writes = false;
	Oid			callee = InvalidOid;
	int			depth;

	switch (nodeTag(parsetree))
	{
		case T_VariableSetStmt:
		case T_DiscardStmt:
			if (!own && ResetsSettingsUnasked(parsetree))
				ereport(ERROR,
						(errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM),
						 errmsg("fencing.token and fencing.bypass cannot be reset here"),
						 errdetail("RESET ALL and DISCARD ALL would reset them without asking; only the session's own commands change them, not code that PostgreSQL runs on its own while it handles a statement."),
						 errhint("Reset the settings you mean one by one, or call RESET ALL as a statement of the session's own.")));
			depth = FencingFramePush(own ? FENCING_FRAME_ALLOW : FENCING_FRAME_DENY,
									 "runs a utility command", own);
			break;
		case T_DoStmt:
			depth = FencingFramePush(own ? FENCING_FRAME_ALLOW : FENCING_FRAME_DENY,
									 "runs a utility command", own);
			break;
		case T_CallStmt:
			if (own)
			{
				callee = ((CallStmt *) parsetree)->funcexpr->funcid;
				FencingMarkCallees(&callee, 1);
				depth = FencingFramePushCall("evaluates the arguments of a call", &callee, 1);
			}
			else
				depth = FencingFramePush(FENCING_FRAME_DENY, "runs a utility command", false);
			break;
		case T_ExecuteStmt:
			depth = FencingFramePush(FENCING_FRAME_DENY, "runs a utility command", own);
			break;
		case T_CopyStmt:
			writes = ((CopyStmt *) parsetree)->is_from;
			depth = writes ?
				FencingFramePush(FENCING_FRAME_WRITE, "writes", false) :
				FencingFramePush(FENCING_FRAME_DENY, "runs a utility command", false);
			break;
		default:
			depth = FencingFramePush(FENCING_FRAME_DENY, "runs a utility command", false);
			break;
	}

	PG_TRY();
	{
		if (prev_ProcessUtility)
			prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
	}
	PG_CATCH();
	{
		FencingFramePop(depth, false);
		if (OidIsValid(callee))
			FencingUnmarkCallees(&callee, 1);
		PG_RE_THROW();
	}
	PG_END_TRY();
	FencingFramePop(depth, true);
	if (OidIsValid(callee))
		FencingUnmarkCallees(&callee, 1);
	if (writes)
		FencingRaiseDeferredError();
}

/*
 * Is the statement running now one the hooks did not see begin (the
 * library was loaded while it ran), and a call by name of funcid alone?
 * For fencing.set_token() in a session without the preload: its first
 * call loads the library, which then sees no frame of the session's own.
 */
bool
FencingUnseenCallOf(Oid funcid)
{
	Oid			callees[FENCING_MAX_CALLEES];
	bool		setter;
	PlannedStmt *stmt;
	int			n;
	int			i;

	if (FencingFrameDepth() > 0 || ActivePortal == NULL ||
		ActivePortal->status != PORTAL_ACTIVE ||
		list_length(ActivePortal->stmts) != 1)
		return false;
	stmt = linitial_node(PlannedStmt, ActivePortal->stmts);
	n = CallsByName(stmt, callees, &setter);
	for (i = 0; i < n; i++)
		if (callees[i] != funcid)
			return false;
	return n > 0;
}

/* ------------------------------------------------------------------------
 * The function manager: the bodies of the functions a call names
 * ------------------------------------------------------------------------
 */

/*
 * For each function entry the hook sees, whether it pushed a frame, so
 * that the exit pops exactly what the entry pushed (entries and exits
 * nest; the hook also sees the functions other modules want it for).
 */
static bool *entry_pushed = NULL;
static int	nentries = 0;
static int	maxentries = 0;

/* Want the hook for the functions a statement of the session's names. */
static bool
FencingNeedsFmgrHook(Oid fn_oid)
{
	if (FencingCalleeMarked(fn_oid))
		return true;
	return prev_needs_fmgr_hook != NULL && prev_needs_fmgr_hook(fn_oid);
}

/*
 * A function's entry and exit.  The body of a function that the
 * innermost CALL frame names is ALLOW; any other entry pushes nothing.
 */
static void
FencingFmgrHook(FmgrHookEventType event, FmgrInfo *flinfo, Datum *private)
{
	if (event == FHET_START)
	{
		bool		push = FencingFrameCallee(flinfo->fn_oid);

		if (prev_fmgr_hook)
			prev_fmgr_hook(event, flinfo, private);
		if (nentries == maxentries)
		{
			int			n = maxentries == 0 ? 64 : maxentries * 2;

			entry_pushed = maxentries == 0 ?
				MemoryContextAlloc(TopMemoryContext, n * sizeof(bool)) :
				repalloc(entry_pushed, n * sizeof(bool));
			maxentries = n;
		}
		entry_pushed[nentries++] = push;
		if (push)
			(void) FencingFramePush(FENCING_FRAME_ALLOW, "calls a function", true);
		return;
	}
	/* FHET_END, FHET_ABORT */
	if (nentries > 0 && entry_pushed[--nentries])
		FencingFramePop(FencingFrameDepth() - 1, event == FHET_END);
	if (prev_fmgr_hook)
		prev_fmgr_hook(event, flinfo, private);
}

/* Install the hooks; called from _PG_init. */
void
FencingStatementInit(void)
{
	prev_post_parse_analyze = post_parse_analyze_hook;
	post_parse_analyze_hook = FencingPostParseAnalyze;
	prev_planner = planner_hook;
	planner_hook = FencingPlanner;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = FencingExecutorStart;
	prev_ExecutorRun = ExecutorRun_hook;
	ExecutorRun_hook = FencingExecutorRun;
	prev_ExecutorFinish = ExecutorFinish_hook;
	ExecutorFinish_hook = FencingExecutorFinish;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = FencingExecutorEnd;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = FencingProcessUtility;
	prev_needs_fmgr_hook = needs_fmgr_hook;
	needs_fmgr_hook = FencingNeedsFmgrHook;
	prev_fmgr_hook = fmgr_hook;
	fmgr_hook = FencingFmgrHook;
}
