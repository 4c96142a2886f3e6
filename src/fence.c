/*-------------------------------------------------------------------------
 *
 * fence.c
 *	  The fencing.fence type: text and binary I/O, constructor and
 *	  accessors, comparison, hashing and the min/max support functions.
 *
 * The hash functions are part of the on-disk format of hash indexes and
 * of hash-partitioned tables: they are frozen from version 1.0 on and must
 * never change.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>
#include "common/hashfn.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "port/pg_bswap.h"
#include "utils/builtins.h"

#include "compat.h"
#include "fence.h"

PG_FUNCTION_INFO_V1(fence_in);
PG_FUNCTION_INFO_V1(fence_out);
PG_FUNCTION_INFO_V1(fence_recv);
PG_FUNCTION_INFO_V1(fence_send);
PG_FUNCTION_INFO_V1(fence_make);
PG_FUNCTION_INFO_V1(fence_from_int8);
PG_FUNCTION_INFO_V1(fence_from_int4);
PG_FUNCTION_INFO_V1(fence_epoch);
PG_FUNCTION_INFO_V1(fence_counter);
PG_FUNCTION_INFO_V1(fence_next);
PG_FUNCTION_INFO_V1(fence_next_epoch);
PG_FUNCTION_INFO_V1(fence_eq);
PG_FUNCTION_INFO_V1(fence_ne);
PG_FUNCTION_INFO_V1(fence_lt);
PG_FUNCTION_INFO_V1(fence_le);
PG_FUNCTION_INFO_V1(fence_gt);
PG_FUNCTION_INFO_V1(fence_ge);
PG_FUNCTION_INFO_V1(fence_cmp);
PG_FUNCTION_INFO_V1(fence_hash);
PG_FUNCTION_INFO_V1(fence_hash_extended);
PG_FUNCTION_INFO_V1(fence_larger);
PG_FUNCTION_INFO_V1(fence_smaller);

/* Lexicographic order: the epoch dominates the counter. */
int
FenceCmp(const Fence *a, const Fence *b)
{
	if (a->epoch != b->epoch)
		return a->epoch < b->epoch ? -1 : 1;
	if (a->counter != b->counter)
		return a->counter < b->counter ? -1 : 1;
	return 0;
}

/* Is c one of the white-space characters allowed around a fence? */
static inline bool
IsFenceSpace(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' ||
		c == '\v' || c == '\f';
}

/*
 * Parse one non-negative decimal part starting at *p, advancing *p.
 *
 * Returns false on a syntax error.  A well-formed part that is negative or
 * does not fit in int64 returns true with *out_of_range set, so that the
 * caller can tell the two apart.
 */
