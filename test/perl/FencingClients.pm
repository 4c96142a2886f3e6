# test/perl/FencingClients.pm: what the client TAP tests share
# (test/t/120_client_python.pl, 121_client_go.pl, 122_client_typescript.pl,
# 123_examples.pl, 124_client_java.pl): a server to test against, programs
# run in process groups of their own (stopped when the test ends, however
# it ends), and the TAP or test output of those programs turned into
# checks of this test.
#
# The edition: FENCING_CLIENT_EDITION=managed (test/lib/managed.sh's
# fencing_client_prove sets it) runs the clients against the edition for
# managed PostgreSQL (managed/, fencing_sql) instead of the C edition: the
# server preloads pg_tle, not fencing, and each database has the edition
# installed through pg_tle by a role that is not a superuser, member of
# pgtle_admin, with CREATE on the database (test/lib/managed.sh's
# fencing_managed_db, as the managed suite installs it); that role owns
# the database, as RDS's master user owns the databases it creates, and
# the clients connect as it.
#
#   FencingClients::need_env($suite, VAR => what, ...)
#                                           the directories the suite gives;
#                                           plan skip_all without them
#   FencingClients::server($name)          a cluster with fencing preloaded
#                                           (the managed edition: pg_tle),
#                                           listening on 127.0.0.1 too
#   FencingClients::database($node, $db, $ext)
#                                           database $db; $ext: with the C
#                                           edition (CREATE EXTENSION fencing);
#                                           the managed edition: always with
#                                           it, installed as RDS installs it
#   FencingClients::managed()              true in the managed edition's pass
#   FencingClients::user()                 the role the clients connect as
#   FencingClients::run(%o)                run a command (cmd, env, dir,
#                                           timeout, log): its status and
#                                           output; a group of its own
#   FencingClients::start(%o), finish($job) the same in two steps: the
#                                           command runs while the test goes
#                                           on (its output into log only)
#   FencingClients::tap_checks($out, %o)   "ok - ...", "not ok - ..." lines
#                                           (numbered or not) as checks
#   FencingClients::pgenv($node, $db)      libpq's variables for it (TCP)
#   FencingClients::services($node, $db, @names)
#                                           etcd, ZooKeeper, Redis, PgBouncer
#                                           (test/perl/FencingLockSvc.pm)
#   FencingClients::stop_all()             stop every group started
#   FencingClients::leftovers(@patterns)   processes still alive: groups
#                                           started, command lines matching
package FencingClients;

use strict;
use warnings;

use Cwd ();
use Exporter 'import';
use File::Basename ();
use FencingLockSvc;
use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

our @EXPORT_OK = qw(need_env server run start finish tap_checks stop_all leftovers);

my @groups;    # [ name, pgid ] of every process group started

# The variables suite $suite sets (VAR => what it names), as a hash; skip
# the test when one is not set or names nothing.
sub need_env
{
	my ($suite, %vars) = @_;
	my %v;
	foreach my $var (sort keys %vars)
	{
		plan skip_all => "$var is not set ($vars{$var}; test/suites/$suite.sh "
		  . 'sets it, test/README.md)'
		  unless $ENV{$var} && -e $ENV{$var};
		$v{$var} = $ENV{$var};
	}
	return \%v;
}

