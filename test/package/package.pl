#!/usr/bin/perl
# test/package/package.pl: the Debian package, built, installed, used and
# removed on this machine.  Runs as root (dpkg, apt-get, pg_createcluster);
# prints TAP.  test/suites/package.sh runs it, after it has installed the
# build's tools (debhelper, lintian, postgresql-server-dev-all at the
# version of the installed postgresql-common, pgxnclient); it lives outside
# test/t/ because it needs root and changes the system's PostgreSQL 15.
#
#   sudo FENCING_SUITES=package bash test/check.sh --pg 15   (as a suite)
#   sudo perl test/package/package.pl                        (alone)
#   sudo perl test/package/package.pl --cleanup              (undo interrupted runs)
#
# First the pre-flight: what an interrupted earlier run left is undone; if
# postgresql-15-fencing is installed and not by this test, or fencing's
# files are in the system's PostgreSQL 15 directories and no package owns
# them (make install, a copy by hand), it skips naming them and touches
# nothing: the package would go over those files and its purge remove them.
#
# From a clean export of the tree (the `make dist` archive of HEAD, never
# the working tree): build postgresql-15-fencing with dpkg-buildpackage and
# lint it; install it with `apt-get install ./...deb` into the system's
# PostgreSQL 15; create a cluster with pg_createcluster on a free port with
# shared_preload_libraries = 'fencing' and start it with pg_ctlcluster;
# CREATE EXTENSION, a stale write rejected with SF001, `make installcheck`
# against that cluster, the package's autopkgtest; purge the package and
# prove that no file it installed is left; the PGXN client on the same
# archive (pgxn install, load, uninstall); drop the cluster, and prove that
# the system is as it was found.  Last, this test again (given the package
# built here) killed while its installcheck runs, with SIGTERM (its END
# block cleans up) and with SIGKILL (the cleanup step that every run starts
# with finds what it left and removes it).
#
# What it changes, and how it undoes it: before it installs the package or
# creates a cluster it writes that down in a journal,
# /var/tmp/fencing-package.<pid>.journal; its END block undoes what the
# journal lists (cluster dropped, package purged, scratch removed) and
# deletes the journal, and the next run (or --cleanup) undoes the journal
# of a run that died without it.  Steps that must not be cut in half
# (apt-get, pg_createcluster, pg_ctlcluster, pg_dropcluster) run in a
# session of their own (setsid -w), out of reach of a Ctrl-C, and a signal
# that comes meanwhile takes effect once they are done.  The system's
# postgresql-15 is never upgraded or changed.  One run at a time: it holds
# a lock (flock) on /usr/lib/postgresql/15/lib, the directory it installs
# into; the servers it starts do not inherit it (close-on-exec).
#
# The nested runs (the ones killed on purpose) are this script with
# FENCING_PACKAGE_DEB and FENCING_PACKAGE_ZIP (the package and archive built
# here: no build, no lint) and FENCING_PACKAGE_READY (a file it writes when
# its installcheck starts); FENCING_PACKAGE_LOCKED says the lock is held.

use strict;
use warnings;
use Cwd qw(abs_path);
use Fcntl qw(:flock);
use File::Basename qw(basename dirname);
use File::Path qw(make_path remove_tree);
use File::Temp qw(tempdir);
use IO::Socket::INET;
use JSON::PP;
use POSIX qw(:sys_wait_h);
use Test::More;
use Time::HiRes qw(sleep);

$| = 1;
Test::More->builder->failure_output(\*STDOUT);    # diagnostics in order

my $SELF = abs_path($0);
my $ROOT = $ENV{FENCING_ROOT} // abs_path(dirname($SELF) . '/../..');
my $V = 15;                                       # the system's PostgreSQL
my $PKG = "postgresql-$V-fencing";
my $SYSBIN = "/usr/lib/postgresql/$V/bin";
my $LIB = "/usr/lib/postgresql/$V/lib";
my $EXT = "/usr/share/postgresql/$V/extension";
my $JDIR = '/var/tmp';
my $JOURNAL = "$JDIR/fencing-package.$$.journal";
my $SCRATCH = (defined $ENV{FENCING_WORK} && -d $ENV{FENCING_WORK}) ? $ENV{FENCING_WORK} : '/tmp';
my @APT = qw(apt-get -q -y -o DPkg::Lock::Timeout=900 -o APT::Lock::Timeout=900);
$ENV{DEBIAN_FRONTEND} = 'noninteractive';
# the clusters of the test command are not ours: every connection names its own
delete @ENV{qw(PGHOST PGPORT PGDATA PGDATABASE PGUSER PGSERVICE PGSYSCONFDIR)};
my $MODE = shift // 'run';
die "package.pl needs root\n" if $> != 0;

# --- commands, signals ---

# A signal ends the run (END cleans up), but not in the middle of a step run
# in a session of its own: then once that step is done.
our $critical = 0;
my $signalled = 0;
for ([ TERM => 143 ], [ INT => 130 ], [ HUP => 129 ]) {
    my $code = $_->[1];
    $SIG{ $_->[0] } = sub { $signalled = $code; exit $code unless $critical };
}

