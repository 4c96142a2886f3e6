/*-------------------------------------------------------------------------
 *
 * guc.c
 *	  The settings of the guard: fencing.token, the token of the writes of
 *	  a session or transaction, and fencing.bypass, the superuser's break
 *	  glass.
 *
 * fencing.token is parsed once, when it is set: a bad value is rejected
 * there (22P02 or 22003) and the guard reads the parsed fence for free on
 * every row.
 *
 * Both come from the session only.  A token is the writer's, granted with
 * its lock, and bypass is a superuser's decision for its own session: a
 * value from ALTER DATABASE/ROLE ... SET, a configuration file, the
 * server's command line or a function's SET clause is refused (55P02)
 * when it is made (PGC_S_TEST: the check of a value to be stored), and
 * one stored before the library was loaded is dropped with a WARNING when
 * it is applied (at library load or at backend start, with its real
 * source), so that a write without a session token still gets SF002.
 * The session's own: SET, SET LOCAL, set_config() and the connection's
 * options (PGC_S_CLIENT).  fencing.token is refused, too, when trigger
 * code sets it (pg_trigger_depth() > 0): a trigger runs code the writer
 * did not write, and a trigger that forwards a token writes it into the
 * fence column of its rows instead.  All of it is checked at set time,
 * never per row.
 *
 * Where a change may happen at all is the frames' business
 * (provenance.c): only the session's own commands (SET, a routine it
 * calls by name, DO) open a frame in which the check hooks accept a new
 * value; while PostgreSQL handles a statement on its own (binding its
 * parameters, planning it, starting, running and finishing it) they
 * refuse (55P02), and every change is told to the frames, which find one
 * that came past the check hooks by another route.
 *
 * Without the preload, a value set before the library was loaded in the
 * session (a placeholder: nobody could check who set it) is never taken
 * as a token: it is dropped when the library loads, and until the session
 * sets a token itself, or the transaction ends, a write fails with 55000
 * whose HINT names both remedies.  A connection option (PGC_S_CLIENT) is
 * the session's own and kept.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#include "utils/memutils.h"

#include "compat.h"
#include "fence.h"
#include "provenance.h"
#include "settings.h"

/* The text of fencing.token, owned by the GUC machinery */
static char *fencing_token_string = NULL;

/* The parsed fencing.token, or NULL when it is empty */
static Fence *fencing_token_value = NULL;

/* fencing.bypass */
bool		FencingBypass = false;

/*
 * A value of fencing.token set before this library was loaded in the
 * session is a placeholder nobody checked; when it turns out to be bad at
 * load time, PostgreSQL drops it with a WARNING.  We remember it, so that
 * writes fail (22P02) instead of going on as if no token had been set,
 * until the setting is assigned again (SET, RESET, DISCARD ALL).
 */
static char *dropped_token = NULL;

/*
 * Why the check hook of fencing.token last refused a value: a bad value
 * dropped at library load makes writes fail (dropped_token); a value from
 * the wrong place is only ignored, as the WARNING says.
 */
typedef enum TokenRefusal
{
	TOKEN_ACCEPTED,
	TOKEN_BAD_VALUE,			/* syntax or range */
	TOKEN_WRONG_SOURCE,			/* not set by the session itself */
	TOKEN_PLACEHOLDER			/* set before the library was loaded */
} TokenRefusal;

static TokenRefusal last_token_check = TOKEN_ACCEPTED;

/*
 * True while FencingGucInit() registers the settings: the values applied
 * then were set before the library was loaded, when nobody could tell
 * whether trigger code set them.
 */
static bool registering = false;

static void ForgetDroppedToken(void);

/*
 * A placeholder value of fencing.token was dropped when the library was
 * loaded in this transaction: writes fail (55000) until the session sets
 * a token or the transaction ends.
 */
static bool placeholder_dropped = false;

/*
 * The check hook accepted a value for a reason of its own (a connection
 * option), not because a frame of the session's own allows it: the
 * assign hook that follows tells the frames it is legitimate.
 */
static bool approved_by_source = false;

/* fencing.token's entry in the settings, for its stack (set at load) */
static struct config_generic *token_guc = NULL;

/*
 * Where a value from source comes from, for messages; NULL when it is
 * the session's own (SET, SET LOCAL, set_config(), a function's SET
 * clause when called, the connection's options) or a built-in default.
 */
