# A randomized concurrent stress of the guard with an invariant checker.
#
# Several psql clients write at once through the three paths of the
# extension: row scope (token in the fence column or in fencing.token), key
# scope (INSERT, COPY, DELETE on a ledger, UPDATE and INSERT ... ON CONFLICT
# on a second table sharing its scope; token in fencing.token or in the
# fence column), both in one transaction, and fencing.advance() in an
# UPDATE of an unprotected table; mostly READ COMMITTED, some REPEATABLE
# READ and SERIALIZABLE (which may fail with 40001 instead).  Tokens come from one growing generator;
# about 30% reuse an old token and 5% carry none.  The server logs every
# accepted write in the writing transaction and numbers the transactions at
# COMMIT (see test/perl/FencingTest.pm); afterwards, per scope, in commit
# order every accepted token must beat every token accepted before it, the
# stored fence must be the highest accepted token, and no write may have
# been accepted after a newer token of its scope was acknowledged.
#
# FENCING_STRESS_CLIENTS (default 4), FENCING_STRESS_SECONDS (default 15)
# and FENCING_STRESS_SEED change the load.  FENCING_LONG=1 is the long mode:
# 8 clients for 300 s unless those say otherwise (not run by default).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use Test::More;
use FencingTest;

my $node = PostgreSQL::Test::Cluster->new('stress');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'fencing'
log_statement = none
max_connections = 40
deadlock_timeout = 100ms
});
$node->start;

my $baseline = FencingTest::stress_setup($node, 'postgres');
is($baseline->{'acct/acct-1'}, '0:1',
	'protect() seeded the key scope from the existing rows');

my $long = $ENV{FENCING_LONG};
# at least the seconds given, and until every kind of write has been both
# accepted and refused as stale, and a token-less one refused: what the
# checks below count
my $run = FencingTest::run_stress(
	$node, 'postgres',
	clients => $ENV{FENCING_STRESS_CLIENTS} // ($long ? 8 : 4),
	seconds => $ENV{FENCING_STRESS_SECONDS} // ($long ? 300 : 15),
	until   => sub {
		my ($r) = @_;
		return 0 unless FencingTest::outcomes($r, 'missing');
		foreach my $kind (qw(row key transfer adv))
		{
			my $of = sub { $_[0]{kind} eq $kind };
			return 0
			  unless FencingTest::outcomes($r, 'accepted', $of)
			  && FencingTest::outcomes($r, 'stale', $of);
		}
		return 1;
	});
my $check =
  FencingTest::check_history($node, 'postgres', $run->{attempts}, $baseline);
FencingTest::report('stress', $run, $check);

cmp_ok($check->{attempts}, '>', 0, 'attempts were made');
cmp_ok($check->{accepted}, '>', 0, 'some writes were accepted');
cmp_ok($check->{stale}, '>', 0, 'some writes were refused as stale (SF001)');
cmp_ok($check->{missing}, '>', 0,
	'some writes were refused for a missing token (SF002)');
is($check->{unknown}, 0, 'every attempt got an answer');
is($check->{violations}, 0, 'no invariant was violated');

# per kind, each path was exercised both ways
foreach my $kind (qw(row key transfer adv))
{
	my @k = grep { $_->{kind} eq $kind } @{ $run->{attempts} };
	ok( (grep { $_->{outcome} eq 'accepted' } @k)
		  && (grep { $_->{outcome} eq 'stale' } @k),
		"$kind writes were both accepted and refused as stale");
}

# the statistics agree with the clients
my $stats = $node->safe_psql('postgres',
	"SELECT sum(accepted), sum(rejected_stale + rejected_already_used), sum(rejected_missing) FROM fencing.stats"
);
note "fencing.stats (accepted|SF001 stale or already used|missing, per row): $stats";
my ($st_acc, $st_stale, $st_missing) = split /\|/, $stats;
my $guarded_stale =
  grep { $_->{outcome} eq 'stale' && $_->{kind} ne 'adv' } @{ $run->{attempts} };
cmp_ok($st_stale, '>=', $guarded_stale,
	'fencing.stats counted at least every stale refusal of the guard');

# The checker itself: a write planted behind the guard's back, and a short
# run with the row-scope table unprotected, must both be caught.
$node->safe_psql('postgres',
	"INSERT INTO stress.history (tbl, op, scope, token) VALUES ('accounts', 'UPDATE', 'accounts/1', '0:0')"
);
my $planted =
  FencingTest::check_history($node, 'postgres', $run->{attempts}, $baseline);
cmp_ok($planted->{violations}, '>', 0,
	'the checker reports a planted out-of-order write');
$node->safe_psql('postgres',
	"DELETE FROM stress.history WHERE attempt IS NULL AND token::text = '0:0'");

$node->safe_psql('postgres', "SELECT fencing.unprotect('stress.accounts')");
# (until a stale write got in: the checker is asked once a second whether
# the history holds a token accepted after a newer one)
my $asked = 0;
my $unguarded = FencingTest::run_stress(
	$node, 'postgres',
	seconds     => 3,
	kinds       => ['row'],
	first_id    => $run->{next_id},
	generator   => $run->{generator},
	missing_ratio => 0,
	until       => sub {
		my ($r) = @_;
		return 0 if time - $asked < 1;
		$asked = time;
		my $c = FencingTest::check_history($node, 'postgres',
			[ @{ $run->{attempts} }, grep { defined $_->{outcome} } @{ $r->{attempts} } ],
			$baseline);
		# (the history's own order: once committed, it stays)
		return scalar grep { /had been accepted by an earlier transaction/ }
		  @{ $c->{violation_list} };
	});
my $all = [ @{ $run->{attempts} }, @{ $unguarded->{attempts} } ];
my $check2 = FencingTest::check_history($node, 'postgres', $all, $baseline);
note sprintf('without the guard: %d attempts, %d violations',
	scalar @{ $unguarded->{attempts} }, $check2->{violations});
cmp_ok($check2->{violations}, '>', 0,
	'without the guard, the checker sees stale writes get in');

$node->stop;
done_testing();
