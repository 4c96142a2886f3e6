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
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/guc.h"
#include "utils/memutils.h"

#include "fencing.h"

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

static void ForgetDroppedToken(void);

/* Check hook for fencing.token: parse, or reject with the right SQLSTATE. */
static bool
CheckFencingToken(char **newval, void **extra,
				  GucSource source pg_attribute_unused())
{
	Fence		parsed;
	bool		out_of_range;
	Fence	   *result;

	if (*newval == NULL || (*newval)[0] == '\0')
	{
		*extra = NULL;
		return true;
	}
	if (!ParseFence(*newval, &parsed, &out_of_range))
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
	*result = parsed;
	*extra = result;
	return true;
}

/* Assign hook for fencing.token: publish the parsed value. */
static void
AssignFencingToken(const char *newval pg_attribute_unused(), void *extra)
{
	fencing_token_value = (Fence *) extra;
	ForgetDroppedToken();
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
							 NULL,
							 NULL,
							 NULL);

	/* a placeholder value that did not survive the check hook */
	if (placeholder != NULL)
	{
		if (fencing_token_value == NULL)
			dropped_token = placeholder;
		else
			pfree(placeholder);
	}
}
