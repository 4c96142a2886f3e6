/*-------------------------------------------------------------------------
 *
 * provenance.c
 *	  Where a token may come from: the frames of what the backend is doing,
 *	  and the token each frame keeps.
 *
 * A write is judged by the token the session itself set.  The session
 * sets fencing.token with its own commands (SET, SET LOCAL, RESET, a
 * routine it calls by name as its statement, DO, its connection options);
 * PostgreSQL also runs code on its own while it handles a statement, in
 * every phase: binding a parameter's value to its type runs a domain's
 * checks, parse analysis reads literals of composite and array types,
 * the planner folds immutable functions, calls a policy's function for a
 * selectivity estimate and loads a domain's constraints and an index's
 * expressions into its caches, the executor starts, runs and finishes.
 * None of that code may change the token, whoever owns it.
 *
 * Rather than list those places, the hooks of statement.c push a frame
 * for everything the backend does, and say of each frame whether it is
 * the session's own command (ALLOW) or not (DENY, WRITE, CALL).  Deny is
 * the default: between statements (parsing, binding) no frame is pushed,
 * and only an ALLOW frame lets the check hooks of the settings (guc.c)
 * accept a change.  That is the first wall.
 *
 * The second wall does not trust the first.  Every frame that is not
 * ALLOW remembers the settings it began with (its snapshot), and the
 * settings must still be those when it ends, when a frame begins inside
 * it, and when the guard judges a row in it; between statements the
 * settings must still be those the last statement left.  A change that
 * got past the check hooks by a route nobody listed (a setting assigned
 * without its check hook, a misjudged frame) is found there and refused
 * (55P02): no row is judged by it, and no later statement inherits it.
 * The settings move legitimately only inside ALLOW frames (the frame
 * around them then takes the new values when the ALLOW frame ends), when
 * a transaction or subtransaction ends and restores them, and from the
 * connection's options.
 *
 * A statement is "a call by name" (statement.c decides) when it only
 * calls functions: SELECT f($1), CALL p($1).  Its callees' bodies are the
 * session's own code: the function manager hook pushes an ALLOW frame
 * around each, if the call happens right inside the statement's CALL
 * frame; the callee's arguments, evaluated in the CALL frame itself, are
 * not.  Statements a callee runs get frames of their own again, so a
 * callee's own SET and set_config() count, and what its statements run on
 * their own does not.
 *
 * Frames also tell the guard who started a foreign key's action (the role
 * of the frame in which the action's trigger fired), and hold an error
 * the guard defers until a row has passed its row security checks.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/elog.h"
#include "utils/memutils.h"

#include "fence.h"
#include "provenance.h"

/* One frame: what the backend does, and what it must keep */
typedef struct FencingFrame
{
	FencingFrameKind kind;
	const char *phase;			/* for messages: "is planned", ... */
	bool		eligible;		/* a statement begun right inside may be a
								 * call by name */
	FencingTokenState snapshot; /* what must hold (all but ALLOW) */
	Oid			userid;			/* the role when the frame began */
	bool		in_fk_action;	/* begun inside a foreign key's action */
	int			ncallees;		/* CALL: the functions called by name */
	Oid			callees[FENCING_MAX_CALLEES];
} FencingFrame;

/* The frames, innermost last; in TopMemoryContext, grown as needed */
static FencingFrame *frames = NULL;
static int	nframes = 0;
static int	maxframes = 0;

/* The settings now, and what they must be between statements */
static FencingTokenState current = {false};
static FencingTokenState between = {false};

/*
 * The functions some statement calls by name: the function manager hook
 * is wanted for them (fmgr_info() asks when it looks a function up).
 */
#define MAX_MARKS	32
static Oid	marks[MAX_MARKS];
static int	nmarks = 0;

/* An error the guard deferred (TopTransactionContext), or NULL */
static ErrorData *deferred = NULL;

static bool
StatesEqual(const FencingTokenState *a, const FencingTokenState *b)
{
	if (a->bypass != b->bypass || a->has_token != b->has_token)
		return false;
	return !a->has_token || FenceCmp(&a->token, &b->token) == 0;
}

/* What the innermost frame must keep (between statements: the last's). */
static inline const FencingTokenState *
Expected(void)
{
	if (nframes == 0)
		return &between;
	if (frames[nframes - 1].kind == FENCING_FRAME_ALLOW)
		return &current;		/* the session may change them here */
	return &frames[nframes - 1].snapshot;
}

/*
 * The phase to name in a message: that of the outermost of the frames
 * that refuse a change, up from the innermost (a domain check's own
 * PERFORM inside an INSERT is the INSERT, which "writes").
 */
static const char *
Phase(void)
{
	int			i = nframes - 1;

	if (nframes == 0)
		return "is parsed or its parameters are bound";
	while (i > 0 && frames[i - 1].kind != FENCING_FRAME_ALLOW)
		i--;
	return frames[i].phase;
}

