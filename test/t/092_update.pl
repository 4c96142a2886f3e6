# ALTER EXTENSION fencing UPDATE from every released version to the newest,
# on a filled database, while writers write.
#
# The installations, named by the environment (test/suites/update.sh builds
# them into private copies; by hand see test/README.md):
#
#   FENCING_UPGRADE_TREE_INSTALL      an installation with this tree's
#                                     build of fencing (the newest version)
#   FENCING_UPGRADE_RELEASE_INSTALLS  "VERSION=INSTALL ...": for each
#                                     released version of test/releases that
#                                     builds on this server, an installation
#                                     with it built from its commit (its
#                                     library and scripts)
#   FENCING_UPGRADE_RELEASE_SOURCES   "VERSION=DIR ...": each release's tree
#                                     (git archive of its commit)
#   FENCING_UPGRADE_RELEASE_ERRORS    optional, set by the harness: lines
#                                     "VERSION description" of the checks that
#                                     fail for a release it could not get or
#                                     build
#
# Each installation is a directory as PostgreSQL::Test::Cluster's
# install_path takes it (its bin/ holds postgres, psql, pg_config); the test
# changes none of them: it works on copies of its own.  Without the first
# two the test is skipped with the reason.
#
# First the record of releases: every version of sql/fencing--*.sql but the
# newest is a release of test/releases whose tree says that version, and
# every release still has its scripts.  Then for each release V:
#   1. A server of V's installation (no shared_preload_libraries, so each
#      backend loads the library file it finds when it first needs it);
#      CREATE EXTENSION fencing gives V; test/upgrade/fill.sql fills it (row,
#      key and table scopes, a partitioned table, a shared scope name,
#      idempotency keys in every state, leases live and expired).
#   2. Writers start (test/upgrade/writers.sql): two fresh writers and a
#      stale one in long-lived sessions (they keep V's library to the end),
#      and a watcher of the fences.
#   3. The new build's files are installed over V's, as a package upgrade
#      does; a third writer and a second stale writer then come back in a new
#      session every second (each loads the new library, at first on V's
#      objects).
#   4. ALTER EXTENSION fencing UPDATE runs while all of them write; a fourth
#      writer starts after it.  Each step waits until the writers have
#      written what the checks count (the database is asked, never a fixed
#      sleep; FENCING_UPDATE_WAIT seconds at most, 600).
#   5. Checks: no stale write accepted before, during or after (every
#      attempt of the new library refused with SF001; the old library's
#      sessions may fail closed after the update, never accept), no fresh
#      write failed, no fence lowered (the watcher's record), every
#      acknowledged write kept and every protection, fence, key and lease as
#      it was (test/upgrade/verify.sql).
#   6. The updated extension equals a fresh CREATE EXTENSION fencing of the
#      newest version, filled alike (FencingUpgrade::ext_dump).
#   7. The pg_regress suite runs against the updated database (pg_regress
#      --use-existing, after a restart with the library preloaded, and with
#      the application's data removed: the expected outputs assume an empty
#      extension).
#
# A release that does not build on this server (1.0 predates PostgreSQL 18)
# has no installation: its database can only come from pg_upgrade with the
# new library installed, so its scripts run with the new library from the
# start; the new library may refuse to fill its objects until the update,
# with a clear error, and then that is what is checked.
#
# Every path of update scripts is walked by test/t/093_update_paths.pl.
use strict;
use warnings;
use FencingUpgrade;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $tree = $ENV{FENCING_UPGRADE_TREE_INSTALL};
my $why = FencingUpgrade::unusable('FENCING_UPGRADE_TREE_INSTALL', $tree);
$why //= 'FENCING_UPGRADE_RELEASE_SOURCES is not set (the released versions built)'
  unless $ENV{FENCING_UPGRADE_RELEASE_SOURCES};
plan skip_all => "$why (test/README.md)" if defined $why;

