# Makefile for the fencing extension (PGXS)
#
#   make                    build
#   make install            install into the server found by pg_config
#   make installcheck       regression and isolation tests against a running
#                           server (PGHOST, PGPORT, PGUSER) that preloads fencing;
#                           leaves contrib_regression and isolation_regression
#   make check-temp         the same on temporary servers that pg_regress starts
#                           with fencing preloaded (after make install; no server)
#   make prove_installcheck the Perl TAP tests (test/t/*.pl; each starts its
#                           own servers; after make install)
#   make demo               the incident, with and without fencing (test/demo.sh)
#   make test               every test suite on throwaway clusters, as root
#                           (test/check.sh; see test/README.md)

EXTENSION = fencing
MODULE_big = fencing
# One object per concern; each feature adds its own line below.
OBJS_CORE = src/module.o src/cluster.o src/extension.o src/fence.o src/advance.o src/errors.o

OBJS_GUARD = src/guc.o src/provenance.o src/statement.o src/protect.o src/guard_config.o src/scope_storage.o src/scopes.o \
	src/scopes_1_0.o src/guard.o src/meter.o src/ddl_guard.o src/protection.o src/trigger_code.o

# who may read keys and fences; dropping the extension with its storage;
# the extension's own tables under logical replication
OBJS_ROLES = src/visibility.o src/drop.o src/replication.o

OBJS_STATS = src/stats.o

OBJS_IDEM = src/idempotency.o

OBJS_DIRECT = src/direct.o

OBJS_LEASE = src/lease.o

OBJS_CITUS = src/citus.o src/citus_transfer.o src/citus_shard.o

OBJS_LOCKSVC = src/lock_services.o

OBJS = $(OBJS_CORE) $(OBJS_GUARD) $(OBJS_STATS) $(OBJS_IDEM) $(OBJS_DIRECT) $(OBJS_LEASE) $(OBJS_CITUS) \
	$(OBJS_ROLES) $(OBJS_LOCKSVC)

# the version the library reports in its module magic (PostgreSQL 18)
EXTVERSION := $(shell sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" $(dir $(lastword $(MAKEFILE_LIST)))fencing.control)
PG_CPPFLAGS += -DFENCING_LIBRARY_VERSION='"$(EXTVERSION)"'

# 1.0 is released and frozen: every SQL change ships in an update script
DATA = sql/fencing--1.0.sql sql/fencing--1.0--1.1.sql sql/fencing--1.1--1.2.sql sql/fencing--1.2--1.3.sql sql/fencing--1.3--1.4.sql

# pg_regress: sql/NAME.sql against expected/NAME.out
REGRESS_CORE = fence_type fence_input advance

REGRESS_GUARD = guard_row guard_key guard_key_identity guard_scope_owner guard_one_token guard_bulk \
	guard_paths guard_privileges guard_bypass guard_ddl \
	guard_ddl_triggers guard_ddl_columns guard_ddl_legacy guard_seed \
	guard_trigger_owner guard_ddl_types token_source guard_write_code guard_trigger_code_later \
	guard_first_meter

REGRESS_STATS = stats stats_forget

REGRESS_IDEM = idem_basic idem_errors idem_lease idem_security idem_stats idem_owner idem_update idem_direct

REGRESS_LEASE = lease guard_lease lease_security lease_stats lease_update lease_next

REGRESS_LOCKSVC = lock_services sf001_reasons

REGRESS_UPDATE = update_from_1_0_keys update_from_1_0_security update_to_1_3_recheck update_to_1_4_recheck

# who may read keys, who may pin the extension
REGRESS_ROLES = scope_visibility scope_pinning scope_health scope_row_security

REGRESS = $(REGRESS_CORE) $(REGRESS_GUARD) $(REGRESS_STATS) $(REGRESS_IDEM) $(REGRESS_LEASE) \
	$(REGRESS_LOCKSVC) $(REGRESS_UPDATE) $(REGRESS_ROLES)
REGRESS_OPTS = --load-extension=fencing

# isolation tester: test/isolation/specs/NAME.spec against
# test/isolation/expected/NAME.out
ISOLATION_CORE = advance_race advance_race3 advance_race_rr

ISOLATION_GUARD = guard_row_race guard_key_race guard_scope_race stats_forget_race detach_rr first_meter_transfer \
	ddl_guard_race ddl_guard_locks seed_protect_race seed_attach_race scope_lifecycle_rr \
	trigger_owner_race checks_before_locks

ISOLATION_IDEM = idem_begin_race idem_resume_race idem_spi_race idem_owner_race idem_claim_race idem_claim_spi_race idem_owner_handover

ISOLATION_LEASE = lease_acquire_race lease_renew_race lease_owner_race

ISOLATION_UPDATE = update_1_0_scope_copy_race

ISOLATION = $(ISOLATION_CORE) $(ISOLATION_GUARD) $(ISOLATION_IDEM) $(ISOLATION_LEASE) $(ISOLATION_UPDATE)
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=fencing

# installcheck is defined below: PGXS's, with a check first and a note last
NO_INSTALLCHECK = 1

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# --- packaging: release archive, installcheck's preload ---------------------
# make dist: fencing-<META.json version>.zip of the committed tree (git
# archive of HEAD, so nothing generated), for PGXN; DISTDIR says where.
# installcheck runs the statistics tests, which need the library preloaded:
# check the server under test first rather than report their failures.
DISTDIR ?= .

.PHONY: dist fencing-preload-check

dist:
	@v=$$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' '$(srcdir)/META.json') || exit 1; \
	git -C '$(srcdir)' diff --quiet HEAD -- || echo 'note: uncommitted changes are not in the archive' >&2; \
	git -C '$(srcdir)' archive --format=zip --prefix=fencing-$$v/ -o "$(abspath $(DISTDIR))/fencing-$$v.zip" HEAD && \
	echo "$(abspath $(DISTDIR))/fencing-$$v.zip"

# installcheck: PGXS's recipe (NO_INSTALLCHECK keeps PGXS from defining
# it), after the preload check, and then a note, also after a failure, of
# the databases pg_regress leaves on the server, as it does for every
# extension: contrib_regression and isolation_regression stay for a look
# at the results, and the next run drops and creates them anew.  Nothing
# else is left or changed: the tests drop the roles and databases they
# create, and none resets fencing's statistics (test/README.md).
fencing_installcheck_note = \
	echo "note: left on the server, as pg_regress leaves them: the database(s) $(strip $(1))"; \
	echo "note: (to look at the results; the next make installcheck drops and creates them anew)."; \
	echo "note: nothing else was kept or reset.  To remove them: $(foreach d,$(1),dropdb $(d);)"

installcheck: fencing-preload-check submake $(REGRESS_PREP)
ifdef REGRESS
	@$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS) || \
	{ $(call fencing_installcheck_note,$(CONTRIB_TESTDB)); exit 1; }