/*
 * Raise 55P02: the settings changed where they may not.  A second look
 * of the second wall: the check hooks refused every such change that
 * reached them, so this one came another way.
 */
static void
ReportChanged(const char *phase)
{
	ereport(ERROR,
			(errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM),
			 errmsg("fencing.token or fencing.bypass was changed while a statement %s",
					phase),
			 errdetail("A write is judged by the token the session itself set; code that PostgreSQL ran on its own while it handled a statement changed it."),
			 errhint("Set fencing.token with SET LOCAL, set_config(), fencing.set_token() or a routine of your own called by name, as a statement of its own, and call only code you trust.")));
}

/* Does the innermost frame still have what it must? 55P02 if not. */
static void
VerifyTop(void)
{
	if (!StatesEqual(&current, Expected()))
		ReportChanged(Phase());
}

/*
 * Push a frame of kind, described by phase for messages.  eligible: a
 * statement begun right inside it may be a call by name.  Returns the
 * depth to give FencingFramePop().  The frame begins with the settings
 * as they are, which must be those the frame around it keeps.
 */
int
FencingFramePush(FencingFrameKind kind, const char *phase, bool eligible)
{
	FencingFrame *f;
	int			depth = nframes;

	if (IsParallelWorker())
		return depth;
	VerifyTop();
	if (nframes == maxframes)
	{
		int			n = maxframes == 0 ? 32 : maxframes * 2;

		frames = maxframes == 0 ?
			MemoryContextAlloc(TopMemoryContext, n * sizeof(FencingFrame)) :
			repalloc(frames, n * sizeof(FencingFrame));
		maxframes = n;
	}
	f = &frames[nframes];
	f->kind = kind;
	f->phase = phase;
	f->eligible = eligible;
	f->snapshot = current;
	f->userid = GetUserId();
	f->in_fk_action = InNoForceRLSOperation();
	f->ncallees = 0;
	nframes++;
	return depth;
}

/* Push the CALL frame of a statement that calls callees by name. */
int
FencingFramePushCall(const char *phase, const Oid *callees, int ncallees)
{
	int			depth = FencingFramePush(FENCING_FRAME_CALL, phase, false);

	if (nframes > depth)
	{
		FencingFrame *f = &frames[nframes - 1];

		f->ncallees = Min(ncallees, FENCING_MAX_CALLEES);
		memcpy(f->callees, callees, f->ncallees * sizeof(Oid));
	}
	return depth;
}

/*
 * Pop the frames above depth.  completed is false when they are left by
 * an error (nothing to check then: the (sub)transaction's abort restores
 * the settings, and a deferred error of theirs is dropped).  A frame that
 * completed must still have what it began with; an ALLOW frame hands its
 * settings to the frame around it.
 */
void
FencingFramePop(int depth, bool completed)
{
	if (IsParallelWorker() || nframes <= depth)
		return;
	if (!completed)
	{
		nframes = depth;
		if (nframes == 0)
			nmarks = 0;
		FencingDropDeferredError();
		return;
	}
	while (nframes > depth)
	{
		FencingFrame *f = &frames[nframes - 1];
		const char *phase = f->phase;

		if (f->kind == FENCING_FRAME_ALLOW)
		{
			int			i;

			/*
			 * The settings the session's own command set hold for the
			 * frames it ran in: its CALL frame, an EXECUTE around it, up
			 * to the session's own frame before (an ALLOW frame never
			 * opens inside any other kind).
			 */
			nframes--;
			for (i = nframes - 1; i >= 0 && frames[i].kind != FENCING_FRAME_ALLOW; i--)
				frames[i].snapshot = current;
			if (i < 0)
				between = current;
			continue;
		}
		if (!StatesEqual(&current, &f->snapshot))
		{
			nframes = depth;
			ReportChanged(phase);
		}
		nframes--;
	}
	if (nframes == 0)
	{
		between = current;
		nmarks = 0;
	}
}

/* How many frames are open. */
int
FencingFrameDepth(void)
{
	return nframes;
}

/*
 * May a statement begun in the innermost frame be the session's own (a
 * call by name, SET)?  With no frame open, statement.c decides.
 */
bool
FencingFrameEligible(void)
{
	return nframes > 0 && (frames[nframes - 1].eligible ||
						   frames[nframes - 1].kind == FENCING_FRAME_ALLOW);
}

/* Is the innermost frame of kind? */
bool
FencingFrameTopIs(FencingFrameKind kind)
{
	return nframes > 0 && frames[nframes - 1].kind == kind;
}

