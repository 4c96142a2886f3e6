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
 * The token is fixed for a writing statement.  While a statement that
 * writes runs (statement.c tells us: FencingWriteBegin/End around its
 * executor run and COPY FROM), nothing it evaluates may change either
 * setting: a column DEFAULT, a domain or table CHECK, a generated column,
 * a policy, an index expression, a trigger or rule, and any function,
 * cast or operator they call all run inside that window, so one test at
 * the only door a setting has (its check hook) covers every route at
 * once.  A change made without the check hook (RESET ALL assigns reset
 * values directly) is noticed by the assign hooks: the guard refuses the
 * next row and the statement fails at its end, so no row is judged by,
 * and no later statement inherits, a token the writer did not set.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/memutils.h"

#include "compat.h"
#include "fence.h"
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
	TOKEN_WRONG_SOURCE			/* not set by the session itself */
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
 * Writing statements running in this backend (nested: a trigger's own
 * statements count again), and whether a setting was assigned another
 * value without its check hook while one ran.
 */
static int	write_depth = 0;
static bool changed_in_write = false;

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
 * Refuse (55P02) a new value of parameter name while a writing statement
 * runs; for check hooks.
 */
static bool
RefuseChangeInWrite(const char *name)
{
	GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
	GUC_check_errmsg("parameter \"%s\" cannot be changed while a statement writes", name);
	GUC_check_errdetail("A write is judged by the token in force when its statement began; code that the statement runs (a default, a check, a policy, a trigger, or a function any of them calls) cannot change it.");
	if (strcmp(name, "fencing.token") == 0)
		GUC_check_errhint("Set fencing.token in the writing session before the statement, with SET LOCAL, set_config() or fencing.set_token() as a statement of its own.");
	else
		GUC_check_errhint("Set %s in the writing session before the statement, with SET LOCAL as a statement of its own.",
						  name);
	return false;
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

	if (*newval == NULL || (*newval)[0] == '\0')
	{
		if (write_depth > 0 && TokenChanges(NULL))
			return RefuseChangeInWrite("fencing.token");
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
	/* the GUC machinery frees extra: allocate it the way it frees it */
	result = FencingGucMalloc(sizeof(Fence));
	if (result == NULL)
	{
		GUC_check_errcode(ERRCODE_OUT_OF_MEMORY);
		GUC_check_errmsg("out of memory");
		return false;
	}
	if (write_depth > 0 && TokenChanges(&parsed))
		return RefuseChangeInWrite("fencing.token");
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

	if (write_depth > 0 && *newval != FencingBypass)
		return RefuseChangeInWrite("fencing.bypass");
	if (!*newval)
		return true;
	foreign = ForeignSource(source);
	if (foreign == NULL)
		return true;
	GUC_check_errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM);
	GUC_check_errmsg("parameter \"fencing.bypass\" cannot be set by %s", foreign);
	GUC_check_errdetail("fencing.bypass lets writes through without a token: only a superuser's own session turns it on, with SET, SET LOCAL or its connection options.");
	HintForSource("fencing.bypass", source);
	return false;
}

/* Assign hook for fencing.token: publish the parsed value. */
static void
AssignFencingToken(const char *newval pg_attribute_unused(), void *extra)
{
	Fence	   *next = (Fence *) extra;

	if (write_depth > 0 && TokenChanges(next))
		changed_in_write = true;
	fencing_token_value = next;
	ForgetDroppedToken();
}

/* Assign hook for fencing.bypass: notice a change during a write. */
static void
AssignFencingBypass(bool newval, void *extra pg_attribute_unused())
{
	if (write_depth > 0 && newval != FencingBypass)
		changed_in_write = true;
}

/* Raise 55P02: a setting changed without its check hook during a write. */
static void
ReportChangedInWrite(void)
{
	changed_in_write = false;
	ereport(ERROR,
			(errcode(ERRCODE_CANT_CHANGE_RUNTIME_PARAM),
			 errmsg("fencing.token or fencing.bypass was changed while a statement wrote"),
			 errdetail("A write is judged by the token in force when its statement began; code that the statement ran changed it (RESET ALL, say)."),
			 errhint("Set fencing.token in the writing session before the statement, and call only code you trust from a writing statement.")));
}

/*
 * A writing statement begins: until the matching FencingWriteEnd(), no
 * setting of the guard may change.  Called by statement.c around the
 * executor's run of every statement that writes, and around COPY FROM.
 */
void
FencingWriteBegin(void)
{
	if (write_depth == 0)
		changed_in_write = false;
	write_depth++;
}

/*
 * A writing statement ends.  completed is false when it is left by an
 * error (nothing to check then); otherwise a change that slipped past the
 * check hooks fails the statement.
 */
void
FencingWriteEnd(bool completed)
{
	Assert(write_depth > 0);
	write_depth--;
	if (completed && changed_in_write)
		ReportChangedInWrite();
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
	if (unlikely(changed_in_write))
		ReportChangedInWrite();
	if (unlikely(dropped_token != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type fence: \"%s\"", dropped_token),
				 errdetail("fencing.token was set before the fencing library was loaded in this session, so the bad value could not be refused when it was set."),
				 errhint("Set fencing.token to a valid token, for example SET LOCAL fencing.token = '3:42'. With shared_preload_libraries = 'fencing', bad values are refused at SET.")));
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
	}
}
