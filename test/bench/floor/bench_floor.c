/*
 * bench_floor.c: a C trigger that does nothing, for the benchmark only.
 *
 * The floor of any BEFORE ROW guard: what PostgreSQL itself charges a
 * write for having a BEFORE ROW trigger in C (COPY inserts row by row
 * instead of in batches, UPDATE locks each row before it fires), with no
 * work of the trigger's own.  Core has no such trigger for INSERT
 * (suppress_redundant_updates_trigger refuses anything but UPDATE).
 * Not installed with the extension: test/bench builds it into the
 * private copy of PostgreSQL that a run uses.
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(bench_noop_trigger);

/* Return the row to write, unchanged. */
Datum
bench_noop_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "bench_noop_trigger: not called by trigger manager");
	if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		return PointerGetDatum(trigdata->tg_newtuple);
	return PointerGetDatum(trigdata->tg_trigtuple);
}
