# test/perl/FencingUpgrade.pm: helpers of the update tests
# (test/t/092_update.pl, test/t/093_update_paths.pl).
#
#   FencingUpgrade::versions()             the extension's versions, oldest
#                                          first, from sql/fencing--*.sql
#   FencingUpgrade::newest()               default_version of fencing.control
#   FencingUpgrade::releases()             [version, commit] of every line of
#                                          test/releases, oldest first
#   FencingUpgrade::update_paths($from, $to)
#                                          every path of update scripts from
#                                          $from to $to, each a list of versions
#   FencingUpgrade::unusable($var, $inst)  why installation $inst (named by
#                                          variable $var) cannot be used, or undef
#   FencingUpgrade::copy_install($inst, $dir)
#                                          a copy of installation $inst under
#                                          $dir (its bindir's parent and the
#                                          share and library directories, laid
#                                          out alike); returns its install_path
#   FencingUpgrade::install_files($from, $to)
#                                          the extension's files of
#                                          installation $from over those of $to,
#                                          as a package upgrade does (a new
#                                          file, then a rename)
#   FencingUpgrade::ext_dump($node, $db)   what makes the extension in $db
#                                          what it is, OIDs normalised
#   FencingUpgrade::compare_with_fresh($node, $db, $what, $kind)
#                                          one check: that dump equals the one
#                                          of a fresh CREATE EXTENSION of the
#                                          newest version ($kind: filled by
#                                          test/upgrade/fill.sql, or empty)
#   FencingUpgrade::run_verify($node, $db, $prefix)
#                                          app.verify() (test/upgrade/verify.sql),
#                                          one check per line
#   FencingUpgrade::upgrade_sql($name)     the text of test/upgrade/$name.sql
#
# The tree (sql/, fencing.control, test/releases, test/upgrade/) is the one
# this file belongs to.

package FencingUpgrade;

use strict;
use warnings;

use Cwd qw(abs_path);
use File::Basename qw(basename dirname);
use File::Copy qw(copy);
use File::Path qw(make_path remove_tree);
use File::Spec;
use FencingTest;
use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;

our $ROOT = abs_path(dirname(__FILE__) . '/../..');

# version strings in version order
sub vsort
{
	return sort {
		my @a = split /\./, $a;
		my @b = split /\./, $b;
		($a[0] // 0) <=> ($b[0] // 0) || ($a[1] // 0) <=> ($b[1] // 0)
		  || ($a[2] // 0) <=> ($b[2] // 0)
	} @_;
}

sub versions
{
	my %v;
	foreach my $f (glob("$ROOT/sql/fencing--*.sql"))
	{
		(my $n = basename($f)) =~ s/^fencing--|\.sql$//g;
		$v{$_} = 1 foreach grep { $_ ne '' } split /--/, $n;
	}
	return vsort(keys %v);
}

sub control_version
{
	my ($file) = @_;
	return slurp_file($file) =~ /^default_version\s*=\s*'([^']*)'/m ? $1 : '?';
}

sub newest { return control_version("$ROOT/fencing.control"); }

sub releases
{
	my @r;
	foreach my $line (split /\n/, slurp_file("$ROOT/test/releases"))
	{
		$line =~ s/#.*//;
		push @r, [ $1, $2 ] if $line =~ /^\s*(\S+)\s+(\S+)/;
	}
	return @r;
}

# Depth-first over the update scripts, no cycles.
sub update_paths
{
	my ($from, $to, @path) = @_;
	@path = ($from) unless @path;
	return ([@path]) if $from eq $to;
	my @paths;
	my @next = map { basename($_) =~ /^fencing--\Q$from\E--(.*)\.sql$/ ? $1 : () }
	  glob("$ROOT/sql/fencing--$from--*.sql");
	foreach my $n (vsort(@next))
	{
		next if grep { $_ eq $n } @path;
		push @paths, update_paths($n, $to, @path, $n);
	}
	return @paths;
}

sub pg_config { FencingTest::inst_config(@_) }

sub unusable { FencingTest::inst_unusable(@_, control_only => 1) }

