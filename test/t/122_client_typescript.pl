# The TypeScript client library (clients/typescript, @fencing/client)
# against a server with fencing and real lock services.
#
#   FENCING_CLIENT_TS     a copy of clients/typescript whose node_modules is
#                         the tree `npm ci` made from its lock file (the
#                         suite caches it by the lock file's hash); a
#                         node_modules/.complete marks a finished npm ci
#   FENCING_CLIENT_TS_NPM_CACHE
#                         an npm cache this test may write: the fresh
#                         project that installs the packed tarball takes
#                         its dependencies through it
#   FENCING_CLIENT_EDITION
#                         managed: against the edition for managed
#                         PostgreSQL (test/perl/FencingClients.pm), without
#                         the README's programs and the benchmark
#   FENCING_CLIENT_STORM  1: run the storm (20 workers x 30 grants, Redis
#                         locks of 300 ms running out under holders), beside
#                         the other test files; else it is left out, with a
#                         note
#
# Without FENCING_CLIENT_TS the test is skipped;
# test/suites/client_typescript.sh installs node and npm, runs npm ci and
# sets the variables.  The test builds the package with tsc --strict
# (declarations included) and checks its entry points; packs it (npm pack
# of that build) and, while the rest runs, installs the tarball into a
# fresh project whose CommonJS and ESM files import every entry point, pass
# tsc --strict and run; builds the tests; starts a server (fencing
# preloaded), etcd, Redis, PgBouncer (transaction pooling, one server
# connection) and a three-server ZooKeeper ensemble as its own child
# processes on free ports; runs every test file with node's test runner,
# the files side by side (one check per test, their timelines as notes);
# then the README's two programs (examples/quickstart.ts and
# examples/worker.ts, which the README must show verbatim) twice each on an
# empty database and a small run of the benchmark.  Then every server and
# worker of the run must be gone.
use strict;
use warnings;
use FencingClients qw(need_env server run start finish tap_checks stop_all leftovers);
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $env = need_env('client_typescript',
	FENCING_CLIENT_TS           => 'a copy of clients/typescript with its node_modules',
	FENCING_CLIENT_TS_NPM_CACHE => 'an npm cache this test may write');
my $dir = $env->{FENCING_CLIENT_TS};
my $tmp = $PostgreSQL::Test::Utils::tmp_check;

# ---- node, npm, the package's dependencies, tsc ------------------------------
my ($node_v, $npm_v) = (`node -v 2>/dev/null`, `npm -v 2>/dev/null`);
chomp($node_v, $npm_v);
ok($node_v && $npm_v, "node $node_v, npm $npm_v, etcd, ZooKeeper, Redis, PgBouncer are installed")
  or BAIL_OUT('no node');
my $modules = readlink("$dir/node_modules") // "$dir/node_modules";
ok(-f "$dir/node_modules/.complete",
	"npm ci from clients/typescript/package-lock.json (node_modules $modules)")
  or BAIL_OUT('no node_modules');

my $t0 = time;
my ($st, $out) = run(cmd => [ "$dir/node_modules/.bin/tsc", '-p', 'tsconfig.json' ], dir => $dir, timeout => 600);
ok($st == 0, sprintf('tsc --strict builds the library with its .d.ts (%.0f s)', time - $t0))
  or do { diag($out); BAIL_OUT('tsc failed'); };

my $pkg = decode_json(slurp_file("$dir/package.json"));
my @missing;
foreach my $k (sort keys %{ $pkg->{exports} })
{
	my $v = $pkg->{exports}{$k};
	next unless ref $v;
	foreach my $cond (qw(import require))
	{
		push @missing, "$k $cond: $_"
		  foreach grep { !-f "$dir/$_" } ($v->{$cond}{types}, $v->{$cond}{default});
	}
}
($st, $out) = run(cmd => [ 'node', '-e',
		'require(process.argv[1] + "/dist/index.js").runFenced || process.exit(1)', $dir ]);
ok(!@missing && $pkg->{name} eq '@fencing/client' && $pkg->{version} eq '1.4.0' && $st == 0,
	"the package's entry points and declarations are where package.json says")
  or diag("missing: @missing; name $pkg->{name}, version $pkg->{version}; $out");