static const char *
ForeignSource(GucSource source)
{
	switch (source)
	{
		case PGC_S_ENV_VAR:
		case PGC_S_ARGV:
			return "the server's command line or environment";
		case PGC_S_FILE:
			return "postgresql.conf or ALTER SYSTEM";
		case PGC_S_GLOBAL:
			return "ALTER ROLE ALL ... SET";
		case PGC_S_DATABASE:
			return "ALTER DATABASE ... SET";
		case PGC_S_USER:
			return "ALTER ROLE ... SET";
		case PGC_S_DATABASE_USER:
			return "ALTER ROLE ... IN DATABASE ... SET";
		case PGC_S_TEST:
			return "ALTER DATABASE ... SET, ALTER ROLE ... SET or a function's SET clause";
		default:
			return NULL;
	}
}

/* The HINT for a value of parameter name refused because of its source. */
static void
HintForSource(const char *name, GucSource source)
{
	switch (source)
	{
		case PGC_S_FILE:
			GUC_check_errhint("Set it in the writing session, and remove it from the configuration files: ALTER SYSTEM RESET %s, and postgresql.conf by hand.",
							  name);
			break;
		case PGC_S_ENV_VAR:
		case PGC_S_ARGV:
			GUC_check_errhint("Remove %s from the server's command line.", name);
			break;
		case PGC_S_TEST:
			GUC_check_errhint("Set it in the writing session, for example SET LOCAL %s = %s.",
							  name,
							  strcmp(name, "fencing.token") == 0 ? "'3:42'" : "on");
			break;
		default:
			GUC_check_errhint("Remove the stored setting with ALTER DATABASE ... RESET %s or ALTER ROLE ... RESET %s (the view pg_db_role_setting lists them).",
							  name, name);
			break;
	}
}

/*
 * Refuse (55P02) a new value of parameter name where the session's own
 * command did not ask for it: while a statement is in phase (provenance.c:
 * "writes", "is planned", ...); for check hooks.
 */
static bool
RefuseChange(const char *name, const char *phase)
{
	GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
	GUC_check_errmsg("parameter \"%s\" cannot be changed while a statement %s", name, phase);
	if (strcmp(phase, "writes") == 0)
		GUC_check_errdetail("A write is judged by the token in force when its statement began; code that the statement runs (a default, a check, a policy, a trigger, or a function any of them calls) cannot change it.");
	else
		GUC_check_errdetail("Only the session's own commands change it: SET, set_config() or fencing.set_token() as a statement of its own, or a routine the session calls by name. Code that PostgreSQL runs on its own while it handles a statement (a domain's check, a default, a policy, an index expression, a function the planner folds) cannot.");
	if (strcmp(name, "fencing.token") == 0)
		GUC_check_errhint("Set fencing.token in the writing session before the statement, with SET LOCAL, set_config() or fencing.set_token() as a statement of its own.");
	else
		GUC_check_errhint("Set %s in the writing session before the statement, with SET LOCAL as a statement of its own.",
						  name);
	return false;
}

/*
 * May a setting change now, from source?  NULL when it may, else the
 * phase that refuses it.  The values a library load applies and the
 * connection's options are the session's own; anything else needs a
 * frame of the session's own (provenance.c).
 */
static const char *
ChangeRefused(GucSource source)
{
	if (registering || InitializingParallelWorker || source == PGC_S_TEST)
		return NULL;			/* PGC_S_TEST only checks a value to store */
	if (source == PGC_S_CLIENT || source == PGC_S_DEFAULT)
	{
		approved_by_source = true;
		return NULL;
	}
	return FencingChangeRefusedPhase();
}

/* Would fencing.token become next (NULL: not set) from what it is now? */
static bool
TokenChanges(const Fence *next)
{
	if (next == NULL || fencing_token_value == NULL)
		return next != fencing_token_value;
	return FenceCmp(next, fencing_token_value) != 0;
}

/* How deep in triggers this backend runs, as pg_trigger_depth() says. */
static int
TriggerDepth(void)
{
	LOCAL_FCINFO(fcinfo, 0);

	InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
	return DatumGetInt32(pg_trigger_depth(fcinfo));
}

/*
 * Check hook for fencing.token: refuse a value that the writing session
 * did not set, parse, or reject with the right SQLSTATE.
 */