/* Is funcid called by name by the statement whose CALL frame is innermost? */
bool
FencingFrameCallee(Oid funcid)
{
	FencingFrame *f;
	int			i;

	if (nframes == 0 || frames[nframes - 1].kind != FENCING_FRAME_CALL)
		return false;
	f = &frames[nframes - 1];
	for (i = 0; i < f->ncallees; i++)
		if (f->callees[i] == funcid)
			return true;
	return false;
}

/*
 * For the check hooks: NULL when the settings may change here (an ALLOW
 * frame), else the phase that refuses it, for the message.
 */
const char *
FencingChangeRefusedPhase(void)
{
	if (IsParallelWorker() || InitializingParallelWorker)
		return NULL;
	if (nframes > 0 && frames[nframes - 1].kind == FENCING_FRAME_ALLOW)
		return NULL;
	return Phase();
}

/*
 * The assign hooks tell the new settings.  legit: the change may move
 * what the frames keep, whatever frame is innermost (a restore at the end
 * of a transaction or subtransaction, a connection option, the values a
 * library load applies); any other change is checked against the frames
 * when they next look.
 */
void
FencingSettingsAssigned(const FencingTokenState *state, bool legit)
{
	current = *state;
	if (!legit)
		return;
	if (nframes == 0)
		between = current;
}

/*
 * The guard, before it judges a row: the settings must be those of the
 * innermost frame (55P02 if not).
 */
void
FencingCheckProvenance(void)
{
	if (IsParallelWorker())
		return;
	VerifyTop();
}

/*
 * The role that started the foreign key action the current write is part
 * of: the role of the innermost frame begun outside the action (the
 * action's own statements run as the referencing table's owner).  Without
 * one (a deferred action fired at COMMIT), the role of the session.
 */
Oid
FencingForeignKeyInitiator(void)
{
	int			i;

	for (i = nframes - 1; i >= 0; i--)
		if (!frames[i].in_fk_action)
			return frames[i].userid;
	return GetOuterUserId();
}

/* ------------------------------------------------------------------------
 * The functions called by name, for the function manager hook
 * ------------------------------------------------------------------------
 */

/* Want the function manager hook for callees (a statement starts). */
void
FencingMarkCallees(const Oid *callees, int ncallees)
{
	int			i;

	for (i = 0; i < ncallees && nmarks < MAX_MARKS; i++)
		marks[nmarks++] = callees[i];
}

/* Forget callees once (the statement ended). */
void
FencingUnmarkCallees(const Oid *callees, int ncallees)
{
	int			i;
	int			j;

	for (i = 0; i < ncallees; i++)
		for (j = nmarks - 1; j >= 0; j--)
			if (marks[j] == callees[i])
			{
				marks[j] = marks[--nmarks];
				break;
			}
}

/* Is the function manager hook wanted for funcid? */
bool
FencingCalleeMarked(Oid funcid)
{
	int			i;

	for (i = 0; i < nmarks; i++)
		if (marks[i] == funcid)
			return true;
	return false;
}

/* ------------------------------------------------------------------------
 * A deferred error
 * ------------------------------------------------------------------------
 */

/*
 * Keep the error being handled (called in a PG_CATCH block, in the
 * memory context the block began in) to raise it later: at the next row
 * the guard judges, at the end of the statement, at the latest before
 * the transaction commits.  The guard of a table whose row security
 * applies to the writer defers its refusal, so that the policy's WITH
 * CHECK answers first.
 */
void
FencingDeferError(void)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	ErrorData  *edata = CopyErrorData();

	MemoryContextSwitchTo(old);
	FlushErrorState();
	if (deferred == NULL)
		deferred = edata;
	else
		FreeErrorData(edata);	/* the first refusal is the one to raise */
}

/* Raise the deferred error, if any. */
void
FencingRaiseDeferredError(void)
{
	ErrorData  *edata = deferred;

	if (edata == NULL)
		return;
	deferred = NULL;
	ReThrowError(edata);
}

/* Is an error deferred? */
bool
FencingHasDeferredError(void)
{
	return deferred != NULL;
}

/* Drop the deferred error: its statement failed anyway. */
void
FencingDropDeferredError(void)
{
	deferred = NULL;			/* its memory goes with the transaction */
}

/* Before a commit, raise what was deferred; at an abort, drop it. */
static void
ProvenanceXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			FencingRaiseDeferredError();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			deferred = NULL;
			break;
	}
}

/* A subtransaction's abort drops an error deferred in it, with it. */
static void
ProvenanceSubXactCallback(SubXactEvent event,
						  SubTransactionId mySubid pg_attribute_unused(),
						  SubTransactionId parentSubid pg_attribute_unused(),
						  void *arg pg_attribute_unused())
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		deferred = NULL;
}

/* Register the transaction callbacks; called from _PG_init. */
void
FencingProvenanceInit(void)
{
	RegisterXactCallback(ProvenanceXactCallback, NULL);
	RegisterSubXactCallback(ProvenanceSubXactCallback, NULL);
}