# ---- npm pack, and the tarball installed into a fresh project ------------------
my $lock = decode_json(slurp_file("$dir/package-lock.json"));
my %v = map { $_ => $lock->{packages}{"node_modules/$_"}{version} }
  qw(pg ioredis etcd3 node-zookeeper-client typescript @types/node @types/pg @types/node-zookeeper-client);
# the build above is what the package holds (prepack would run tsc again)
($st, $out) = run(cmd => [ 'npm', 'pack', '--silent', '--ignore-scripts', '--cache', $env->{FENCING_CLIENT_TS_NPM_CACHE} ],
	dir => $dir, timeout => 300);
my ($tgz) = $out =~ /^(fencing-client-[\d.]+\.tgz)$/m;
ok($st == 0 && $tgz && -f "$dir/$tgz", "npm pack packs that build into " . ($tgz // '?'))
  or diag($out);
my $user = "$tmp/user-project";
mkdir $user;
PostgreSQL::Test::Utils::system_or_bail('cp', "$dir/$tgz", $user) if $tgz;
open my $pj, '>', "$user/package.json" or die $!;
print $pj JSON::PP->new->canonical->pretty->encode({
	name => 'fencing-user', private => JSON::PP::true, type => 'commonjs',
	dependencies => { '@fencing/client' => "file:" . ($tgz // 'missing.tgz'),
		map { $_ => $v{$_} } qw(pg ioredis etcd3 node-zookeeper-client) },
	devDependencies => { map { $_ => $v{$_} } qw(typescript @types/node @types/pg @types/node-zookeeper-client) } });
close $pj;
my $app = <<'EOT';
// A user's program (KIND): every entry point, every source, typed.
import { Pool } from 'pg';
import { Redis } from 'ioredis';
import { Etcd3 } from 'etcd3';
import * as zookeeper from 'node-zookeeper-client';
import {
  FencingError, LeaseSource, runFenced, runFencedMany, runLocked, StaleTokenError, StaticToken, Token, TokenSource,
} from '@fencing/client';
import { RedisSource } from '@fencing/client/redis';
import { EtcdSource } from '@fencing/client/etcd';
import { ZooKeeperSource } from '@fencing/client/zookeeper';

const pool = new Pool({ max: 1 });
const sources: TokenSource[] = [
  new LeaseSource(pool, { name: 'l', ttlMs: 1000 }),
  new RedisSource(new Redis({ lazyConnect: true }), pool, { name: 'r', ttlMs: 1000 }),
  new EtcdSource(new Etcd3({ hosts: 'http://127.0.0.1:1' }), pool, { name: 'e', ttlMs: 1000 }),
  new ZooKeeperSource(zookeeper.createClient('127.0.0.1:1'), pool, { path: '/z' }),
  new StaticToken('1:2'),
];
async function pay(src: TokenSource): Promise<Token> {
  return runFenced(pool, src, async (client, { token }) => {
    await client.query('SELECT 1');
    return token;
  }, { attempts: 3 });
}
const helpers: unknown[] = [pay, runLocked, runFencedMany];
console.log(`KIND: ${sources.length} sources, ${helpers.length} helpers, ${new StaleTokenError('x') instanceof FencingError}`);
process.exit(0);
EOT
foreach my $f ([ 'app.ts', 'CommonJS' ], [ 'app.mts', 'ESM' ])
{
	(my $text = $app) =~ s/KIND/$f->[1]/g;
	open my $fh, '>', "$user/$f->[0]" or die $!;
	print $fh $text;
	close $fh;
}
open my $tc, '>', "$user/tsconfig.json" or die $!;
print $tc '{ "compilerOptions": { "strict": true, "module": "node16", "moduleResolution": "node16",'
  . ' "target": "ES2022", "types": ["node"], "outDir": "out" }, "include": ["app.ts", "app.mts"] }' . "\n";
close $tc;
# npm install, tsc --strict and both runs, one after the other, while the
# tests build and run: each step's output in its own file, then its status
my @steps = (
	[ npm => "npm install --prefer-offline --no-audit --no-fund --loglevel=error --cache '$env->{FENCING_CLIENT_TS_NPM_CACHE}'" ],
	[ tsc => './node_modules/.bin/tsc -p .' ],
	[ cjs => 'node out/app.js' ],
	[ esm => 'node out/app.mjs' ]);
my $user_job = start(
	cmd => [ 'sh', '-c', join(' && ', map { "{ $_->[1] >$_->[0].log 2>&1; s=\$?; echo \$s >$_->[0].status; [ \$s = 0 ]; }" } @steps) ],
	dir => $user, timeout => 900, name => 'the fresh project', log => "$tmp/user-project.log");

# ---- the tests, examples and benchmark ------------------------------------------
$t0 = time;
($st, $out) = run(cmd => [ "$dir/node_modules/.bin/tsc", '-p', 'tsconfig.test.json' ], dir => $dir, timeout => 600);
ok($st == 0, sprintf('tsc --strict builds the tests, examples and benchmark (%.0f s)', time - $t0))
  or do { diag($out); BAIL_OUT('tsc failed'); };

# ---- the servers ---------------------------------------------------------------
my $node = server('client_typescript');
my $db = 'client_ts';
FencingClients::database($node, $db, 1);
FencingClients::database($node, "${db}_$_", 0) foreach qw(quickstart worker);
$node->safe_psql($db, q{
SET ROLE } . FencingClients::user() . q{;
CREATE TABLE fencing_lock_generations (service text PRIMARY KEY, generation bigint NOT NULL);
INSERT INTO fencing_lock_generations VALUES ('etcd', 0), ('zookeeper', 0), ('redis', 0);
});
$t0 = time;
my $svc = FencingClients::services($node, $db, qw(etcd redis pgbouncer zookeeper));
ok($svc, sprintf('etcd, Redis, PgBouncer (transaction pooling, one server connection) and a three-server ZooKeeper ensemble are up (%.0f s)', time - $t0))
  or BAIL_OUT('the lock services did not start');
my %testenv = (
	FencingClients::pgenv($node, $db),
	FENCING_TS_ETCD           => $svc->{etcd},
	FENCING_TS_ZK             => $svc->{zk},
	FENCING_TS_REDIS_PORT     => $svc->{redis_port},
	FENCING_TS_PGBOUNCER_PORT => $svc->{pgbouncer_port});

# node --test in a process group of its own (stopped with the workers it
# started, frozen or not); a check per top-level test
my $summary = qr/^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) /;
sub node_tests
{
	my ($what, @files) = @_;
	# every file at once: they spend their time waiting for TTLs to run out
	my @conc = (split /\./, substr($node_v, 1))[0] >= 20
	  ? ('--test-concurrency=' . ($ENV{NODE_TEST_CONCURRENCY} // scalar @files)) : ();
	my ($st, $out) = run(
		name    => "node --test ($what)",
		# a test that hangs fails on its own, with its name, after 4 minutes
		cmd     => [ 'node', '--test', '--test-reporter=tap', '--test-timeout=240000', @conc, @files ],
		dir     => $dir,
		env     => \%testenv,
		timeout => 900,
		log     => "$tmp/node-test-$what.log");
	my @lines = grep { !/^# Subtest:/ } split /\n/, $out;
	my ($n, $bad) = tap_checks(join("\n", grep { !/$summary/ } @lines));
	note "node --test: " . substr($_, 2) foreach grep { /$summary/ } @lines;
	if ($st != 0 && !$bad)
	{
		fail("node --test @files exited $st without a failing test");
		diag(join("\n", grep { defined } @lines[-20 .. -1]));
	}
	return $n;
}
my $storm = ($ENV{FENCING_CLIENT_STORM} // '') eq '1';
my @files = map { "build/test/" . (split m{/})[-1] }
  grep { $storm || !m{/storm\.test\.js$} } glob("$dir/build/test/*.test.js");
note 'the storm runs when FENCING_CLIENT_STORM=1 (the suite: on PostgreSQL 15 only, to keep it short)'
  unless $storm;
$t0 = time;
my $n = node_tests('all', @files);
note sprintf('node --test: %d tests of %d files in %.0f s', $n, scalar @files, time - $t0);

SKIP:
{
	skip('the managed edition\'s pass: the README\'s programs run CREATE EXTENSION fencing, the C edition (managed/README.md: Install)', 4) if FencingClients::managed();
	# ---- the README's programs, verbatim, on an empty database, twice ----------
	my @blocks = slurp_file("$dir/README.md") =~ /^```(?:ts|typescript)\n(.*?)^```$/msg;
	is($blocks[0], slurp_file("$dir/examples/quickstart.ts"),
		"the README's first example is examples/quickstart.ts, verbatim");
	ok((grep { $_ eq slurp_file("$dir/examples/worker.ts") } @blocks),
		"the README shows examples/worker.ts verbatim");
	my %qenv = (%testenv, PGDATABASE => "${db}_quickstart");
	my (@qs, @wk);
	push @qs, (run(cmd => [ 'node', 'build/examples/quickstart.js' ], dir => $dir, env => \%qenv, timeout => 120))[1]
	  for 1 .. 2;
	note "quickstart, run $_: " . $qs[ $_ - 1 ] for 1 .. 2;
	my @qt = map { /^invoice inv-(\d) paid with token (\d+:\d+)$/mg } @qs;
	my $row = $node->safe_psql("${db}_quickstart",
		q{SELECT string_agg(id || ' ' || status || ' ' || fence::text, ', ' ORDER BY id) FROM invoices});
	ok(@qt == 8 && $row eq "inv-1 paid $qt[5], inv-2 paid $qt[7]",
		"the quickstart runs as written on an empty database, twice: each invoice paid with a new token of the lease ($row)")
	  or diag("tokens: @qt; rows: $row");
	my %wenv = (%testenv, PGDATABASE => "${db}_worker", REDIS_URL => "redis://127.0.0.1:$svc->{redis_port}/0");
	push @wk, (run(cmd => [ 'node', 'build/examples/worker.js' ], dir => $dir, env => \%wenv, timeout => 120))[1]
	  for 1 .. 2;
	note "worker, run $_: " . $wk[ $_ - 1 ] for 1 .. 2;
	my @wt = map { /^posted -?\d+ to acct-1 with token (\d+:\d+)$/mg } @wk;
	my $ledger = $node->safe_psql("${db}_worker",
		q{SELECT count(*) || ' ' || sum(amount) || ' ' || (SELECT fence::text FROM ledger ORDER BY fence DESC LIMIT 1) FROM ledger});
	ok(@wt == 6 && $ledger eq "6 100 $wt[5]",
		"the worker example runs as written, twice: 3 transactions under each Redis lock, strict, none refused ($ledger)")
	  or diag("tokens: @wt; ledger: $ledger");
}

SKIP:
{
	skip('the managed edition\'s pass: the benchmark measures the client, not the edition\'s contract', 1) if FencingClients::managed();
	# ---- the benchmark, a short run (numbers only: see bench/bench.ts) -----------
	($st, $out) = run(cmd => [ 'node', 'build/bench/bench.js' ], dir => $dir,
		env => { %testenv, FENCING_TS_BENCH_N => 300 }, timeout => 300);
	note $out;
	ok($st == 0, 'the benchmark runs (runFenced against the same transaction by hand, interleaved)')
	  or diag($out);
}

# ---- the fresh project -----------------------------------------------------------
$t0 = time;
my ($user_st) = finish($user_job);
my %step = map {
	my $f = "$user/$_->[0]";
	($_->[0] => { st => (-f "$f.status" ? slurp_file("$f.status") + 0 : 'not run'),
		out => (-f "$f.log" ? slurp_file("$f.log") : '') })
} @steps;
note sprintf('the fresh project ended %.0f s after the benchmark (exit %s)', time - $t0, $user_st);
ok($step{npm}{st} eq '0' && -f "$user/node_modules/\@fencing/client/dist/index.js",
	"npm install ./$tgz (and pg, ioredis, etcd3, node-zookeeper-client, the \@types) in a fresh project")
  or diag($step{npm}{out});
ok($step{tsc}{st} eq '0', "tsc --strict (no skipLibCheck) of a user's CommonJS and ESM files importing every entry point and source")
  or diag($step{tsc}{out});
ok($step{cjs}{st} eq '0' && $step{esm}{st} eq '0' && $step{cjs}{out} =~ /^CommonJS: 5 sources, 3 helpers, true$/m
	  && $step{esm}{out} =~ /^ESM: 5 sources, 3 helpers, true$/m,
	'the installed package runs from require() and from import')
  or diag("$step{cjs}{out}\n$step{esm}{out}");

# ---- nothing left behind -------------------------------------------------------
stop_all();
$node->stop;
my @left = leftovers("$tmp/", "$dir/");
ok(!@left, 'every server and worker of the run has stopped') or diag(join("\n", @left));

done_testing();
