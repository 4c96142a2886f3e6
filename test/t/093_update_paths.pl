# Every path of update scripts, from every version to the newest.
#
#   FENCING_UPGRADE_TREE_INSTALL  an installation with this tree's build of
#                                 fencing (install_path of
#                                 PostgreSQL::Test::Cluster); without it the
#                                 test is skipped with the reason
#
# On a server of that installation (fencing preloaded): for every version of
# sql/fencing--*.sql but the newest, pg_extension_update_paths() knows a
# path to the newest; along every path of update scripts (ALTER EXTENSION
# fencing UPDATE TO each step) from CREATE EXTENSION fencing VERSION of it,
# on a database filled by test/upgrade/fill.sql, the end state equals a
# fresh CREATE EXTENSION of the newest filled alike
# (FencingUpgrade::compare_with_fresh) and passes test/upgrade/verify.sql.
# Where the new library refuses to fill the objects of an old version until
# the update (with a clear error), the path is walked on an empty database
# and compared with an empty fresh one.  The next release only adds its
# script.  The update from each release's own library, with writers, is
# test/t/092_update.pl.
use strict;
use warnings;
use FencingUpgrade;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $tree = $ENV{FENCING_UPGRADE_TREE_INSTALL};
my $why = FencingUpgrade::unusable('FENCING_UPGRADE_TREE_INSTALL', $tree);
plan skip_all => "$why (test/README.md)" if defined $why;

my $newest = FencingUpgrade::newest();
my $node = PostgreSQL::Test::Cluster->new('walk', install_path => $tree);
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
$node->start;
my %known = map { $_ => 1 } split /\n/, $node->safe_psql('postgres',
	"CREATE EXTENSION fencing;
	 SELECT source || ' ' || target FROM pg_extension_update_paths('fencing')
	  WHERE path IS NOT NULL AND target = '$newest'");
my $fill = 'BEGIN;' . FencingUpgrade::upgrade_sql('fill')
  . FencingUpgrade::upgrade_sql('verify') . 'COMMIT;';

my $i = 0;
foreach my $v (grep { $_ ne $newest } FencingUpgrade::versions())
{
	ok($known{"$v $newest"}, "pg_extension_update_paths: $v reaches $newest");
	foreach my $path (FencingUpgrade::update_paths($v, $newest))
	{
		my $db = 'walk' . ++$i;
		my $name = 'path ' . join(' -> ', @$path);
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		my ($r, $o, $e) = $node->psql($db, "CREATE EXTENSION fencing VERSION '$v'");
		if ($r != 0)
		{
			fail("$name: CREATE EXTENSION fencing VERSION '$v'");
			diag($e);
			next;
		}
		my $kind = 'filled';
		($r, $o, $e) = $node->psql($db, $fill);
		if ($r != 0 && $e =~ /(ERROR: .*older than its library.*)/)
		{
			# the new library refuses to fill the old objects, with a
			# clear error: walk the path on an empty database
			$kind = 'empty';
			note "$name: ${v}'s objects cannot be filled with the new library ($1): walked on an empty database";
		}
		elsif ($r != 0)
		{
			fail("$name: fill at $v");
			diag(join("\n", grep { /ERROR|DETAIL/ } split /\n/, $e));
			next;
		}
		my $err;
		foreach my $step (@$path[ 1 .. $#$path ])
		{
			($r, $o, $e) = $node->psql($db, "ALTER EXTENSION fencing UPDATE TO '$step'");
			$err = $e, last if $r != 0;
		}
		ok(!defined $err,
			"$name: every step of ALTER EXTENSION fencing UPDATE TO runs on a $kind database"
		) or diag($err), next;
		FencingUpgrade::compare_with_fresh($node, $db, $name, $kind);
		FencingUpgrade::run_verify($node, $db, $name) if $kind eq 'filled';
	}
}
$node->stop;
done_testing();