endif
ifdef ISOLATION
	@$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION) || \
	{ $(call fencing_installcheck_note,$(if $(REGRESS),$(CONTRIB_TESTDB)) $(ISOLATION_TESTDB)); exit 1; }
endif
	@$(call fencing_installcheck_note,$(if $(REGRESS),$(CONTRIB_TESTDB)) $(if $(ISOLATION),$(ISOLATION_TESTDB)))

fencing-preload-check:
	@pl=$$('$(bindir)/psql' -X -A -t -q -d postgres -c 'SHOW shared_preload_libraries') || exit 1; \
	case ",$$(echo "$$pl" | tr -d ' "')," in *,fencing,*) ;; *) \
	echo "error: the server under test does not preload fencing (shared_preload_libraries = '$$pl');" >&2; \
	echo "the statistics tests need shared_preload_libraries = 'fencing' (see README.md, Install)" >&2; \
	exit 1;; esac
# --- end of packaging block --------------------------------------------------

# --- test targets: see test/README.md -----------------------------------------
# check-temp: the regression and isolation tests, each on a temporary
# instance that pg_regress initdbs, starts with test/temp-instance.conf
# (shared_preload_libraries = 'fencing') and removes.  PGXS keeps `make
# check` for the source tree of PostgreSQL itself; this is the same for an
# extension installed with `make install`.
# prove_installcheck: the Perl TAP tests through PGXS's prove_installcheck
# (PostgreSQL::Test::Cluster from the pgxs directory; IPC::Run needed), with
# test/perl on the include path; PROVE_TESTS picks files, PROVE_FLAGS adds
# prove's options (-v).
# The test files hold UTF-8 text: pg_regress creates its databases in
# UTF8 (installcheck too), and check-temp's servers in the C locale, so
# that no setting of the caller's environment changes an output.
TEMP_CONFIG ?= $(srcdir)/test/temp-instance.conf
PROVE_TESTS ?= test/t/*.pl
ENCODING = UTF8

.PHONY: check-temp prove_installcheck

check-temp:
ifdef REGRESS
	$(top_builddir)/src/test/regress/pg_regress --temp-instance=./tmp_check \
		--temp-config='$(TEMP_CONFIG)' --inputdir=$(srcdir) --bindir='$(bindir)' \
		$(pg_regress_locale_flags) --no-locale $(EXTRA_REGRESS_OPTS) $(REGRESS_OPTS) $(REGRESS)
endif
ifdef ISOLATION
	$(top_builddir)/src/test/isolation/pg_isolation_regress --temp-instance=./tmp_check_iso \
		--temp-config='$(TEMP_CONFIG)' --inputdir=$(srcdir) --outputdir=output_iso \
		--bindir='$(bindir)' $(pg_regress_locale_flags) --no-locale $(EXTRA_REGRESS_OPTS) \
		$(ISOLATION_OPTS) $(ISOLATION)
endif

prove_installcheck: PG_PROVE_FLAGS += -I $(srcdir)/test/perl
prove_installcheck:
	@perl -MIPC::Run -e 1 2>/dev/null || { \
	echo "error: the TAP tests need the Perl module IPC::Run (Debian: libipc-run-perl)" >&2; exit 1; }
	$(prove_installcheck)

.PHONY: demo test print-regress print-isolation

demo:
	bash test/demo.sh

test:
	bash test/check.sh

print-regress:
	@echo $(REGRESS)

print-isolation:
	@echo $(ISOLATION)
