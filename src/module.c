/*-------------------------------------------------------------------------
 *
 * module.c
 *	  Module entry point of the fencing extension: the module magic and
 *	  _PG_init, which registers the settings, the caches' invalidation
 *	  callbacks, the integration with Citus and, when the library is
 *	  preloaded, the shared memory of the statistics.
 *
 * It stands above every module it initialises; none of them calls it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "citus.h"
#include "provenance.h"
#include "scopes.h"
#include "settings.h"
#include "statement.h"
#include "stats.h"

#ifdef PG_MODULE_MAGIC_EXT
PG_MODULE_MAGIC_EXT(.name = "fencing",.version = FENCING_LIBRARY_VERSION);
#else
PG_MODULE_MAGIC;
#endif

void		_PG_init(void);

/* Module load: register settings and hooks. */
void
_PG_init(void)
{
	/* settings and caches of the guard */
	FencingGucInit();
	FencingScopesInit();

	/* only the session's own commands change the token */
	FencingProvenanceInit();
	FencingStatementInit();

	/* Citus, behind the interface of cluster.h */
	FencingCitusInit();

	/* shared memory of the statistics */
	FencingStatsInit();

	/* a typo such as fencing.tokn must not pass for a setting */
	MarkGUCPrefixReserved("fencing");
}