# The managed edition's pass?  The role the clients connect as: postgres,
# or in that pass the role that installs the edition.
sub managed { return ($ENV{FENCING_CLIENT_EDITION} // '') eq 'managed'; }
sub user { return managed() ? 'client_admin' : 'postgres'; }

# A cluster with fencing preloaded (in the managed edition's pass pg_tle
# instead), on 127.0.0.1 (the clients connect by TCP, as the URLs of the
# examples do); its superuser is postgres, whoever runs the test (the
# clients' tests and the examples connect as user()).
sub server
{
	my ($name, @conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$ENV{PGUSER} = 'postgres';
	$node->init(extra => [ '-U', 'postgres' ]);
	$node->append_conf('postgresql.conf', join("\n",
		"shared_preload_libraries = '" . (managed() ? 'pg_tle' : 'fencing') . "'",
		"listen_addresses = '127.0.0.1'",
		'max_connections = 100',
		'max_prepared_transactions = 10',
		'log_statement = none',
		@conf) . "\n");
	$node->start;
	note 'against the edition for managed PostgreSQL (fencing_sql through pg_tle, installed and used by '
	  . user() . ', not a superuser)' if managed();
	return $node;
}

# Database $db of $node: with the C edition when $ext is true (else
# empty: a program under test creates the extension); in the managed
# edition's pass always with the edition, installed by user() through
# pg_tle (test/lib/managed.sh), and owned by user().
sub database
{
	my ($node, $db, $ext) = @_;
	if (!managed())
	{
		$node->safe_psql('postgres', "CREATE DATABASE $db");
		$node->safe_psql($db, 'CREATE EXTENSION fencing') if $ext;
		return;
	}
	my $lib = Cwd::abs_path(File::Basename::dirname(__FILE__) . '/../lib');
	my ($st, $out) = run(
		name => 'fencing_managed_db',
		cmd  => [ 'bash', '-c', '. "$1/common.sh" && . "$1/pgtle.sh" && . "$1/managed.sh" && fencing_managed_db "$2" pgtle "$3"',
			'-', $lib, $db, user() ],
		env  => {
			PGHOST => $node->host, PGPORT => $node->port, PGUSER => 'postgres',
			FENCING_BINDIR => $node->config_data('--bindir'),
			FENCING_SRC => Cwd::abs_path("$lib/../..") },
		timeout => 300);
	die "the managed edition in database $db: $out" if $st != 0;
	$node->safe_psql('postgres', "ALTER DATABASE $db OWNER TO " . user());
	return;
}

# The libpq environment of $node's database $db, by TCP.
sub pgenv
{
	my ($node, $db) = @_;
	return (
		PGHOST     => '127.0.0.1',
		PGPORT     => $node->port,
		PGUSER     => user(),
		PGDATABASE => $db);
}

# Is a process of the group alive?  (Its members that are children of this
# process are reaped first: a zombie is no process.)
sub alive
{
	my ($pgid) = @_;
	1 while waitpid(-$pgid, POSIX::WNOHANG()) > 0;
	return kill(0, -$pgid) ? 1 : 0;
}

# Stop a process group: SIGCONT (it may be frozen), SIGTERM, SIGKILL after
# 10 s.
sub stop_group
{
	my ($pgid) = @_;
	return unless alive($pgid);
	kill 'CONT', -$pgid;
	kill 'TERM', -$pgid;
	for (1 .. 100) { return unless alive($pgid); sleep 0.1; }
	kill 'KILL', -$pgid;
	for (1 .. 50) { return unless alive($pgid); sleep 0.1; }
}

sub stop_all
{
	stop_group($_->[1]) foreach reverse @groups;
	FencingLockSvc::stop_all();
	return;
}

END { local $?; stop_all(); }

# Run a command in a process group of its own, its output into $o{log}
# (and returned): (exit status, output).  cmd => [...], env => {...} (added
# to this environment), dir, timeout (seconds, 600), name.
sub run
{
	my (%o) = @_;
	return finish(start(%o, keep => 1));
}

# Start a command as run() does and return at once; finish($job) waits for
# it and returns what run() returns.  Without keep its output goes only to
# $o{log} (a command that writes much cannot block on a pipe nobody reads).
sub start
{
	my (%o) = @_;
	local %ENV = (%ENV, %{ $o{env} // {} });
	my $out = '';
	my $t = IPC::Run::timeout($o{timeout} // 600);
	my @to = $o{keep} ? ('>&', \$out) : ('>&', $o{log} // '/dev/null');
	my $h = IPC::Run::start(
		$o{cmd}, '<', \undef, @to,
		init => sub {
			POSIX::setsid();
			chdir $o{dir} or die "chdir $o{dir}: $!" if $o{dir};
		},
		$t);
	my $pgid = $h->{KIDS}[0]{PID};
	push @groups, [ $o{name} // $o{cmd}[0], $pgid ];
	return { h => $h, out => \$out, pgid => $pgid, o => \%o };
}

sub finish
{
	my ($job) = @_;
	my ($h, $pgid, %o) = ($job->{h}, $job->{pgid}, %{ $job->{o} });
	my $out = $job->{out};
	my $st;
	if (eval { $h->finish; 1 })
	{
		my $full = $h->full_result(0);
		$st = $full & 127 ? -($full & 127) : $full >> 8;
	}
	else
	{
		$$out .= "\n[killed: $@]\n";
		stop_group($pgid);
		eval { $h->kill_kill; 1 };
		$st = -1;
	}
	# the group too, with what it left running (workers it started)
	stop_group($pgid);
	if (!$o{keep})
	{
		$$out = -f ($o{log} // '') ? PostgreSQL::Test::Utils::slurp_file($o{log}) : '';
		$$out .= "\n[killed: timeout]\n" if $st == -1;
	}
	elsif ($o{log})
	{
		open my $fh, '>', $o{log} or die "$o{log}: $!";
		print $fh $$out;
		close $fh;
	}
	return ($st, $$out);
}

# TAP lines of a program's output as checks of this test: "ok - NAME",
# "ok N - NAME" (top level only: no indentation), "... # SKIP why" as a
# skipped check; the "#" lines that follow a failing one as diagnostics,
# the others as notes.  $o{prefix} goes before each name; $o{notes} = 0
# drops the notes.  Returns (checks, failed).
sub tap_checks
{
	my ($out, %o) = @_;
	my ($n, $bad, $failing) = (0, 0, 0);
	foreach my $line (split /\n/, $out)
	{
		if ($line =~ /^(not )?ok(?: \d+)?(?: -)? (.*?)\s*$/)
		{
			my ($not, $name) = ($1, ($o{prefix} // '') . $2);
			$n++;
			if (!$not && $name =~ /^(.*?)\s*#\s*SKIP\b\s*(.*)$/i)
			{
			  SKIP: { skip("$1: $2", 1); }
				next;
			}
			ok(!$not, $name);
			$failing = !!$not;
			$bad++ if $not;
		}
		elsif ($line =~ /^#\s?(.*)$/)
		{
			if ($failing) { diag($1); }
			elsif ($o{notes} // 1) { note($1); }
		}
		elsif ($failing && $line =~ /\S/)
		{
			diag($line);
		}
	}
	return ($n, $bad);
}

# What is still alive: every group started (name: its processes), and
# every process whose command line matches one of @patterns (not this one
# nor its ancestors).
sub leftovers
{
	my (@patterns) = @_;
	my @left = FencingLockSvc::leftovers();
	foreach my $g (@groups)
	{
		push @left, "$g->[0] (process group $g->[1])" if alive($g->[1]);
	}
	# not this process, nor those that started it (make's shell names
	# tmp_check)
	my %mine;
	for (my $p = $$; $p > 1 && !$mine{$p}; )
	{
		$mine{$p} = 1;
		open my $st, '<', "/proc/$p/stat" or last;
		($p) = (<$st> // '') =~ /\)\s+\S+\s+(\d+)/ or last;
		close $st;
	}
	opendir my $d, '/proc' or return @left;
	foreach my $pid (grep { /^\d+$/ && !$mine{$_} } readdir $d)
	{
		open my $fh, '<', "/proc/$pid/cmdline" or next;
		my $cmd = do { local $/; <$fh> } // '';
		close $fh;
		$cmd =~ s/\0/ /g;
		push @left, "$pid: $cmd" if grep { index($cmd, $_) >= 0 } @patterns;
	}
	closedir $d;
	return @left;
}

# ---------------------------------------------------------------------
# lock services, from test/perl/FencingLockSvc.pm (each a process group of
# this test on free ports, stopped when it ends)

# Start the services named (etcd zookeeper redis pgbouncer; ZooKeeper an
# ensemble of three, PgBouncer in transaction mode with one server
# connection in front of database $db of $node); returns { etcd => URL,
# etcd_port, zk => connect string, redis_port, pgbouncer_port }, or undef
# (with diagnostics) when one did not come up.
sub services
{
	my ($node, $db, @want) = @_;
	my %want = map { $_ => 1 } @want;
	my @missing = FencingLockSvc::missing(@want);
	if (@missing)
	{
		diag("missing: @missing");
		return undef;
	}
	my %s;
	my $ok = eval {
		if ($want{etcd})
		{
			my $etcd = FencingLockSvc::Etcd->start;
			$s{etcd} = $etcd->url;
			($s{etcd_port}) = $etcd->endpoint =~ /:(\d+)$/;
		}
		$s{zk} = FencingLockSvc::ZooKeeper->start(servers => 3)->hosts
		  if $want{zookeeper};
		$s{redis_port} = FencingLockSvc::Redis->start->port if $want{redis};
		$s{pgbouncer_port} = FencingLockSvc::PgBouncer->start(
			node => $node, dbname => $db, user => user())->port
		  if $want{pgbouncer};
		1;
	};
	return \%s if $ok;
	diag("the services did not come up: $@");
	return undef;
}

1;
