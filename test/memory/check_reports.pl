#!/usr/bin/perl
# test/memory/check_reports.pl MODE DIR SERVER_LOG: what the memory suite
# (test/suites/memory.sh) found after the pg_regress files ran under MODE
# (asan or valgrind), as TAP diagnostics; exits 1 on a memory error in the
# extension or a crash.
#
#   asan      any AddressSanitizer report in DIR (DIR/asan.*) is one
#   valgrind  any error of DIR/vg.*.log whose stack passes through
#             fencing.so is one; PostgreSQL's own known reports (WAL padding
#             written with pwrite, the relcache init file) are not ours and
#             are only counted
#   both      a server process terminated by a signal, or a PANIC, in
#             SERVER_LOG is a crash
use strict;
use warnings;

my ($mode, $dir, $server_log) = @ARGV;
die "usage: $0 asan|valgrind DIR SERVER_LOG\n" unless $mode && $dir && $server_log;

sub slurp { my ($f) = @_; open my $fh, '<', $f or return ''; local $/; return <$fh>; }
sub diag { print map { "# $_\n" } map { split /\n/ } @_; }

my $bad = 0;
if ($mode eq 'asan' and my @reports = glob("$dir/asan*"))
{
	my @lines = map { split /\n/, slurp($_) } @reports;
	diag("AddressSanitizer reports in $dir:", @lines[ 0 .. ($#lines < 59 ? $#lines : 59) ]);
	$bad = 1;
}
if ($mode eq 'valgrind')
{
	my $all = join "\n", map { slurp($_) } glob("$dir/vg.*.log");
	# a report is a paragraph of the log (valgrind separates them with an
	# empty "==pid==" line)
	(my $paras = $all) =~ s/^==\d+==\s*$//mg;
	my @ours = grep { /fencing\.so/ } split /\n\s*\n/, $paras;
	my $theirs = () = $all =~ /points to uninitialised|Invalid |uninitialised value|definitely lost/g;
	print "# valgrind: " . scalar(@ours) . " error(s) in fencing.so; $theirs report line(s) of PostgreSQL itself\n";
	if (@ours)
	{
		my @lines = map { split /\n/, "$_\n" } @ours;
		diag("valgrind reports errors in fencing.so (see $dir):",
			@lines[ 0 .. ($#lines < 79 ? $#lines : 79) ]);
		$bad = 1;
	}
}
my @crashes = grep { /terminated by signal|was terminated|PANIC/ } split /\n/, slurp($server_log);
if (@crashes)
{
	diag("a server process crashed (see $server_log):", @crashes[ 0 .. ($#crashes < 4 ? $#crashes : 4) ]);
	$bad = 1;
}
exit $bad;
