# The Java client library (clients/java, io.github.fencing-pg:fencing-client)
# against a server with fencing and real lock services.
#
#   FENCING_CLIENT_JAVA        a copy of clients/java
#   FENCING_CLIENT_JAVA_M2     the Maven settings file whose local repository
#                              holds every dependency and plugin (the suite
#                              fills it once per pom.xml, from Maven Central);
#                              Maven runs offline (-o) with it
#   FENCING_CLIENT_EDITION     managed: against the edition for managed
#                              PostgreSQL (test/perl/FencingClients.pm),
#                              without the README's example and the benchmark
#   FENCING_CLIENT_STORM       1: run the storm (StormTest: 16 workers, leases
#                              and Redis locks of 300 ms, pauses past the
#                              TTL); else it shows as skipped
#
# Without FENCING_CLIENT_JAVA the test is skipped;
# test/suites/client_java.sh installs what is missing, fills the Maven
# repository and sets the variables.  The test starts a server (fencing
# preloaded), etcd, a three-server ZooKeeper ensemble, Redis and PgBouncer
# (transaction pooling, one server connection) as its own child processes
# on free ports, and runs:
#   - one Maven invocation (offline): the compiler (-Xlint:all -Werror, the
#     language's static check) and the JUnit 5 suite through Surefire, every
#     service given and required (FENCING_JAVA_REQUIRE=1: a missing one
#     fails); each test case of Surefire's reports is one check.  The pause
#     stories start worker JVMs and freeze them with SIGSTOP past their
#     lock's time to live.  The interop tests take each lock against a
#     holder of the docs' protocol: `etcdctl lock`,
#     test/locksvc/clients/worker.py (kazoo, Debian's python3:
#     FENCING_JAVA_ZK_REFERENCE) and the docs' Redis scripts.
#   - the README's first example, which must be examples/Quickstart.java as
#     it is, run twice as written (java's source launcher) in a database of
#     its own.
#   - the benchmark (Bench), its numbers as notes.
# Then no process of the run may be left.
use strict;
use warnings;
use Cwd qw(abs_path);
use File::Basename qw(dirname);
use FencingClients qw(need_env server run tap_checks stop_all leftovers);
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $env = need_env('client_java',
	FENCING_CLIENT_JAVA => 'a copy of clients/java',
	FENCING_CLIENT_JAVA_M2 => 'the Maven settings file of the cached repository');
my $dir = $env->{FENCING_CLIENT_JAVA};
my $settings = $env->{FENCING_CLIENT_JAVA_M2};
my $tmp = $PostgreSQL::Test::Utils::tmp_check;