static bool
ParsePart(const char **p, int64 *result, bool *out_of_range)
{
	const char *s = *p;
	bool		negative = false;
	bool		nonzero = false;
	uint64		value = 0;

	if (*s == '-')
	{
		negative = true;
		s++;
	}
	if (*s < '0' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9')
	{
		int			digit = *s - '0';

		if (digit != 0)
			nonzero = true;
		if (value > ((uint64) PG_INT64_MAX - digit) / 10)
		{
			*out_of_range = true;
			value = 0;
		}
		else if (!*out_of_range)
			value = value * 10 + digit;
		s++;
	}
	/* "-0" is not a negative number, but it is not a fence either */
	if (negative && !nonzero)
		return false;
	if (negative)
		*out_of_range = true;
	*result = (int64) value;
	*p = s;
	return true;
}

/*
 * Parse the text form of a fence: "E:C" or a bare "C" (epoch 0), with
 * optional surrounding white space and nothing else.
 *
 * A pure function: returns false on bad syntax, true otherwise; when true
 * and *out_of_range is set, a part was negative or above the int64 maximum
 * and *result must not be used.
 */
bool
FencingParseFence(const char *str, Fence *result, bool *out_of_range)
{
	const char *p = str;
	int64		first;
	int64		second;

	*out_of_range = false;
	while (IsFenceSpace(*p))
		p++;
	if (!ParsePart(&p, &first, out_of_range))
		return false;
	if (*p == ':')
	{
		p++;
		if (!ParsePart(&p, &second, out_of_range))
			return false;
		result->epoch = first;
		result->counter = second;
	}
	else
	{
		result->epoch = 0;
		result->counter = first;
	}
	while (IsFenceSpace(*p))
		p++;
	if (*p != '\0')
		return false;
	return true;
}

/* Format a fence as "E:C" in palloc'd memory. */
char *
FenceToCString(const Fence *f)
{
	return psprintf(INT64_FORMAT ":" INT64_FORMAT, f->epoch, f->counter);
}

/* Return a palloc'd copy of a fence. */
Fence *
FenceCopy(const Fence *f)
{
	Fence	   *result = palloc(sizeof(Fence));

	*result = *f;
	return result;
}

/* Report a part that is negative or too large, from any constructor. */
static void
ReportPartOutOfRange(int64 epoch, int64 counter)
{
	ereport(ERROR,
			(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
			 errmsg("fence (" INT64_FORMAT ", " INT64_FORMAT ") is out of range",
					epoch, counter),
			 errdetail("The epoch and the counter of a fence must each be between 0 and " INT64_FORMAT ".",
					   PG_INT64_MAX)));
}

/* fence_in: text input, "E:C" or "C" */
Datum
fence_in(PG_FUNCTION_ARGS)
{
	char	   *str = PG_GETARG_CSTRING(0);
	Node	   *escontext = fcinfo->context;
	Fence		parsed;
	bool		out_of_range;

	if (!FencingParseFence(str, &parsed, &out_of_range))
		ereturn(escontext, (Datum) 0,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("invalid input syntax for type fence: \"%s\"", str),
				 errhint("A fence is written \"epoch:counter\" or \"counter\", for example \"3:42\".")));
	if (out_of_range)
		ereturn(escontext, (Datum) 0,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("value \"%s\" is out of range for type fence", str),
				 errdetail("The epoch and the counter of a fence must each be between 0 and " INT64_FORMAT ".",
						   PG_INT64_MAX)));
	PG_RETURN_FENCE_P(FenceCopy(&parsed));
}

/* fence_out: text output, always "E:C" */
Datum
fence_out(PG_FUNCTION_ARGS)
{
	PG_RETURN_CSTRING(FenceToCString(PG_GETARG_FENCE_P(0)));
}

/*
 * fence_recv: binary input, two int8 in network byte order.
 *
 * Rejects what text input rejects; never repairs a value.
 */
Datum
fence_recv(PG_FUNCTION_ARGS)
{
	StringInfo	buf = (StringInfo) PG_GETARG_POINTER(0);
	Fence	   *result = palloc(sizeof(Fence));

	result->epoch = pq_getmsgint64(buf);
	result->counter = pq_getmsgint64(buf);
	if (result->epoch < 0 || result->counter < 0)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("binary fence (" INT64_FORMAT ", " INT64_FORMAT ") is out of range",
						result->epoch, result->counter),
				 errdetail("The epoch and the counter of a fence must each be between 0 and " INT64_FORMAT ".",
						   PG_INT64_MAX)));
	PG_RETURN_FENCE_P(result);
}

/* fence_send: binary output, two int8 in network byte order */
Datum
fence_send(PG_FUNCTION_ARGS)
{
	Fence	   *f = PG_GETARG_FENCE_P(0);
	StringInfoData buf;

	pq_begintypsend(&buf);
	pq_sendint64(&buf, f->epoch);
	pq_sendint64(&buf, f->counter);
	PG_RETURN_BYTEA_P(pq_endtypsend(&buf));
}

/* fencing.fence(epoch, counter): the constructor */
Datum
fence_make(PG_FUNCTION_ARGS)
{
	int64		epoch = PG_GETARG_INT64(0);
	int64		counter = PG_GETARG_INT64(1);
	Fence	   *result;

	if (epoch < 0 || counter < 0)
		ReportPartOutOfRange(epoch, counter);
	result = palloc(sizeof(Fence));
	result->epoch = epoch;
	result->counter = counter;
	PG_RETURN_FENCE_P(result);
}

/* bigint -> fence: epoch 0 */
Datum
fence_from_int8(PG_FUNCTION_ARGS)
{
	int64		counter = PG_GETARG_INT64(0);
	Fence	   *result;

	if (counter < 0)
		ReportPartOutOfRange(0, counter);
	result = palloc(sizeof(Fence));
	result->epoch = 0;
	result->counter = counter;
	PG_RETURN_FENCE_P(result);
}

