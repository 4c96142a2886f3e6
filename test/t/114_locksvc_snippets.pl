# The client snippets of docs/lock-services.md (test/locksvc/snippets),
# run for real against the test's server: psycopg 3, JDBC (pgjdbc), Go
# (pgx) and node-postgres.  A fresh token commits; an old one gets SF001
# and the program stops (exit 3); a 40001 (raised once by a trigger of the
# test) is retried and commits.  Then the page must show each snippet as it
# is tested.  Needs FENCING_LOCKSVC_PYTHON, FENCING_LOCKSVC_GO_BIN and
# FENCING_LOCKSVC_NODE_MODULES (test/suites/locksvc.sh sets them);
# FENCING_LOCKSVC_BREAK=guard: every scenario must fail.
use strict;
use warnings;
use FencingLockSvc;
use FencingLockSvcTest;
use Test::More;

need_env(qw(FENCING_LOCKSVC_PYTHON FENCING_LOCKSVC_GO_BIN FENCING_LOCKSVC_NODE_MODULES));
setup();

note '--- the client snippets of docs/lock-services.md ---';
$node->safe_psql('postgres', 'CREATE DATABASE shop');
$node->safe_psql('shop', <<'SQL');
CREATE EXTENSION fencing;
CREATE TABLE refunds (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES ('r-python', 'new', '0:1'), ('r-java', 'new', '0:1'),
                           ('r-go', 'new', '0:1'), ('r-node', 'new', '0:1');
-- a serialization failure, once, when armed: setval('inject_40001', 1, false)
CREATE SEQUENCE inject_40001;
SELECT setval('inject_40001', 100);
CREATE FUNCTION inject_40001() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('inject_40001') = 1 THEN
        RAISE EXCEPTION 'could not serialize access (raised by the test)'
            USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER a_inject_40001 BEFORE UPDATE ON refunds FOR EACH ROW EXECUTE FUNCTION inject_40001();
SQL
$node->safe_psql('shop', "SELECT fencing.protect('refunds')") if $BREAK ne 'guard';

my $snippets = "$ROOT/test/locksvc/snippets";
my $java = FencingLockSvc::dir() . '/java';
my $jdbc = '/usr/share/java/postgresql.jar';
my (undef, $jout, $jerr) = FencingLockSvc::run(
	[ 'javac', '-d', $java, '-cp', $jdbc, "$snippets/java/PayRefund.java" ],
	timeout => 300);
note "javac: $_" for split /\n/, "$jout$jerr";

my $port = $node->port;
my $user = getpwuid($<);
my %cmd = (
	python => [ $PY, "$snippets/python/pay_refund.py",
		"host=127.0.0.1 port=$port user=$user dbname=shop" ],
	java => [ 'java', '-cp', "$jdbc:$java", 'PayRefund',
		"jdbc:postgresql://127.0.0.1:$port/shop?user=$user" ],
	go => [ "$ENV{FENCING_LOCKSVC_GO_BIN}/snippet",
		"postgres://$user\@127.0.0.1:$port/shop?sslmode=disable" ],
	node => [ 'node', "$snippets/node/pay_refund.js",
		"postgres://$user\@127.0.0.1:$port/shop" ]);

# the snippet in $lang with $token on row r-$lang: (exit code, its output)
sub snippet
{
	my ($lang, $token) = @_;
	my (undef, $out, $err, $code) = FencingLockSvc::run(
		[ @{ $cmd{$lang} }, $token, "r-$lang" ],
		env => { NODE_PATH => $ENV{FENCING_LOCKSVC_NODE_MODULES} },
		timeout => 120);
	my $all = "$out$err";
	note "$lang, token $token: $_" for split /\n/, $all;
	return ($code, $all);
}

for my $lang (qw(python java go node))
{
	my ($st, $out) = snippet($lang, '0:2');
	ok($st == 0 && $out =~ /^committed with token 0:2$/m,
		"snippet $lang: a fresh token commits");
	($st, $out) = snippet($lang, '0:1');
	ok($st == 3 && $out =~ /^SF001: .*stale fence token 0:1/m,
		"snippet $lang: an old token gets SF001, and the program stops (exit 3)");
	$node->safe_psql('shop', "SELECT setval('inject_40001', 1, false)");
	($st, $out) = snippet($lang, '0:3');
	ok( $st == 0
		  && $out =~ /^40001: serialization failure, retrying$/m
		  && $out =~ /^committed with token 0:3$/m,
		"snippet $lang: a 40001 is retried, then it commits");
}

sub slurp
{
	open my $fh, '<', $_[0] or return '';
	local $/;
	return scalar <$fh>;
}
my $page = slurp("$ROOT/docs/lock-services.md");
for my $f (qw(python/pay_refund.py java/PayRefund.java go/main.go node/pay_refund.js))
{
	(my $snippet = slurp("$snippets/$f")) =~ s/^\s+|\s+$//g;
	ok($page ne '' && index($page, $snippet) >= 0,
		"docs/lock-services.md shows test/locksvc/snippets/$f as it is tested");
}

finish();