static bool
CheckFencingToken(char **newval, void **extra, GucSource source)
{
	Fence		parsed;
	bool		out_of_range;
	Fence	   *result;
	const char *foreign;
	const char *phase;

	approved_by_source = false;
	if (*newval == NULL || (*newval)[0] == '\0')
	{
		if (TokenChanges(NULL) && (phase = ChangeRefused(source)) != NULL)
			return RefuseChange("fencing.token", phase);
		*extra = NULL;
		last_token_check = TOKEN_ACCEPTED;
		return true;
	}
	foreign = ForeignSource(source);
	if (foreign != NULL)
	{
		last_token_check = TOKEN_WRONG_SOURCE;
		GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
		GUC_check_errmsg("parameter \"fencing.token\" cannot be set by %s", foreign);
		GUC_check_errdetail("fencing.token is the token of the session's own writes, granted with its lock: only the writing session sets it, with SET, SET LOCAL, set_config() or its connection options.");
		HintForSource("fencing.token", source);
		return false;
	}
	if (!registering && TriggerDepth() > 0)
	{
		last_token_check = TOKEN_WRONG_SOURCE;
		GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
		GUC_check_errmsg("parameter \"fencing.token\" cannot be set by trigger code");
		GUC_check_errdetail("The token that the fencing guard judges is the writer's; a trigger runs code that the writer did not write.");
		GUC_check_errhint("Set fencing.token in the writing session before the statement. A trigger that forwards a token writes it into the fence column of the rows it writes.");
		return false;
	}
	last_token_check = TOKEN_BAD_VALUE;
	if (!FencingParseFence(*newval, &parsed, &out_of_range))
	{
		GUC_check_errcode(ERRCODE_INVALID_TEXT_REPRESENTATION);
		GUC_check_errmsg("invalid input syntax for type fence: \"%s\"", *newval);
		GUC_check_errhint("A fence is written \"epoch:counter\" or \"counter\", for example \"3:42\".");
		return false;
	}
	if (out_of_range)
	{
		GUC_check_errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE);
		GUC_check_errmsg("value \"%s\" is out of range for type fence", *newval);
		GUC_check_errdetail("The epoch and the counter of a fence must each be between 0 and " INT64_FORMAT ".",
							PG_INT64_MAX);
		return false;
	}
	if (registering && source != PGC_S_CLIENT && source != PGC_S_DEFAULT &&
		!process_shared_preload_libraries_in_progress)
	{
		/* a placeholder: whoever set it, nobody checked (55000 at writes) */
		last_token_check = TOKEN_PLACEHOLDER;
		GUC_check_errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
		GUC_check_errmsg("parameter \"fencing.token\" was set before the fencing library was loaded in this session");
		GUC_check_errdetail("A value set before the library was loaded could have been set by any code, so it is not taken as a token.");
		GUC_check_errhint("Preload the library with shared_preload_libraries = 'fencing', or set the token with SELECT fencing.set_token(...), which loads it.");
		return false;
	}
	if (TokenChanges(&parsed) && (phase = ChangeRefused(source)) != NULL)
		return RefuseChange("fencing.token", phase);
	/* the GUC machinery frees extra: allocate it the way it frees it */
	result = FencingGucMalloc(sizeof(Fence));
	if (result == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		GUC_check_errmsg("out of memory");
		return false;
	}
	*result = parsed;
	*extra = result;
	last_token_check = TOKEN_ACCEPTED;
	return true;
}

/* Check hook for fencing.bypass: on only by the session itself. */
static bool
CheckFencingBypass(bool *newval, void **extra pg_attribute_unused(),
				   GucSource source)
{
	const char *foreign;
	const char *phase;

	approved_by_source = false;
	foreign = *newval ? ForeignSource(source) : NULL;
	if (foreign == NULL)
	{
		if (*newval != FencingBypass && (phase = ChangeRefused(source)) != NULL)
			return RefuseChange("fencing.bypass", phase);
		return true;
	}
	GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
	GUC_check_errmsg("parameter \"fencing.bypass\" cannot be set by %s", foreign);
	GUC_check_errdetail("fencing.bypass lets writes through without a token: only a superuser's own session turns it on, with SET, SET LOCAL or its connection options.");
	HintForSource("fencing.bypass", source);
	return false;
}

/*
 * Tell the frames the settings (provenance.c).  A change is legitimate
 * for them outright when the library applies the values it found at load,
 * when a transaction or subtransaction ends and restores the values it
 * began with, and when the check hook accepted it by its source (a
 * connection option); any other change is checked against the frames.
 */
static void
TellFrames(const Fence *token, bool bypass)
{
	FencingTokenState state;
	bool		legit = registering || InitializingParallelWorker ||
		!IsTransactionState() || approved_by_source;

	approved_by_source = false;
	state.has_token = token != NULL;
	if (token != NULL)
		state.token = *token;
	state.bypass = bypass;
	FencingSettingsAssigned(&state, legit);
}