/* integer -> fence: epoch 0 */
Datum
fence_from_int4(PG_FUNCTION_ARGS)
{
	int32		counter = PG_GETARG_INT32(0);
	Fence	   *result;

	if (counter < 0)
		ReportPartOutOfRange(0, counter);
	result = palloc(sizeof(Fence));
	result->epoch = 0;
	result->counter = counter;
	PG_RETURN_FENCE_P(result);
}

/* fencing.epoch(fence) */
Datum
fence_epoch(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(PG_GETARG_FENCE_P(0)->epoch);
}

/* fencing.counter(fence) */
Datum
fence_counter(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(PG_GETARG_FENCE_P(0)->counter);
}

/* fencing.next(fence): the same epoch, counter + 1 */
Datum
fence_next(PG_FUNCTION_ARGS)
{
	Fence	   *f = PG_GETARG_FENCE_P(0);
	Fence	   *result;

	if (f->counter == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("fence counter out of range"),
				 errdetail("Fence %s has the largest counter there is.",
						   FenceToCString(f)),
				 errhint("Use fencing.next_epoch() to start a new epoch.")));
	result = FenceCopy(f);
	result->counter++;
	PG_RETURN_FENCE_P(result);
}

/* fencing.next_epoch(fence): epoch + 1, counter 0 */
Datum
fence_next_epoch(PG_FUNCTION_ARGS)
{
	Fence	   *f = PG_GETARG_FENCE_P(0);
	Fence	   *result;

	if (f->epoch == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("fence epoch out of range"),
				 errdetail("Fence %s has the largest epoch there is.",
						   FenceToCString(f))));
	result = palloc(sizeof(Fence));
	result->epoch = f->epoch + 1;
	result->counter = 0;
	PG_RETURN_FENCE_P(result);
}

#define FENCE_CMP_FUNC(name, op) \
Datum \
name(PG_FUNCTION_ARGS) \
{ \
	PG_RETURN_BOOL(FenceCmp(PG_GETARG_FENCE_P(0), PG_GETARG_FENCE_P(1)) op 0); \
}

/* The six comparison operators */
FENCE_CMP_FUNC(fence_eq, ==)
FENCE_CMP_FUNC(fence_ne, !=)
FENCE_CMP_FUNC(fence_lt, <)
FENCE_CMP_FUNC(fence_le, <=)
FENCE_CMP_FUNC(fence_gt, >)
FENCE_CMP_FUNC(fence_ge, >=)

/* btree support function 1 */
Datum
fence_cmp(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT32(FenceCmp(PG_GETARG_FENCE_P(0), PG_GETARG_FENCE_P(1)));
}

/*
 * Hash a fence from its two values, not its bytes, so that the result does
 * not depend on the machine's byte order.  Frozen: see the file header.
 */
static uint64
FenceHash64(const Fence *f, uint64 seed)
{
	uint64		parts[2];

	parts[0] = pg_hton64((uint64) f->epoch);
	parts[1] = pg_hton64((uint64) f->counter);
	return DatumGetUInt64(hash_any_extended((const unsigned char *) parts,
											sizeof(parts), seed));
}

/* hash support function 1 */
Datum
fence_hash(PG_FUNCTION_ARGS)
{
	/* hash_any_extended with seed 0 has hash_any's result in its low bits */
	PG_RETURN_INT32((int32) (uint32) FenceHash64(PG_GETARG_FENCE_P(0), 0));
}

/* hash support function 2 */
Datum
fence_hash_extended(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64((int64) FenceHash64(PG_GETARG_FENCE_P(0),
										(uint64) PG_GETARG_INT64(1)));
}

/* max() transition function */
Datum
fence_larger(PG_FUNCTION_ARGS)
{
	Fence	   *a = PG_GETARG_FENCE_P(0);
	Fence	   *b = PG_GETARG_FENCE_P(1);

	PG_RETURN_FENCE_P(FenceCmp(a, b) >= 0 ? a : b);
}

/* min() transition function */
Datum
fence_smaller(PG_FUNCTION_ARGS)
{
	Fence	   *a = PG_GETARG_FENCE_P(0);
	Fence	   *b = PG_GETARG_FENCE_P(1);

	PG_RETURN_FENCE_P(FenceCmp(a, b) <= 0 ? a : b);
}