my ($jv) = `java -version 2>&1` =~ /version "([^"]+)"/;
my ($mv) = `mvn -B -v 2>/dev/null` =~ /Apache Maven (\S+)/;
ok($jv && $mv, sprintf('Java %s, Maven %s', $jv // '?', $mv // '?'))
  or BAIL_OUT('no Java or Maven');

# the server, its databases, the services
my $node = server('client_java');
FencingClients::database($node, $_, 0) foreach qw(client_java client_java_quickstart);
my $t0 = time;
my $svc = FencingClients::services($node, 'client_java', qw(etcd zookeeper redis pgbouncer));
ok($svc, sprintf('etcd, a three-server ZooKeeper ensemble, Redis and PgBouncer (transaction pooling, one server connection) are up (%.0f s)', time - $t0))
  or BAIL_OUT('the lock services did not start');

my $storm = ($ENV{FENCING_CLIENT_STORM} // '') eq '1';
my %testenv = (
	FencingClients::pgenv($node, 'client_java'),
	FENCING_JAVA_ETCD      => $svc->{etcd},
	FENCING_JAVA_ZK        => $svc->{zk},
	FENCING_JAVA_REDIS     => "127.0.0.1:$svc->{redis_port}",
	FENCING_JAVA_PGBOUNCER => $svc->{pgbouncer_port},
	# the ZooKeeper interop test's reference holder: the docs' kazoo recipe
	FENCING_JAVA_ZK_REFERENCE => '/usr/bin/python3 ' . abs_path(dirname(__FILE__) . '/..') . '/locksvc/clients/worker.py',
	FENCING_JAVA_REQUIRE   => 1,
	($storm ? (FENCING_JAVA_STORM => 1) : ()),
	MAVEN_OPTS => '-Xmx384m -XX:+UseSerialGC -XX:TieredStopAtLevel=1');

# one Maven invocation: compile (warnings are errors), the classpath for the
# examples, the JUnit suite
$t0 = time;
my ($st, $out) = run(
	name    => 'mvn test',
	cmd     => [ 'mvn', '-B', '-q', '-o', '-s', $settings,
		'-Dmdep.outputFile=cp.txt', '-Dmdep.includeScope=test',
		'-Dsurefire.timeout=1500',
		'dependency:build-classpath', 'test' ],
	dir     => $dir,
	env     => \%testenv,
	timeout => 1800,
	log     => "$tmp/mvn-test.log");
my $secs = time - $t0;
my ($cases, $bad) = (0, 0);
foreach my $xml (sort glob("$dir/target/surefire-reports/TEST-*.xml"))
{
	my $text = slurp_file($xml);
	while ($text =~ m{<testcase\s+name="([^"]*)"\s+classname="([^"]*)"\s+time="([^"]*)"\s*(/>|>(.*?)</testcase>)}gs)
	{
		my ($name, $class, $time, $body) = ($1, $2, $3, $5 // '');
		$class =~ s/^.*\.//;
		$cases++;
		my $what = "$class.$name (${time}s)";
		if ($body =~ /<skipped(?:\s+message="([^"]*)")?/)
		{
			my $why = $1 // '';
			if ($class eq 'StormTest' && !$storm)
			{
			  SKIP: { skip("$what: the storm runs with FENCING_CLIENT_STORM=1 only", 1); }
			}
			else
			{
				fail("$what was skipped: $why");
				$bad++;
			}
		}
		elsif ($body =~ /<(failure|error)\b([^>]*)>(.*?)<\/\1>/s || $body =~ /<(failure|error)\b([^>]*)\/>/)
		{
			my ($attrs, $trace) = ($2, $3 // '');
			fail($what);
			$bad++;
			my @lines = split /\n/, $trace;
			diag(join("\n", grep { !/^\s+at (org\.junit|java\.base|org\.apache\.maven|jdk\.)/ } @lines[0 .. ($#lines > 40 ? 40 : $#lines)]));
		}
		else
		{
			pass($what);
		}
	}
}
note $_ foreach grep { /^STORM: / } split /\n/, $out;
ok($st == 0 && $cases > 0 && !$bad,
	sprintf('mvn -o test: %d test cases, exit %d (%.0f s)', $cases, $st, $secs))
  or diag(join("\n", grep { /ERROR|FAIL|Tests run/ } split /\n/, $out));

my $cp = -f "$dir/cp.txt" ? "$dir/target/classes:" . slurp_file("$dir/cp.txt") : '';
SKIP:
{
	skip('the managed edition\'s pass: the README\'s programs run CREATE EXTENSION fencing, the C edition (managed/README.md: Install)', 2) if FencingClients::managed();
	# the README's first example is the quickstart, and runs as written, twice
	my ($first) = slurp_file("$dir/README.md") =~ /^```java\n(.*?)^```$/ms;
	is($first, slurp_file("$dir/examples/Quickstart.java"),
		"the README's first example is examples/Quickstart.java");
	my %qenv = (%testenv, PGDATABASE => 'client_java_quickstart');
	my (undef, $q1) = run(cmd => [ 'java', '-cp', $cp, 'examples/Quickstart.java' ], dir => $dir, env => \%qenv, timeout => 300);
	my (undef, $q2) = run(cmd => [ 'java', '-cp', $cp, 'examples/Quickstart.java' ], dir => $dir, env => \%qenv, timeout => 300);
	note "quickstart, first run:  $_" foreach split /\n/, $q1;
	note "quickstart, second run: $_" foreach split /\n/, $q2;
	my ($t1) = $q1 =~ /^inv-3 paid with token (\d+:\d+)$/m;
	my ($t2) = $q2 =~ /^inv-3 paid with token (\d+:\d+)$/m;
	my $row = $node->safe_psql('client_java_quickstart',
		q{SELECT status || ' ' || fence::text FROM invoices WHERE id = 'inv-3'});
	ok($t1 && $t2 && $t1 ne $t2 && $row eq "paid $t2"
		  && $q1 =~ /^older token refused: .*stale fence token/m && $q2 =~ /^older token refused: /m,
		sprintf('the quickstart runs as written on an empty database, twice: three transactions under one lease each time (last tokens %s, then %s), an older token refused',
			$t1 // '?', $t2 // '?'));
}

SKIP:
{
	skip('the managed edition\'s pass: the benchmark measures the client, not the edition\'s contract', 1) if FencingClients::managed();
	# the benchmark: the library against the same transaction by hand
	($st, $out) = run(cmd => [ 'java', '-cp', "$dir/target/test-classes:$cp", 'io.github.fencingpg.fencing.Bench', '2000' ],
		dir => $dir, env => \%testenv, timeout => 600);
	note $_ foreach grep { !/^\[main\]/ } split /\n/, $out;
	ok($st == 0, 'Bench: Fenced.run against the same transaction by hand with pgjdbc, interleaved')
	  or diag($out);
}

stop_all();
$node->stop;
my @left = leftovers("$tmp/", "$dir/");
ok(!@left, 'no process of the run is left') or diag(join("\n", @left));

done_testing();