my %inst = map { split /=/, $_, 2 } split ' ', $ENV{FENCING_UPGRADE_RELEASE_INSTALLS} // '';
my %src = map { split /=/, $_, 2 } split ' ', $ENV{FENCING_UPGRADE_RELEASE_SOURCES};
my %error;
foreach (split /\n/, $ENV{FENCING_UPGRADE_RELEASE_ERRORS} // '')
{
	push @{ $error{$1} }, $2 if /^(\S+)\s+(.*)$/;
}
my $newest = FencingUpgrade::newest();
my @versions = FencingUpgrade::versions();
my @released = grep { $_->[0] ne $newest } FencingUpgrade::releases();
my $pgver = FencingUpgrade::pg_config($tree, 'version');
my $tmp = PostgreSQL::Test::Utils::tempdir;
note "$pgver; versions: @versions; newest: $newest; released (test/releases): "
  . join(' ', map { $_->[0] } @released);

# ---------------------------------------------------------------------
# the record of releases: nothing to update from is a failure, never a skip

foreach my $v (@versions)
{
	next if $v eq $newest || grep { $_->[0] eq $v } @released;
	fail("version $v (sql/fencing--$v*.sql) is recorded in test/releases");
}
my @ready;
foreach my $r (@released)
{
	my ($v, $commit) = @$r;
	fail("release $v (test/releases) still has its scripts in sql/")
	  unless grep { $_ eq $v } @versions;
	if ($error{$v})
	{
		fail($_) foreach @{ $error{$v} };
		next;
	}
	my $ctl = $src{$v} ? "$src{$v}/fencing.control" : '';
	unless (-f $ctl)
	{
		fail("release $v: FENCING_UPGRADE_RELEASE_SOURCES names its tree");
		next;
	}
	ok(FencingUpgrade::control_version($ctl) eq $v,
		"release $v: commit " . substr($commit, 0, 12)
		  . " is in this clone and its fencing.control says $v")
	  and push @ready, $v;
}
fail("a released version to update from (test/releases lists none older than $newest)")
  unless @released;

# ---------------------------------------------------------------------
# sessions: psql running one statement each, in the background; a
# repeating one comes back in a new session whenever it ends, until stop

my (%sessions, $stopping);

sub spawn
{
	my ($s) = @_;
	$s->{h} = IPC::Run::start(
		[
			$s->{node}->installed_command('psql'), '-X', '-q',
			'-v', 'ON_ERROR_STOP=1', '-d', $s->{node}->connstr('fencing_regress'),
			# the library loaded first: without the preload, a routine
			# cannot set the token in the statement that loads it
			'-c', "LOAD 'fencing'", '-c', $s->{sql}
		],
		'<', '/dev/null', '>>', $s->{log}, '2>>', $s->{log});
	return;
}

sub session
{
	my ($node, $name, $sql, $repeat) = @_;
	spawn($sessions{$name} =
		  { node => $node, sql => $sql, log => "$tmp/" . $node->name . "-$name.log", repeat => $repeat });
	return;
}

sub tick
{
	foreach my $s (values %sessions)
	{
		next if !$s->{repeat} || $stopping || $s->{h}->pumpable;
		$s->{h}->finish;
		spawn($s);
	}
	return;
}

# app.control.stop for every session; wait until they all ended
sub stop_sessions
{
	my ($node) = @_;
	$stopping = 1;
	$node->safe_psql('fencing_regress', 'UPDATE app.control SET stop = true');
	my $t0 = time;
	sleep 0.2 while grep({ $_->{h}->pumpable } values %sessions) && time - $t0 < 120;
	foreach my $name (sort keys %sessions)
	{
		my $s = $sessions{$name};
		$s->{h}->pumpable ? $s->{h}->kill_kill : $s->{h}->finish;
		my @l = split /\n/, (-s $s->{log} ? slurp_file($s->{log}) : '');
		note(File::Basename::basename($s->{log}) . ": " . join("\n", @l[ 0 .. ($#l < 4 ? $#l : 4) ])) if @l;
	}
	%sessions = ();
	$stopping = 0;
	return;
}

END
{
	$_->{h}->kill_kill foreach grep { $_->{h}->pumpable } values %sessions;
}

sub q1
{
	my ($node, $sql) = @_;
	return $node->safe_psql('fencing_regress', $sql);
}

# Wait until the boolean SQL expression $cond holds; the sessions are
# looked after meanwhile.  One check says whether it came, and when.
sub wait_until
{
	my ($node, $cond, $what) = @_;
	my $limit = $ENV{FENCING_UPDATE_WAIT} // 600;
	my $t0 = time;
	while (time - $t0 < $limit)
	{
		tick();
		my ($r, $o) = $node->psql('fencing_regress', "SELECT ($cond)");
		if ($r == 0 && $o eq 't')
		{
			pass(sprintf('%s (%d s)', $what, time - $t0));
			return 1;
		}
		sleep 0.2;
	}
	fail("$what (not within $limit s)");
	return 0;
}

# ---------------------------------------------------------------------
# the update of one release, with writers

sub update_with_writers
{
	my ($v) = @_;
	my $own_lib = defined $inst{$v};
	my $inst;
	if ($own_lib)
	{
		$inst = FencingUpgrade::copy_install($inst{$v}, "$tmp/inst-$v");
	}
	else
	{
		note "release $v does not build on $pgver (it predates it): its scripts run with the new library from the start, as after pg_upgrade";
		$inst = FencingUpgrade::copy_install($tree, "$tmp/inst-$v");
		my $ext = FencingUpgrade::pg_config($inst, 'sharedir') . '/extension';
		unlink glob("$ext/fencing*");
		FencingUpgrade::replace_file($_, "$ext/" . File::Basename::basename($_))
		  foreach ("$src{$v}/fencing.control", glob("$src{$v}/sql/fencing--*.sql"));
	}
	my $node = PostgreSQL::Test::Cluster->new("update_$v", install_path => $inst);
	$node->init;
	$node->append_conf('postgresql.conf',
		"max_connections = 60\nmax_prepared_transactions = 10\nlog_statement = none");
	$node->start;
	$node->safe_psql('postgres', 'CREATE DATABASE fencing_regress');
	q1($node, 'CREATE EXTENSION fencing');
	is(q1($node, "SELECT extversion FROM pg_extension WHERE extname = 'fencing'"),
		$v, "release $v installed (library: " . ($own_lib ? "${v}'s own" : 'new') . ')');
	my ($r, $o, $e) = $node->psql('fencing_regress',
		join("\n", map { FencingUpgrade::upgrade_sql($_) } qw(fill writers verify)));
	if ($r != 0 && !$own_lib && $e =~ /(ERROR: .*older than its library.*)/)
	{
		# allowed: the new library may refuse work that needs the new
		# objects (55000, HINT: ALTER EXTENSION fencing UPDATE)
		pass("release ${v}'s objects with the new library refuse to be filled until the update, with a clear error: $1");
		note "so the writers' update from $v is tested where ${v}'s own library builds (PostgreSQL 15); here only the walk of 093_update_paths.pl runs";
		$node->stop;
		return;
	}
	ok($r == 0,
		"filled at $v: row, key, table and partitioned scopes, a shared scope, keys in every state, leases"
	) or return diag(join("\n", (grep { /ERROR|DETAIL/ } split /\n/, $e)[ 0 .. 4 ]));
	# what the waits count: a writer's writes, acknowledged or failed
	q1($node, "CREATE FUNCTION app.tries(w int, since timestamptz DEFAULT '-infinity') RETURNS bigint
		LANGUAGE sql AS \$\$ SELECT (SELECT count(*) FROM app.acked WHERE writer = w AND at > since)
		                     + (SELECT count(*) FROM app.failed WHERE writer = w AND at > since) \$\$");
	# the extension's own tables, to compare after the update
	my @before = map { q1($node, "SELECT count(*) FROM fencing.$_") }
	  qw(protected scopes idempotency_keys leases);

	# 2. writers on V's library (each runs until app.control.stop)
	session($node, 'watcher', 'CALL app.watcher(3600)');
	session($node, 'fresh1', 'CALL app.fresh(1, 3600)');
	session($node, 'fresh2', 'CALL app.fresh(2, 3600)');
	session($node, 'stale', 'CALL app.stale(3600)');
	wait_until($node,
		"app.tries(1) >= 20 AND app.tries(2) >= 20
		 AND (SELECT count(*) FROM app.stale WHERE writer = 0 AND what LIKE '% equal') >= 2
		 AND (SELECT count(DISTINCT at) FROM app.watch) >= 5",
		"writers 1 and 2 and stale writer 0 write on ${v}'s library (20 writes each, 2 stale attempts on their tokens), the watcher looks"
	) or return stop_sessions($node), $node->stop;

	# 3. the package upgrade: the new files over the old ones; writer 3 and
	# stale writer 1 come back in a new session (the new library) each time
	q1($node, "INSERT INTO app.watch (what) VALUES ('files replaced')");
	FencingUpgrade::install_files($tree, $inst);
	session($node, 'fresh3', 'CALL app.fresh(3, 1)', 1);
	session($node, 'stale1', 'CALL app.stale(1, 1)', 1);
	wait_until($node,
		"app.tries(3) >= 5 AND (SELECT count(*) FROM app.stale WHERE writer = 1) >= 1",
		'writer 3 and stale writer 1 try in new sessions (the new library) before the update'
	) or return stop_sessions($node), $node->stop;

	# 4. the update, while they write (a deadlock with a writer is retried)
	my $t0 = q1($node, 'SELECT clock_timestamp()');
	my ($ok, $tries, $out) = (0, 0, '');
	while (!$ok && $tries < 5)
	{
		$tries++;
		$out = '';
		my $h = IPC::Run::start(
			[
				$node->installed_command('psql'), '-X', '-q', '-v', 'ON_ERROR_STOP=1',
				'-d', $node->connstr('fencing_regress'), '-c', 'ALTER EXTENSION fencing UPDATE'
			],
			'<', '/dev/null', '>&', \$out);
		while ($h->pumpable) { $h->pump_nb; tick(); sleep 0.1; }
		$ok = $h->finish;
		last unless $out =~ /deadlock detected/;
	}
	my $t1 = q1($node, 'SELECT clock_timestamp()');
	ok($ok, "ALTER EXTENSION fencing UPDATE from $v while the writers write (attempts: $tries)")
	  or diag($out);
	is(q1($node, "SELECT extversion FROM pg_extension WHERE extname = 'fencing'"),
		$newest, "the extension is at $newest");
	# a watcher in a new session: the old library's may fail closed once the
	# updated objects call functions it does not have
	session($node, 'watcher2', 'CALL app.watcher(3600)');
	session($node, 'fresh4', 'CALL app.fresh(4, 3600)');
	wait_until($node,
		"app.tries(4) >= 20 AND app.tries(3, '$t1') >= 5
		 AND (SELECT count(*) FROM app.stale WHERE writer = 1 AND at > '$t1') >= 1
		 AND (SELECT count(DISTINCT at) FROM app.watch WHERE at > '$t1') >= 6",
		'after the update: writers 3 and 4 write (5 and 20 writes), stale writer 1 tries, the watcher looks'
	);
	stop_sessions($node);

	# 5. the checks.  Sessions of the old library (writers 1 and 2, stale
	# writer 0) run code that knows only the old objects: after the update
	# they may fail (closed: an error), never accept a stale write.
	# Sessions of the new library (writers 3 and 4, stale writer 1) must go
	# on as if nothing happened.
	my ($b, $d, $a, $acc) = split /\|/, q1($node,
		"SELECT count(*) FILTER (WHERE at < '$t0'), count(*) FILTER (WHERE at BETWEEN '$t0' AND '$t1'),
		        count(*) FILTER (WHERE at > '$t1'), count(*) FILTER (WHERE sqlstate = 'accepted')
		   FROM app.stale");
	ok($acc == 0 && $b > 0 && $a > 0,
		"no stale write accepted: $b attempts before the update, $d during, $a after; $acc accepted");
	my $n_new = q1($node, 'SELECT count(*) FROM app.stale WHERE writer = 1');
	my $bad_new = q1($node, "SELECT count(*) FROM app.stale WHERE writer = 1 AND sqlstate <> 'SF001'");
	ok($bad_new == 0 && $n_new > 0,
		"new library: all $n_new stale attempts refused with SF001, before, during and after the update ($bad_new otherwise)"
	  )
	  or diag(q1($node,
		"SELECT what, sqlstate, message, count(*) FROM app.stale WHERE writer = 1 AND sqlstate <> 'SF001' GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 10"
	  ));
	my $bad_old = q1($node,
		"SELECT count(*) FROM app.stale WHERE writer = 0 AND sqlstate <> 'SF001' AND at < '$t0'");
	my $closed_old = q1($node,
		"SELECT count(*) FROM app.stale WHERE writer = 0 AND sqlstate NOT IN ('SF001', 'accepted') AND at >= '$t0'");
	ok($bad_old == 0,
		"old library: every stale attempt before the update refused with SF001 ($bad_old otherwise); after it $closed_old failed closed with another error"
	);
	note('old library after the update (fails closed): '
		  . q1($node,
			"SELECT string_agg(DISTINCT sqlstate || ' ' || message, '; ') FROM app.stale WHERE writer = 0 AND sqlstate NOT IN ('SF001', 'accepted') AND at >= '$t0'"
		  )) if $closed_old;
	my $nfail = q1($node, "SELECT count(*) FROM app.failed WHERE writer IN (3, 4) OR at < '$t0'");
	my $nfail_old =
	  q1($node, "SELECT count(*) FROM app.failed WHERE writer IN (1, 2) AND at >= '$t0'");
	ok($nfail == 0,
		"no fresh write failed in a session of the new library, nor before the update ($nfail failed); old library after the update: $nfail_old failed closed"
	  )
	  or diag(q1($node,
		"SELECT writer, sqlstate, message, count(*) FROM app.failed WHERE writer IN (3, 4) OR at < '$t0' GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 10"
	  ));
	note('old library after the update (fails closed): '
		  . q1($node,
			"SELECT string_agg(DISTINCT sqlstate || ' ' || message, '; ') FROM app.failed WHERE writer IN (1, 2) AND at >= '$t0'"
		  )) if $nfail_old;
	foreach my $line (split /\n/, q1($node,
		"SELECT w.writer, count(a.n) FILTER (WHERE at < '$t0'), count(a.n) FILTER (WHERE at BETWEEN '$t0' AND '$t1'),
		        count(a.n) FILTER (WHERE at > '$t1')
		   FROM (VALUES (1), (2), (3), (4)) w(writer) LEFT JOIN app.acked a USING (writer)
		  GROUP BY 1 ORDER BY 1"))
	{
		my ($w, $wb, $wd, $wa) = split /\|/, $line;
		ok($wb > 0, "writer $w (a session of the old library) wrote before the update: $wb; during: $wd; after: $wa")
		  if $w <= 2;
		ok($wa > 0, "writer $w (new sessions, the new library) wrote before, during and after the update: $wb, $wd, $wa")
		  if $w == 3;
		ok($wa > 0, "writer $w (a session started after the update) wrote: $wa acknowledged writes")
		  if $w == 4;
	}
	# a look whose statement began after another look's row was written
	# took its snapshot later: it must see no lower fence, no fewer rows
	my $lowered_sql = "FROM app.watch l1 JOIN app.watch l2 ON l2.what = l1.what AND l2.since > l1.at
		WHERE l2.fence OPERATOR(fencing.<) l1.fence OR l2.n < l1.n";
	my $lowered = q1($node, "SELECT count(*) $lowered_sql");
	my $samples = q1($node, 'SELECT count(DISTINCT at) FROM app.watch');
	ok($lowered == 0 && $samples > 10,
		"no fence lowered and no scope row lost at any of $samples looks during the run ($lowered lowered)"
	  )
	  or diag(q1($node,
		"SELECT l2.at, l1.what, l1.fence || ' -> ' || l2.fence, l1.n || ' -> ' || l2.n $lowered_sql ORDER BY 1 LIMIT 10"));
	my @after = map { q1($node, "SELECT count(*) FROM fencing.$_") }
	  qw(protected idempotency_keys leases);
	is("@after", "@before[0, 2, 3]",
		"protected tables, idempotency keys and leases all kept (before: @before; after: @after)");
	FencingUpgrade::run_verify($node, 'fencing_regress', "after the update from $v");

	# 6. the same extension as a fresh one
	FencingUpgrade::compare_with_fresh($node, 'fencing_regress', "updated from $v", 'filled');

	# 7. the regression suite against the updated database
	regress($node, $v);
	$node->stop;
	return;
}

# The pg_regress suite of the tree against the database updated from $v,
# once the application's data is out of it.
sub regress
{
	my ($node, $v) = @_;
	q1($node, 'SET client_min_messages = warning;
		SELECT fencing.unprotect(relid) FROM fencing.protected; DROP SCHEMA app CASCADE');
	# drop what the extension made for the application's data (relations of
	# its schema that a fresh CREATE EXTENSION does not have, members or not)
	$node->safe_psql('postgres', 'SET client_min_messages = warning;
		DROP DATABASE IF EXISTS pristine; CREATE DATABASE pristine');
	my $keep = $node->safe_psql('pristine',
		"CREATE EXTENSION fencing VERSION '$newest';
		 SELECT string_agg(quote_literal(relname), ',') FROM pg_class WHERE relnamespace = 'fencing'::regnamespace");
	q1($node, "DO \$\$ DECLARE c record; k text; BEGIN
		FOR c IN SELECT oid::regclass AS rel, relkind FROM pg_class
		          WHERE relnamespace = 'fencing'::regnamespace AND relkind IN ('r', 'p', 'S', 'v')
		            AND relname NOT IN ($keep) LOOP
		    k := CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' ELSE 'TABLE' END;
		    IF EXISTS (SELECT FROM pg_depend WHERE classid = 'pg_class'::regclass AND objid = c.rel
		                  AND refclassid = 'pg_extension'::regclass AND deptype = 'e') THEN
		        EXECUTE format('ALTER EXTENSION fencing DROP %s %s', k, c.rel);
		    END IF;
		    EXECUTE format('DROP %s IF EXISTS %s CASCADE', k, c.rel);
		END LOOP; END \$\$");
	# empty every configuration table of the extension, restart its sequences
	q1($node, "DO \$\$ DECLARE c regclass; BEGIN
		FOR c IN SELECT unnest(extconfig) FROM pg_extension WHERE extname = 'fencing' LOOP
		    IF (SELECT relkind FROM pg_class WHERE oid = c) = 'S' THEN
		        EXECUTE format('ALTER SEQUENCE %s RESTART', c);
		    ELSE
		        EXECUTE format('DELETE FROM %s', c);
		    END IF;
		END LOOP; END \$\$");
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
	$node->restart;
	my $out = "$tmp/regress-$v";
	my $log = '';
	my $st = IPC::Run::run(
		[
			'make', '-C', $FencingUpgrade::ROOT, '--no-print-directory', 'installcheck',
			"PG_CONFIG=$tree/bin/pg_config", 'ISOLATION=',
			'CONTRIB_TESTDB=fencing_regress',
			"EXTRA_REGRESS_OPTS=--outputdir=$out --use-existing"
		],
		'<', '/dev/null', '>&', \$log,
		init => sub {
			$ENV{PGHOST} = $node->host;
			$ENV{PGPORT} = $node->port;
			$ENV{PGDATABASE} = 'postgres';
		});
	# 15: "test NAME ... ok"; 16 and later: TAP of pg_regress's own
	my $nok = () = $log =~ /^(?:test)? +\S+ +\.\.\. +ok\b|^ok \d+ +- /mg;
	my $nbad = () = $log =~ /^(?:test)? +\S+ +\.\.\. +(?:FAILED|failed|ignored)|^not ok \d+ +- /mg;
	ok($st && $nbad == 0 && $nok > 0,
		"the pg_regress suite against the database updated from $v: $nok passed, $nbad failed")
	  or diag($log, -f "$out/regression.diffs" ? substr(slurp_file("$out/regression.diffs"), 0, 20000) : '');
	return;
}

update_with_writers($_) foreach @ready;
done_testing();
