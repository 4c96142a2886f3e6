/*-------------------------------------------------------------------------
 *
 * fencing.c
 *	  Module entry point of the fencing extension: the module magic and
 *	  _PG_init, which registers the settings and, when the library is
 *	  preloaded, the shared memory of the statistics.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "fencing.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Module load: register settings and hooks. */
void
_PG_init(void)
{
	/* settings and caches of the guard */
	FencingGucInit();
	FencingScopesInit();
	FencingCitusTransferInit();

	/* shared memory of the statistics */
	FencingStatsInit();

	/* a typo such as fencing.tokn must not pass for a setting */
	MarkGUCPrefixReserved("fencing");
}