# run(\%opt, CMD...): (exit status, stdout and stderr); the status alone
# in scalar context.  Options: dir (the
# working directory), log (a file of $work to keep the output in), user
# (run as that OS user), env (a hash), session (setsid -w, waited for).
my $work;
sub run {
    my $o = ref $_[0] ? shift : {};
    my @cmd = @_;
    if ($o->{env}) { @cmd = ('env', (map {"$_=$o->{env}{$_}"} sort keys %{ $o->{env} }), @cmd) }
    @cmd = ('runuser', '-u', $o->{user}, '--', @cmd) if $o->{user};
    @cmd = ('setsid', '-w', @cmd) if $o->{session};
    my $outer = $critical;
    local $critical = $o->{session} ? 1 : $critical;
    my $pid = open(my $fh, '-|') // die "fork: $!";
    if (!$pid) {
        open(STDERR, '>&', \*STDOUT);
        open(STDIN, '<', '/dev/null');
        # (no die here: this is a copy of the test, END blocks and all)
        if ($o->{dir} && !chdir $o->{dir}) { print "chdir $o->{dir}: $!\n"; POSIX::_exit(127) }
        exec @cmd or print "exec $cmd[0]: $!\n";
        POSIX::_exit(127);
    }
    my $out = do { local $/; <$fh> } // '';
    close $fh;
    my $st = $? & 127 ? 128 + ($? & 127) : $? >> 8;
    spew("$work/$o->{log}.log", $out) if $o->{log} && $work;
    exit $signalled if $signalled && !$outer;
    return wantarray ? ($st, $out) : $st;
}
sub out { (run(@_))[1] }
sub spew { open(my $f, '>', $_[0]) or die "$_[0]: $!"; print $f $_[1]; close $f }
sub slurp { open(my $f, '<', $_[0]) or return ''; local $/; my $s = <$f>; close $f; $s }
sub lines { grep { length } split /\n/, $_[0] // '' }
sub tail { my ($n, $s) = @_; my @l = split /\n/, $s // ''; join "\n", @l > $n ? @l[-$n .. -1] : @l }

sub pkg_state { (my $s = out('dpkg-query', '-W', '-f=${db:Status-Abbrev}', $_[0])) =~ s/\s//g; $s =~ /^[a-z]+$/ ? $s : '' }
sub pkg_version { my ($st, $v) = run('dpkg-query', '-W', '-f=${Version}', $_[0]); $st ? '' : $v }
sub clusters { map { (split ' ')[1] } lines(out('pg_lsclusters', '-h')) }

my $PORT;
sub psql {          # psql(DB, ARGS...): against the run's cluster, as postgres
    my $db = shift;
    run({ user => 'postgres' }, "$SYSBIN/psql", '-X', '-q', '-A', '-t', '-h', '/var/run/postgresql',
        '-p', $PORT, '-d', $db, @_);
}

# A TCP port on 127.0.0.1 that nothing listens on, below the kernel's
# ephemeral range (FENCING_PORTS=LO-HI: only ports of that range).
sub free_port {
    my ($lo, $hi) = (10000, 32767);
    $hi = $1 - 1 if slurp('/proc/sys/net/ipv4/ip_local_port_range') =~ /^(\d+)/;
    if ($ENV{FENCING_PORTS}) {
        $ENV{FENCING_PORTS} =~ /^(\d+)-(\d+)$/ && $1 <= $2
          or die "FENCING_PORTS must be LO-HI, for example 25000-25099\n";
        ($lo, $hi) = ($1, $2);
    }
    for (1 .. 50) {
        my $p = $lo + int(rand($hi - $lo + 1));
        next if -e "/var/run/postgresql/.s.PGSQL.$p";
        next if IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $p, Proto => 'tcp');
        return $p;
    }
    die "no free port found\n";
}

# --- the journal: what this run changed, undone by END or a later run ---

sub journal {
    open(my $j, '>>', $JOURNAL) or die "$JOURNAL: $!";
    print $j "@_\n";
    close $j;
    run('sync', $JOURNAL);
}
sub unjournal {
    my $line = "@_";
    return unless -f $JOURNAL;
    spew($JOURNAL, join '', map {"$_\n"} grep { $_ ne $line } split /\n/, slurp($JOURNAL));
}

sub drop_cluster {  # drop_cluster(VERSION, NAME): whatever state it is in
    my ($v, $c) = @_;
    if (-d "/etc/postgresql/$v/$c") {
        run({ session => 1 }, 'pg_ctlcluster', '--skip-systemctl-redirect', $v, $c, 'stop', '-m', 'immediate');
        run({ session => 1 }, 'pg_dropcluster', $v, $c);
    }
    # a pg_createcluster cut short may leave parts that pg_dropcluster does not know
    remove_tree("/var/lib/postgresql/$v/$c", "/etc/postgresql/$v/$c");
    unlink "/var/log/postgresql/postgresql-$v-$c.log";
    return "dropped cluster $v/$c";
}

sub purge_package { # apt-get purge; dpkg --purge if apt cannot
    my $p = shift;
    return '' if pkg_state($p) eq '';
    my ($st) = run({ session => 1 }, @APT, 'purge', $p);
    run({ session => 1 }, 'dpkg', '--purge', $p) if $st;
    return pkg_state($p) eq '' ? "purged $p" : "could not purge $p";
}

sub pgxn_uninstall { # what `pgxn install ZIP` put in place (by name, if the archive is gone)
    my $zip = shift;
    my ($st) = run('pgxn', 'uninstall', '--pg_config', "$SYSBIN/pg_config", '--make', 'make', $zip);
    if ($st && pkg_state($PKG) eq '') {
        remove_tree("$LIB/fencing.so", "$LIB/bitcode/fencing", "$LIB/bitcode/fencing.index.bc",
            "$EXT/fencing.control", glob("$EXT/fencing--*.sql"));
    }
    return 'uninstalled the PGXN build';
}

sub remove_dir {    # stop any server running from DIR, then remove it
    my $d = shift;
    return '' unless -d $d;
    for my $pidfile (lines(out('find', $d, '-name', 'postmaster.pid'))) {
        my ($st) = run({ user => 'postgres' }, "$SYSBIN/pg_ctl", '-D', dirname($pidfile), '-m', 'immediate', 'stop');
        kill 'KILL', $1 if $st && slurp($pidfile) =~ /^(\d+)/;
    }
    remove_tree($d);
    return "removed $d";
}

sub undo_journal {  # clusters, then the package, then files
    my $j = shift;
    return () unless -f $j;
    my @entries = map { [ split ' ' ] } lines(slurp($j));
    my @done;
    push @done, map { drop_cluster(@$_[ 1, 2 ]) } grep { $_->[0] eq 'cluster' } @entries;
    push @done, map { purge_package($_->[1]) } grep { $_->[0] eq 'package' } @entries;
    push @done, map { pgxn_uninstall($_->[1]) } grep { $_->[0] eq 'pgxn' } @entries;
    push @done, map { remove_dir($_->[1]) } grep { $_->[0] eq 'dir' } @entries;
    unlink $j;
    return @done;
}

sub reap {          # the journals of runs that are not running any more
    my @said;
    for my $j (glob "$JDIR/fencing-package.*.journal") {
        my ($pid) = $j =~ /fencing-package\.(\d+)\.journal$/ or next;
        next if $pid == $$;
        next if slurp("/proc/$pid/cmdline") =~ /package\.(sh|pl)/;
        (my $what = slurp($j)) =~ tr/\n/;/;
        push @said, "journal of run $pid: $what", undo_journal($j);
    }
    return @said;
}

# One run at a time: a lock (flock) on the directory the package installs
# into, held until this process is gone, its cleanup included.
my $LOCK;
sub lock_run {
    return if $ENV{FENCING_PACKAGE_LOCKED};
    open($LOCK, '<', $LIB) or die "$LIB: $!";
    for (my $t = 0; !flock($LOCK, LOCK_EX | LOCK_NB); $t++) {
        die "another package suite has held the lock for an hour\n" if $t >= 3600;
        sleep 1;
    }
    $ENV{FENCING_PACKAGE_LOCKED} = 1;
}

# --- what "the system as it was found" means ---
#

# What this test is responsible for, and nothing else: the packages (its
# own, and PostgreSQL's, which it must not change), the clusters, apt's
# configuration, the system's PostgreSQL $V directories and clusters
# (/var/lib/postgresql/$V, not the rest of the postgres OS user's home,
# where other programs keep their files), and its own traces.  (The
# harness changes none of them while suites run: test/lib/deps.sh installs
# everything before, and its deb-src entry is in its own cache.)
sub snapshot {
    my %s;
    $s{packages} = out('dpkg-query', '-W', '-f=${binary:Package} ${Version} ${db:Status-Abbrev}\n');
    $s{clusters} = join "\n", map { join ' ', (split ' ')[ 0, 1, 2, 5 ] } lines(out('pg_lsclusters', '-h'));
    my @apt = grep { -e } ('/etc/apt/sources.list', glob('/etc/apt/sources.list.d/*'), '/etc/apt/preferences',
        glob('/etc/apt/preferences.d/* /etc/apt/apt.conf.d/*'), '/etc/apt/trusted.gpg',
        glob('/etc/apt/trusted.gpg.d/* /etc/apt/keyrings/*'));
    $s{apt} = @apt ? out('sha256sum', @apt) : '';
    my @dirs = grep { -e } ("/usr/lib/postgresql/$V", "/usr/share/postgresql/$V", '/etc/postgresql',
        '/etc/postgresql-common', "/var/lib/postgresql/$V", '/var/log/postgresql');
    $s{files} = out('find', @dirs, '-printf', '%y %m %u %p\n');
    $s{traces} = join "\n", glob("/var/lib/dpkg/info/*$PKG* /usr/share/doc/*$PKG* $JDIR/fencing-package.* "
        . "$SCRATCH/fencing-package.*"), grep { /^Package: \Q$PKG\E$/ } lines(slurp('/var/lib/apt/extended_states'));
    $s{$_} = join "\n", sort(lines($s{$_})) for keys %s;
    return \%s;
}

# Differences between two snapshots that this test could have caused
# (packages changed meanwhile by someone else's apt run are only noted):
# (true when none, what differs).
sub compare {
    my ($a, $b) = @_;
    my ($ok, @said) = (1);
    for my $what (qw(packages clusters apt files traces)) {
        my %in_a = map { $_ => 1 } lines($a->{$what});
        my %in_b = map { $_ => 1 } lines($b->{$what});
        my @d = ((map {"< $_"} grep { !$in_b{$_} } lines($a->{$what})),
                 (map {"> $_"} grep { !$in_a{$_} } lines($b->{$what})));
        next unless @d;
        if ($what eq 'packages' && !grep { (split ' ')[1] =~ /^(postgresql|libpq|\Q$PKG\E)/ } @d) {
            push @said, 'note: packages changed meanwhile, not by this test:', @d;
            next;
        }
        $#d = 39 if @d > 40;
        push @said, "$what changed:", @d;
        $ok = 0;
    }
    return ($ok, join "\n", @said);
}

# --- the cleanup: END, on every exit, signals included ---

my ($started, $child) = (0, 0);
END {
    my $status = $?;
    if ($started) {
        $SIG{$_} = 'IGNORE' for qw(INT TERM HUP);
        $critical = 1;      # (the signal that brought us here is taken)
        # a nested run still going (a session of its own, out of reach of
        # a Ctrl-C) is stopped first: its own END cleans up after it
        if ($child && kill 0, $child) {
            kill 'TERM', -$child;
            for (1 .. 600) { last if waitpid($child, WNOHANG) != 0; sleep 1 }
        }
        undo_journal($JOURNAL);
    }
    $? = $status;
}

if ($MODE eq '--cleanup') {
    lock_run();
    print "$_\n" for reap();
    exit 0;
}
die "usage: package.pl [--cleanup]\n" unless $MODE eq 'run';

# ======================================================================
# the run

my $START = time;
lock_run();
my $NESTED = $ENV{FENCING_PACKAGE_DEB} ? 1 : 0;

# 1. what an interrupted earlier run left behind goes first; then whether
# fencing is here already, installed by something other than this test
if (!$NESTED) {
    my @reaped = reap();
    my $left = () = glob("$JDIR/fencing-package.*.journal");
    if (!$left && pkg_state($PKG) ne '') {
        note "$PKG is installed on this system, and not by this test: left alone";
        plan skip_all => "$PKG is installed here already (not by this suite)";
    }
    # fencing installed by other means (make install, a copy by hand): the
    # package would go over those files and its purge remove them, under a
    # server that may have the library loaded.  Left alone, as a package.
    if (!$left) {
        my @own = grep { -e && run('dpkg', '-S', $_) != 0 }
            ("$LIB/fencing.so", "$LIB/bitcode/fencing", "$EXT/fencing.control", glob("$EXT/fencing--*.sql"));
        if (@own) {
            note "not installed by a package, left alone: $_" for @own;
            plan skip_all => "fencing is installed here already, not by a package ($own[0] ...): "
              . 'the package would replace and then remove it';
        }
    }
    note $_ for @reaped;
    ok(!$left, 'no journal of an earlier run left (undone if there was one)');
}

$started = 1;
$work = tempdir("$SCRATCH/fencing-package.XXXXXX");
chmod 0755, $work;
spew($JOURNAL, '');
# (FENCING_KEEP=1 keeps it for a post-mortem, but never a nested run's:
# those are killed on purpose, and what they leave must go)
if ($ENV{FENCING_KEEP} && !$NESTED) { note "scratch directory (kept): $work" }
else { journal("dir $work") }

# 2. the build's tools (test/suites/package.sh installs the missing ones)
my @tools = qw(debhelper postgresql-server-dev-all lintian pgxnclient);
if (!$NESTED) {
    my @missing = grep { pkg_state($_) ne 'ii' } @tools;
    note "$_ is not installed" for @missing;
    ok(!@missing, 'the tools installed: ' . join ', ', map { "$_ " . pkg_version($_) } @tools);
}

my $pg_before = pkg_version("postgresql-$V");
my $before = snapshot();

# 3. the clean export: make dist (git archive of HEAD), unpacked
my $version = decode_json(slurp("$ROOT/META.json"))->{version};
my ($upstream) = slurp("$ROOT/fencing.control") =~ /^default_version\s*=\s*'(.*)'/m;
my $zip = $ENV{FENCING_PACKAGE_ZIP} // "$work/fencing-$version.zip";
sub unzip_to {      # the archive's tree as DIR
    my $dir = shift;
    remove_tree($dir, "$work/unzip");
    my ($st, $o) = run('python3', '-c', <<'EOF', $zip, "$work/unzip");
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
EOF
    diag $o if $st;
    return !$st && rename("$work/unzip/fencing-$version", $dir);
}
my $src = "$work/build/fencing-$upstream";
make_path("$work/build");
my ($st, $o) = (0, '');
($st, $o) = run({ log => 'dist' }, 'make', '-s', '-C', $ROOT, 'dist', "DISTDIR=$work") unless $NESTED;
$st ||= !unzip_to($src);
diag $o if $st;
ok(!$st, "make dist: fencing-$version.zip of HEAD, unpacked as the clean export fencing-$upstream/") unless $NESTED;
if ($st) { done_testing(); exit 1 }
my $debver = out({ dir => $src }, 'dpkg-parsechangelog', '-S', 'Version');
chomp(my $arch = out('dpkg', '--print-architecture'));
chomp $debver;
my $deb = $ENV{FENCING_PACKAGE_DEB} // "$work/build/${PKG}_${debver}_$arch.deb";
my $debdir = dirname($deb);
my $debname = basename($deb);

if (!$NESTED) {
    # 4. debian/control is generated from debian/control.in
    ($st, $o) = run({ dir => $src }, 'pg_buildext', 'checkcontrol');
    my $bad = $st || $o =~ /Updating/;
    diag $o if $bad;
    my $pgversions = join ' ', grep { !/^#/ } lines(slurp("$src/debian/pgversions"));
    ok(!$bad, "debian/control is what pg_buildext updatecontrol makes of debian/control.in (pgversions: $pgversions)");

    # 5. the source package (orig tarball: the export without debian/)
    ($st, $o) = run({ dir => "$work/build", log => 'source' }, 'sh', '-c',
        "tar --exclude='fencing-$upstream/debian' -czf 'fencing_$upstream.orig.tar.gz' 'fencing-$upstream'"
          . " && dpkg-source -b 'fencing-$upstream'");
    diag $o if $st;
    ok(!$st, "dpkg-source -b builds the source package fencing_$debver.dsc (3.0 (quilt))");

    # 6. the binary package
    my $t0 = time;
    ($st, $o) = run({ dir => $src, log => 'build' }, 'dpkg-buildpackage', '-us', '-uc', '-b');
    $st ||= !-f $deb;
    diag tail(40, $o) if $st;
    ok(!$st, "dpkg-buildpackage -us -uc -b builds $debname (" . (time - $t0) . ' s)');
    if ($st) { done_testing(); exit 1 }
    note join "\n", map { join ' ', (split ' ')[ 0, 2, 5 ] } lines(out('dpkg', '-c', $deb));

    # 7. lintian: no error; the warnings kept are these, for these reasons:
    #   initial-upload-closes-no-bugs: the first Debian revision of a package
    #     that is not uploaded to Debian: there is no ITP bug to close.
    my $lintian_ok = 'initial-upload-closes-no-bugs';
    make_path("$work/lintian");
    chmod 0777, "$work/lintian";
    ($st, $o) = run({ user => 'nobody', log => 'lintian', env => { HOME => "$work/lintian", TMPDIR => "$work/lintian" } },
        'lintian', '--info', '--display-info', '--pedantic',
        "$work/build/fencing_${debver}_$arch.changes", "$work/build/fencing_$debver.dsc");
    my @tags = grep {/^[EWIPX]: /} lines($o);
    note $_ for @tags;
    my $errors = grep {/^E: /} @tags;
    my @warnings = grep {/^W: /} @tags;
    my %unexplained = map {; (split ' ')[2] => 1 } grep { (split ' ')[2] !~ /^($lintian_ok)$/ } @warnings;
    diag 'warnings not explained in test/package/package.pl: ' . join ' ', sort keys %unexplained if %unexplained;
    ok(!$errors && !%unexplained && !$st,
        "lintian (binary and source): $errors errors, " . @warnings . " warnings, each explained ($lintian_ok)");
}

# 8. apt would install the package alone
$o = out({ dir => $debdir }, @APT, '-s', 'install', "./$debname");
my @planned = grep { /^(Inst|Remv|Conf|Purg) / && !/^Conf \Q$PKG\E / } lines($o);
note $_ for @planned;
ok(@planned == 1 && $planned[0] =~ /^Inst \Q$PKG\E /,
    "apt-get -s plans $PKG alone: nothing else installed, upgraded or removed");

# 9. install it as a DBA would (noting first which of its paths exist)
my @preexisting = grep { -e } map { my $f = (split ' ')[5]; $f =~ s{^\./}{/}; $f =~ s{/$}{}; length $f ? $f : () }
    lines(out('dpkg-deb', '-c', $deb));
journal("package $PKG");
($st, $o) = run({ dir => $debdir, session => 1, log => 'install' }, @APT, 'install', "./$debname");
$st ||= pkg_state($PKG) ne 'ii' || pkg_version($PKG) ne $debver || pkg_version("postgresql-$V") ne $pg_before;
diag tail(20, $o) if $st;
ok(!$st, "apt-get install ./$debname: $PKG $debver installed, postgresql-$V still $pg_before");

# 10. what it installed
my @installed = sort(lines(out('dpkg', '-L', $PKG)));
my @files = grep { -f } @installed;
my %is_file = map { $_ => 1 } @files;
my @missing = grep { !$is_file{$_} }
    ("$LIB/fencing.so", "$EXT/fencing.control", "$EXT/fencing--1.0.sql", "$EXT/fencing--1.0--1.1.sql");
diag "not installed: $_" for @missing;
my $same_control = slurp("$EXT/fencing.control") eq slurp("$src/fencing.control");
diag "fencing.control differs from the export's" unless $same_control;
($st, $o) = run({ log => 'verify' }, 'dpkg', '--verify', $PKG);
diag $o if $st || $o ne '';
ok(!@missing && $same_control && !$st && $o eq '',
    'dpkg -L: ' . @files . ' files, the library, control file and scripts among them; dpkg --verify finds them as packaged');

# 11-12. a cluster of the system's own, as a DBA makes one
my $CLUSTER = "fencing_pkg_$$";
$PORT = free_port();
journal("cluster $V $CLUSTER");
($st, $o) = run({ session => 1, log => 'createcluster' }, 'pg_createcluster', '--start-conf=manual', '-p', $PORT,
    '-o', 'shared_preload_libraries=fencing', '-o', 'fsync=off', $V, $CLUSTER);
$st ||= out('pg_conftool', '-s', $V, $CLUSTER, 'show', 'shared_preload_libraries') ne "fencing\n";
diag $o if $st;
ok(!$st, "pg_createcluster $V $CLUSTER on free port $PORT with shared_preload_libraries = 'fencing'");

sub ctl { run({ session => 1, log => "ctl-$_[0]" }, 'pg_ctlcluster', '--skip-systemctl-redirect', $V, $CLUSTER, @_) }
($st, $o) = ctl('start');
my (undef, $pl) = psql('postgres', '-c', 'SHOW shared_preload_libraries');
$st ||= $pl ne "fencing\n";
diag $o, $pl, tail(20, slurp("/var/log/postgresql/postgresql-$V-$CLUSTER.log")) if $st;
ok(!$st, "pg_ctlcluster $V $CLUSTER start: the server runs and preloads fencing");

# 13. CREATE EXTENSION, from the package's files
($st, $o) = psql('postgres', '-v', 'ON_ERROR_STOP=1', '-c', 'CREATE DATABASE fencing_pkg');
if (!$st) {
    ($st, $o) = psql('fencing_pkg', '-v', 'ON_ERROR_STOP=1', '-c', 'CREATE EXTENSION fencing',
        '-c', "SELECT extversion FROM pg_extension WHERE extname = 'fencing'",
        '-c', "SELECT pg_read_file('/proc/self/maps') ~ '$LIB/fencing\\.so'");
}
note $o;
ok(!$st && $o =~ /(?:^|\n)\Q$upstream\E\nt\n$/,
    "CREATE EXTENSION fencing: version $upstream, running $LIB/fencing.so from the package");

# 14. a stale write is rejected
spew("$work/stale.sql", <<'EOF');
\set VERBOSITY verbose
CREATE TABLE refunds (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES ('r-1', 'pending', NULL);
SELECT fencing.protect('refunds');
BEGIN;
SET LOCAL fencing.token = '3:42';
UPDATE refunds SET state = 'paid' WHERE id = 'r-1';
COMMIT;
BEGIN;
SET LOCAL fencing.token = '3:41';
UPDATE refunds SET state = 'paid twice' WHERE id = 'r-1';
COMMIT;
SELECT 'row: ' || state || ' ' || fence::text FROM refunds;
SELECT 'stats: ' || accepted || ' accepted, ' || rejected_stale || ' rejected as stale'
  FROM fencing.stats WHERE relid = 'refunds'::regclass;
EOF
chmod 0644, "$work/stale.sql";
sub stale_rejected { # the stale write of stale.sql in DB: (ok, output)
    my $out = (psql($_[0], '-f', "$work/stale.sql"))[1];
    return ($out =~ /ERROR:  SF001: stale fence token 3:41/ && $out =~ /^row: paid 3:42$/m
          && $out =~ /^stats: 1 accepted, 1 rejected as stale$/m, $out);
}
my ($good, $out) = stale_rejected('fencing_pkg');
note $out;
ok($good, 'a protected table: the write with token 3:42 commits, the stale one with 3:41 fails with SF001, '
    . 'nothing of it written, fencing.stats counts it');

# 15. the regression and isolation suites against this cluster
my $check = "$work/check";
unzip_to($check) && run('chown', '-R', 'postgres:', $check);
my $t0 = time;
spew($ENV{FENCING_PACKAGE_READY}, "$$\n") if $ENV{FENCING_PACKAGE_READY};
my %pgenv = (PGHOST => '/var/run/postgresql', PGPORT => $PORT);
($st, $o) = run({ user => 'postgres', env => \%pgenv, log => 'installcheck' },
    'make', '-C', $check, 'installcheck', "PG_CONFIG=$SYSBIN/pg_config");
my $passed = () = $o =~ /\.\.\. ok/g;
my $bad = () = $o =~ /\.\.\. (?:FAILED|failed)/g;
my $want = 0;
$want += split ' ', out('make', '-s', '-C', $check, $_, "PG_CONFIG=$SYSBIN/pg_config") for qw(print-regress print-isolation);
note $_ for grep {/\.\.\. (FAILED|failed)|tests (passed|failed)/} lines($o);
$st ||= $passed != $want || $bad;
diag tail(30, $o), map { tail(80, slurp($_)) } glob("$check/regression.diffs $check/output_iso/regression.diffs") if $st;
ok(!$st, "make installcheck against $CLUSTER (port $PORT): $passed of $want regression and isolation tests pass ("
    . (time - $t0) . ' s)');

# 16. and refuses a server that does not preload the library
run({ session => 1 }, 'pg_conftool', $V, $CLUSTER, 'remove', 'shared_preload_libraries');
ctl('restart');
(undef, $pl) = psql('postgres', '-c', 'SHOW shared_preload_libraries');
($st, $o) = run({ user => 'postgres', env => \%pgenv, log => 'nopreload' },
    'make', '-C', $check, 'installcheck', "PG_CONFIG=$SYSBIN/pg_config");
note $o;
ok($pl eq "\n" && $st && $o =~ /does not preload fencing/ && $o !~ /\.\.\. /,
    'without the preload, make installcheck refuses to run and says why (no test started)');

# 17. the package's autopkgtest, as autopkgtest runs it: a non-root user in
# a copy of the source tree, the package installed
my $auto = "$work/autopkgtest";
unzip_to($auto) && make_path("$auto.tmp") && run('chown', '-R', 'postgres:', $auto, "$auto.tmp");
$t0 = time;
($st, $o) = run({ dir => $auto, user => 'postgres', log => 'autopkgtest',
        env => { HOME => "$auto.tmp", TMPDIR => "$auto.tmp", AUTOPKGTEST_TMP => "$auto.tmp", PGPORT => free_port() } },
    'debian/tests/installcheck');
my $apassed = () = $o =~ /\.\.\. ok/g;
my $abad = () = $o =~ /\.\.\. (?:FAILED|failed)/g;
note $_ for grep {/^### |tests (passed|failed)|\.\.\. (FAILED|failed)/} lines($o);
$st ||= $apassed != $want || $abad;
diag tail(60, $o) if $st;
ok(!$st, 'autopkgtest debian/tests/installcheck (pg_buildext installcheck, pg_virtualenv with the preload): '
    . "$apassed of $want pass (" . (time - $t0) . ' s)');

# 18. purge the package (the cluster runs on: since step 16 it does not
# preload the library, so the server does not need its files)
($st, $o) = run({ session => 1, log => 'purge' }, @APT, 'purge', $PKG);
$st ||= pkg_state($PKG) ne '';
unjournal("package $PKG") unless $st;
diag tail(20, $o) if $st;
ok(!$st, "apt-get purge $PKG: not installed, no configuration files kept");

# 19. none of its files is left: every path that `dpkg -L` listed is gone,
# but for the directories that were there before the package came
my %pre = map { $_ => 1 } grep { -d } @preexisting;
my @paths = grep { $_ ne '/.' } @installed;
my @left = grep { (-e || -l) && !(-d && $pre{$_}) } @paths;
diag "left: $_" for @left;
ok(!@left, 'none of the ' . @paths . ' paths that dpkg -L listed is left (ls after the purge; '
    . keys(%pre) . ' directories were there before)');

# 20-22. the PGXN client on the release archive, offline: what `pgxn install
# fencing` does after the download (make, make install into the server of
# pg_config), then `pgxn load` (CREATE EXTENSION, as META.json's provides
# says), against the same cluster
my @pgxn_opts = ('--pg_config', "$SYSBIN/pg_config", '--make', 'make');
($st, $o) = (1, '');
if (pkg_state($PKG) eq '') {
    journal("pgxn $zip");
    ($st, $o) = run({ log => 'pgxn-install' }, 'pgxn', 'install', @pgxn_opts, $zip);
    for my $f ("$LIB/fencing.so", "$EXT/fencing.control") { next if -f $f; diag "not installed: $f"; $st = 1 }
    if (run('dpkg', '-S', "$LIB/fencing.so") == 0) { diag 'fencing.so belongs to a package'; $st = 1 }
}
diag tail(30, $o) if $st;
ok(!$st, 'pgxn install ' . basename($zip) . ": built from the archive and installed into the system's PostgreSQL $V, "
    . 'owned by no package');

make_path("$work/pgxn");
run('chown', 'postgres:', "$work/pgxn");
($st, $o) = psql('postgres', '-c', 'CREATE DATABASE fencing_pgxn');
if (!$st) {
    my $o2;
    ($st, $o2) = run({ user => 'postgres', env => { TMPDIR => "$work/pgxn" } }, 'pgxn', 'load',
        '--pg_config', "$SYSBIN/pg_config", '-h', '/var/run/postgresql', '-p', $PORT, '-U', 'postgres',
        '-d', 'fencing_pgxn', $zip);
    $o .= $o2;
}
my $v = '';
($st, $v) = psql('fencing_pgxn', '-c', "SELECT extversion FROM pg_extension WHERE extname = 'fencing'") unless $st;
note $o, $v;
ok(!$st && $v eq "$upstream\n", "pgxn load: CREATE EXTENSION fencing from META.json's provides, version $upstream");

# (not `pgxn check` as well: that is make installcheck a third time, which
# steps 15 and 17 run already; a functional check of this build instead)
run({ session => 1 }, 'pg_conftool', $V, $CLUSTER, 'set', 'shared_preload_libraries', 'fencing');
ctl('restart');
($good, $out) = stale_rejected('fencing_pgxn');
note $_ for grep {/ERROR|^row|^stats/} lines($out);
ok($good, 'the PGXN build, preloaded again: the stale write fails with SF001, nothing of it written, fencing.stats counts it');

# 23. drop the cluster
($st, $o) = run({ session => 1, log => 'drop' }, 'pg_dropcluster', '--stop', $V, $CLUSTER);
unjournal("cluster $V $CLUSTER");
$st ||= grep { $_ eq $CLUSTER } clusters();
for my $p ("/etc/postgresql/$V/$CLUSTER", "/var/lib/postgresql/$V/$CLUSTER", "/var/log/postgresql/postgresql-$V-$CLUSTER.log") {
    next unless -e $p;
    diag "left: $p";
    $st = 1;
}
diag $o if $st;
ok(!$st, "pg_dropcluster --stop $V $CLUSTER: no configuration, data or log of it left");

# 24. pgxn uninstall
($st, $o) = run({ log => 'pgxn-uninstall' }, 'pgxn', 'uninstall', @pgxn_opts, $zip);
unjournal("pgxn $zip") unless $st;
my @leftover = lines(out('find', "/usr/lib/postgresql/$V", "/usr/share/postgresql/$V", '-name', '*fencing*'));
diag "left: $_" for @leftover;
diag tail(20, $o) if $st;
ok(!$st && !@leftover, "pgxn uninstall: no file named fencing left under /usr/lib/postgresql/$V or /usr/share/postgresql/$V");

# 25. the system is as it was found
sub as_found {      # (ok, what differs) against the first snapshot
    my ($same, $said) = compare($before, snapshot());
    note $said if $said;
    return $same && pkg_version("postgresql-$V") eq $pg_before;
}
ok(as_found(), "the system is as found: packages (postgresql-$V $pg_before), clusters, apt sources, PostgreSQL's directories");

# 26-29. a run killed midway, once with SIGTERM, once with SIGKILL
if ($NESTED) { done_testing(); exit 0 }

sub pgrep_regress { run('pgrep', '-g', $_[0], '-f', 'pg_(isolation_)?regress') == 0 }
sub killed_run {    # killed_run(SIGNAL): start a nested run, kill it once it is up; (ok, what happened)
    my $sig = shift;
    my ($ready, $log) = ("$work/ready.$sig", "$work/child.$sig.log");
    unlink $ready;
    $child = fork // die "fork: $!";
    if (!$child) {
        POSIX::setsid();
        open(STDIN, '<', '/dev/null');
        open(STDOUT, '>', $log);
        open(STDERR, '>&', \*STDOUT);
        @ENV{qw(FENCING_PACKAGE_DEB FENCING_PACKAGE_ZIP FENCING_PACKAGE_READY)} = ($deb, $zip, $ready);
        exec $^X, $SELF, 'run' or POSIX::_exit(127);
    }
    my $pid = $child;
    my ($exited, $status);
    my $gone = sub { my $w = waitpid($pid, WNOHANG); $status = $? if $w == $pid; $w != 0 };
    for (1 .. 900) { last if -f $ready || ($exited = $gone->()); sleep 1 }
    return (0, "child $pid never got ready\n" . slurp($log)) unless -f $ready;
    # midway: once pg_regress runs in the child's process group
    for (1 .. 3000) { last if pgrep_regress($pid) || ($exited = $gone->()); sleep 0.2 }
    return (0, "child $pid: no installcheck running to interrupt\n" . slurp($log)) if $exited || !pgrep_regress($pid);
    my @said = ("child $pid: package installed, cluster up, installcheck running; kill -$sig to its process group",
        map {"  child: $_"} grep {/^(not )?ok /} lines(slurp($log)));
    kill $sig, -$pid;
    for (1 .. 600) { last if $gone->(); sleep 1 }
    return (0, join "\n", @said, "child $pid still running after 600 s") if kill 0, $pid;
    $child = 0;
    return (1, join "\n", @said, "child $pid exited with status " . ($status & 127 ? 'killed by signal ' . ($status & 127) : $status >> 8));
}

my ($killed, $said) = killed_run('TERM');
note $said;
ok($killed, 'a run killed with SIGTERM midway (package installed, cluster up, installcheck running) exits');
ok($killed && as_found(), 'its trap left nothing behind: no package, cluster, journal or file of it');

($killed, $said) = killed_run('KILL');
note $said;
my ($cpid) = $said =~ /^child (\d+)/;
$cpid //= 0;
# the kill must have left something, or this proves nothing
$killed &&= -f "$JDIR/fencing-package.$cpid.journal" && pkg_state($PKG) eq 'ii'
    && grep { $_ eq "fencing_pkg_$cpid" } clusters();
# and its server, still running, does not hold the test's lock
my ($pm) = slurp("/var/lib/postgresql/$V/fencing_pkg_$cpid/postmaster.pid") =~ /^(\d+)/;
if (!$pm || !kill 0, $pm) { diag "the killed run's server is not running"; $killed = 0 }
elsif (grep { (readlink($_) // '') eq $LIB } glob("/proc/$pm/fd/*")) { diag "the killed run's server $pm holds the lock"; $killed = 0 }
ok($killed, 'a run killed with SIGKILL midway leaves its journal, the package and its cluster (running, without the lock) behind');
($st, $o) = run($^X, $SELF, '--cleanup');
note $o;
ok(!$st && as_found(), 'the cleanup step every run starts with (package.pl --cleanup) removes all of it: the system is as found');

note scalar(Test::More->builder->current_test) . ' steps in ' . (time - $START) . ' s';
done_testing();