sub copy_install
{
	my ($inst, $dir) = @_;
	$inst = abs_path($inst);
	my @dirs = grep { defined && -d } map { abs_path(pg_config($inst, $_) // '') }
	  qw(sharedir pkglibdir);
	# the deepest directory holding them all; what lies outside $inst is
	# copied to the same place relative to it
	my $root = $inst;
	$root = dirname($root) while grep { index("$_/", "$root/") != 0 } @dirs;
	my $at = sub { my $rel = File::Spec->abs2rel($_[0], $root); $rel eq '.' ? $dir : "$dir/$rel" };
	foreach my $d ($inst, grep { index("$_/", "$inst/") != 0 } @dirs)
	{
		make_path($at->($d));
		system('cp', '-a', "$d/.", $at->($d)) == 0 or die "cp -a $d failed";
	}
	return $at->($inst);
}

# $src over $dst: a new file beside it, then a rename
sub replace_file
{
	my ($src, $dst) = @_;
	copy($src, "$dst.new") or die "copy $src to $dst.new: $!";
	chmod((stat $src)[2] & 07777, "$dst.new");
	rename("$dst.new", $dst) or die "rename $dst.new: $!";
	return;
}

sub install_files
{
	my ($from, $to) = @_;
	my ($fl, $tl) = map { pg_config($_, 'pkglibdir') } $from, $to;
	replace_file($_, "$tl/" . basename($_)) foreach glob("$fl/fencing.*");
	if (-d "$fl/bitcode/fencing")
	{
		remove_tree("$tl/bitcode/fencing");
		unlink("$tl/bitcode/fencing.index.bc");
		system('cp', '-a', glob("$fl/bitcode/fencing*"), "$tl/bitcode/") == 0
		  or die "cp bitcode failed";
	}
	my ($fs, $ts) = map { pg_config($_, 'sharedir') . '/extension' } $from, $to;
	replace_file($_, "$ts/" . basename($_)) foreach glob("$fs/fencing*");
	return;
}

sub upgrade_sql { return slurp_file("$ROOT/test/upgrade/$_[0].sql"); }

# pg_dump --schema-only --binary-upgrade of everything but the
# application's schema (every member with its ALTER EXTENSION ADD, owners,
# ACLs, comments and initial privileges), pg_extension's row with its config
# tables by name, and the pg_depend membership via pg_identify_object
sub ext_dump
{
	my ($node, $db) = @_;
	my ($dump, $err) = ('', '');
	IPC::Run::run(
		[
			$node->installed_command('pg_dump'), '--schema-only',
			'--binary-upgrade', '-N', 'app', '-d', $node->connstr($db)
		],
		'<', '/dev/null', '>', \$dump, '2>', \$err)
	  or die "pg_dump of $db failed: $err";
	my $ext = $node->safe_psql($db,
		"SELECT extname, extowner::regrole, extnamespace::regnamespace,
		        extrelocatable, extversion,
		        (SELECT array_agg(c::regclass::text ORDER BY o)
		           FROM unnest(extconfig) WITH ORDINALITY u(c, o)),
		        extcondition
		   FROM pg_extension WHERE extname = 'fencing'");
	my $members = $node->safe_psql($db,
		"SELECT (pg_identify_object(classid, objid, objsubid)).type
		        || ' ' || (pg_identify_object(classid, objid, objsubid)).identity
		   FROM pg_depend
		  WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
		    AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')
		  ORDER BY 1");
	my @out;
	foreach (split /\n/,
		"== pg_dump --schema-only --binary-upgrade (the extension's schema)\n$dump"
		  . "== pg_extension\n$ext\n== members (pg_depend deptype e)\n$members\n")
	{
		next if /^\\(un)?restrict / || /^-- Dumped (from|by) /;
		if (/binary_upgrade_set_next|binary_upgrade_create_empty_extension|pg_upgrade: OID|'[0-9]+'::pg_catalog.oid/)
		{
			s{[0-9A-F]+/[0-9A-F]+}{N/N}g;
			s/[0-9]+/N/g;
		}
		s/^SET relfrozenxid = '[0-9]+', relminmxid = '[0-9]+'/SET relfrozenxid = 'N', relminmxid = 'N'/;
		s/^WHERE oid = '[0-9]+';/WHERE oid = 'N';/;
		s/^(SELECT pg_catalog.setval\('[^']*', )[0-9]+, (true|false)\);/$1N, B); -- data of a configuration sequence/;
		push @out, $_;
	}
	return join("\n", @out) . "\n";
}

my %fresh;    # the reference dumps, per node and kind

sub fresh_dump
{
	my ($node, $kind) = @_;
	my $key = $node->name . " $kind";
	return $fresh{$key} if defined $fresh{$key};
	my $newest = newest();
	$node->safe_psql('postgres', "DROP DATABASE IF EXISTS fresh_$kind");
	$node->safe_psql('postgres', "CREATE DATABASE fresh_$kind");
	$node->safe_psql("fresh_$kind", "CREATE EXTENSION fencing VERSION '$newest'");
	if ($kind eq 'filled')
	{
		my ($r, $o, $e) = $node->psql("fresh_$kind", upgrade_sql('fill'));
		diag("the reference's fill failed:\n"
			  . join("\n", grep { /ERROR|DETAIL/ } split /\n/, $e))
		  if $r != 0;
	}
	return $fresh{$key} = ext_dump($node, "fresh_$kind");
}

sub compare_with_fresh
{
	my ($node, $db, $what, $kind) = @_;
	my $newest = newest();
	my $ref = fresh_dump($node, $kind);
	my $got = ext_dump($node, $db);
	if ($got eq $ref)
	{
		my $members = () = $got =~ /^ALTER EXTENSION fencing ADD/mg;
		pass("$what: the same objects, definitions, owners, ACLs, comments, config-dump marks and members as a fresh CREATE EXTENSION fencing VERSION '$newest' ($kind alike; $members members)"
		);
		return;
	}
	fail("$what: differs from a fresh CREATE EXTENSION fencing VERSION '$newest' ($kind alike)");
	my $dir = PostgreSQL::Test::Utils::tempdir;
	open(my $fh, '>', "$dir/fresh") or die;
	print $fh $ref;
	close $fh;
	open($fh, '>', "$dir/$db") or die;
	print $fh $got;
	close $fh;
	my $diff = '';
	IPC::Run::run([ 'diff', '-u', "$dir/fresh", "$dir/$db" ], '>', \$diff);
	my @l = grep { /^[-+]/ && !/^[-+]\s*$/ && !/^[-+]--/ } split /\n/, $diff;
	diag(join("\n", @l[ 0 .. ($#l < 59 ? $#l : 59) ]));
	return;
}

sub run_verify
{
	my ($node, $db, $prefix) = @_;
	# the library loaded before app.verify() runs (a server without the
	# preload loads it in the session's first statement that uses it, and
	# a routine cannot set the token in that very statement)
	my ($r, $o, $e) = $node->psql($db,
		"LOAD 'fencing';\nSELECT CASE WHEN ok THEN 't' ELSE 'f' END || '|' || description FROM app.verify()");
	if ($r != 0)
	{
		fail("$prefix: app.verify() failed");
		diag($e);
		return;
	}
	foreach my $line (split /\n/, $o)
	{
		my ($ok, $desc) = split /\|/, $line, 2;
		ok($ok eq 't', "$prefix: $desc");
	}
	return;
}

1;
