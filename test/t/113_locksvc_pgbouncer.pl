# PgBouncer (a child of this test on a free port,
# test/perl/FencingLockSvc.pm) in transaction pooling with one server
# connection, in front of the test's server: every client below is served
# by the same backend, one after the other.  SET LOCAL and set_token() end
# with the transaction, so the next client has no token (SF002); a
# session-level SET stays on the backend and the next client writes with
# it (it leaked: what docs/lock-services.md warns of).  The clients are
# test/locksvc/clients/pooled.py (psycopg 3, no prepared statements).
# Needs FENCING_LOCKSVC_PYTHON (test/suites/locksvc.sh sets it);
# FENCING_LOCKSVC_BREAK=guard: every scenario must fail.
use strict;
use warnings;
use FencingLockSvc;
use FencingLockSvcTest;
use Test::More;

need_env(qw(FENCING_LOCKSVC_PYTHON));
setup();

note '--- PgBouncer, transaction pooling ---';
psql_db(<<'SQL');
CREATE TABLE pooled (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO pooled VALUES ('p-1', 'new', '0:1'), ('p-2', 'new', '0:1'), ('p-3', 'new', '0:1');
SQL
psql_db("SELECT fencing.protect('pooled')") if $BREAK ne 'guard';
my $pgb = eval { FencingLockSvc::PgBouncer->start(node => $node, dbname => 'locksvc') };
if (!$pgb)
{
	fail('PgBouncer starts');
	diag $@;
	finish();
	exit;
}
my (undef, $version) = FencingLockSvc::run([ 'pgbouncer', '--version' ]);
$version = (split / /, (split /\n/, $version)[0] // '')[1] // '?';
pass("PgBouncer $version serves port "
	  . $pgb->port
	  . ' (pool_mode = transaction, default_pool_size = 1)');

# one client: "pid=<backend> result=<ok|SQLSTATE> fence=<the row's fence>"
sub pooled
{
	my (undef, $out, $err) =
	  FencingLockSvc::run([ $PY, "$ROOT/test/locksvc/clients/pooled.py", $pgb->connstr, @_ ]);
	chomp $out;
	diag "pooled.py @_: $err" if $err;
	my %f = map { split /=/, $_, 2 } grep { /=/ } split / /, $out;
	$f{line} = $out;
	$f{$_} //= '' for qw(pid result fence);
	return \%f;
}

for my $mode (qw(set-local set-token))
{
	my $row = $mode eq 'set-token' ? 'p-2' : 'p-1';
	my $first = pooled($mode, '0:5', $row);
	my $next = pooled('none', '-', $row);
	note "$mode: client 1: $first->{line}; client 2 (no token): $next->{line}";
	is("$first->{result}/$first->{fence}", 'ok/0:5',
		"pgbouncer, $mode: client 1 writes with its token 0:5");
	ok( $next->{pid} eq $first->{pid} && $next->{result} eq 'SF002',
		"pgbouncer, $mode: client 2 on the same server connection (pid $first->{pid}) has no token: SF002"
	);
}
my $first = pooled('session-set', '0:7', 'p-3');
my $next = pooled('none', '-', 'p-3');
note "session-set: client 1 (SET fencing.token = '0:7', no write): $first->{line}; "
  . "client 2 (no token): $next->{line}";
ok( $next->{pid} eq $first->{pid} && "$next->{result}/$next->{fence}" eq 'ok/0:7',
	"pgbouncer, session-level SET: client 2 (same server connection) writes with client 1's token 0:7: it leaked"
);
$pgb->stop;

finish();