/* Assign hook for fencing.token: publish the parsed value. */
static void
AssignFencingToken(const char *newval pg_attribute_unused(), void *extra)
{
	fencing_token_value = (Fence *) extra;
	if (!registering)
	{
		ForgetDroppedToken();
		placeholder_dropped = false;
	}
	TellFrames(fencing_token_value, FencingBypass);
}

/* Assign hook for fencing.bypass: tell the frames. */
static void
AssignFencingBypass(bool newval, void *extra pg_attribute_unused())
{
	TellFrames(fencing_token_value, newval);
}

/* Forget a dropped placeholder value: the setting was assigned since. */
static void
ForgetDroppedToken(void)
{
	if (dropped_token != NULL)
	{
		pfree(dropped_token);
		dropped_token = NULL;
	}
}

/*
 * The parsed fencing.token of this session, or NULL when it is not set.
 * Raises 22P02 when a bad value was set before the library was loaded.
 */
const Fence *
FencingTokenSetting(void)
{
	/* the settings of the frame the write runs in (55P02 if not) */
	FencingCheckProvenance();
	if (unlikely(placeholder_dropped))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("fencing.token was set before the fencing library was loaded in this session"),
				 errdetail("A value set before the library was loaded could have been set by any code the session ran, so it is never taken as a token; this write would have been judged by it."),
				 errhint("Preload the library with shared_preload_libraries = 'fencing', or set the token with SELECT fencing.set_token(...), which loads it.")));
	if (unlikely(dropped_token != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type fence: \"%s\"", dropped_token),
				 errdetail("fencing.token was set before the fencing library was loaded in this session, so the bad value could not be refused when it was set."),
				 errhint("Set fencing.token to a valid token, for example SET LOCAL fencing.token = '3:42'. With shared_preload_libraries = 'fencing', bad values are refused at SET.")));
	return fencing_token_value;
}

/*
 * A placeholder dropped in a transaction stops mattering when it ends: a
 * SET LOCAL would have ended with it, and a session's SET is gone (the
 * next write without a token gets SF002, whose HINT says how to set one).
 */
static void
GucXactCallback(XactEvent event, void *arg pg_attribute_unused())
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE)
		placeholder_dropped = false;
}

/*
 * Was the token in force set for the session rather than for the
 * transaction: SET without LOCAL, set_config(..., false), a connection
 * option, rather than SET LOCAL or fencing.set_token()?  Such a value
 * stays on the connection after the transaction, and behind a pooler the
 * next client writes with it.
 */
bool
FencingTokenSetForSession(void)
{
	if (token_guc == NULL || fencing_token_value == NULL)
		return false;
	/* no stack: set in an earlier transaction, or at connection */
	return token_guc->stack == NULL || token_guc->stack->state == GUC_SET;
}

/* The parsed fencing.token with no check at all (NULL: not set). */
const Fence *
FencingTokenSettingRaw(void)
{
	return fencing_token_value;
}

/* Register the settings of the guard; called from _PG_init. */
void
FencingGucInit(void)
{
	const char *pending = GetConfigOption("fencing.token", true, false);
	char	   *placeholder = NULL;

	if (pending != NULL && pending[0] != '\0')
		placeholder = MemoryContextStrdup(TopMemoryContext, pending);

	registering = true;
	DefineCustomStringVariable("fencing.token",
							   "The fence token carried by this session's writes to protected tables.",
							   "Set it with SET LOCAL for one transaction: SET LOCAL fencing.token = '3:42'.",
							   &fencing_token_string,
							   "",
							   PGC_USERSET,
							   0,
							   CheckFencingToken,
							   AssignFencingToken,
							   NULL);

	DefineCustomBoolVariable("fencing.bypass",
							 "Lets writes to protected tables through without a token (break glass).",
							 "Superuser only; every write let through is counted in fencing.stats and logged.",
							 &FencingBypass,
							 false,
							 PGC_SUSET,
							 0,
							 CheckFencingBypass,
							 AssignFencingBypass,
							 NULL);
	registering = false;

	/*
	 * A placeholder value that did not survive the check hook: a bad one
	 * makes writes fail; one from the wrong place (ALTER DATABASE ... SET,
	 * say) was dropped with a WARNING and counts as not set.
	 */
	if (placeholder != NULL)
	{
		if (fencing_token_value == NULL && last_token_check == TOKEN_BAD_VALUE)
			dropped_token = placeholder;
		else
			pfree(placeholder);
		if (fencing_token_value == NULL && last_token_check == TOKEN_PLACEHOLDER)
			placeholder_dropped = true;
	}
	token_guc = FencingFindGuc("fencing.token");
	RegisterXactCallback(GucXactCallback, NULL);
}
