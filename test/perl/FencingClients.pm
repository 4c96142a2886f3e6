# test/perl/FencingClients.pm: what the client TAP tests share
# (test/t/120_client_python.pl, 121_client_go.pl, 122_client_typescript.pl,
# 123_examples.pl): a server to test against, programs run in process
# groups of their own (stopped when the test ends, however it ends), and
# the TAP or test output of those programs turned into checks of this test.
#
#   FencingClients::need_env(VAR...)       the directories the suite gives;
#                                           plan skip_all without them
#   FencingClients::server($name)          a cluster with fencing preloaded,
#                                           listening on 127.0.0.1 too
#   FencingClients::run(%o)                run a command (cmd, env, dir,
#                                           timeout, log): its status and
#                                           output; a group of its own
#   FencingClients::tap_checks($out, %o)   "ok - ...", "not ok - ..." lines
#                                           (numbered or not) as checks
#   FencingClients::stop_all()             stop every group started
#   FencingClients::leftovers(@patterns)   processes still alive: groups
#                                           started, command lines matching
package FencingClients;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use Time::HiRes qw(time sleep);

our @EXPORT_OK = qw(need_env server run tap_checks stop_all leftovers);

my @groups;    # [ name, pgid ] of every process group started

# The variables the suite sets, as a hash; skip the test without one.
sub need_env
{
	my (%vars) = @_;    # VAR => what it names
	my %v;
	foreach my $var (sort keys %vars)
	{
		plan skip_all => "$var is not set ($vars{$var}; the suite "
		  . "test/suites/NAME.sh sets it, test/README.md)"
		  unless $ENV{$var} && -e $ENV{$var};
		$v{$var} = $ENV{$var};
	}
	return \%v;
}

# A cluster with fencing preloaded, on 127.0.0.1 (the clients connect by
# TCP, as PgBouncer and the URLs of the examples do).
sub server
{
	my ($name, @conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf', join("\n",
		"shared_preload_libraries = 'fencing'",
		"listen_addresses = '127.0.0.1'",
		'max_connections = 100',
		'max_prepared_transactions = 10',
		'log_statement = none',
		@conf) . "\n");
	$node->start;
	return $node;
}

# The libpq environment of $node's database $db, by TCP.
sub pgenv
{
	my ($node, $db) = @_;
	return (
		PGHOST     => '127.0.0.1',
		PGPORT     => $node->port,
		PGUSER     => 'postgres',
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

sub stop_all { stop_group($_->[1]) foreach reverse @groups; return; }

END { local $?; stop_all(); }

# Run a command in a process group of its own, its output into $o{log}
# (and returned): (exit status, output).  cmd => [...], env => {...} (added
# to this environment), dir, timeout (seconds, 600), name.
sub run
{
	my (%o) = @_;
	local %ENV = (%ENV, %{ $o{env} // {} });
	my $out = '';
	my $t = IPC::Run::timeout($o{timeout} // 600);
	my $h = IPC::Run::start(
		$o{cmd}, '<', \undef, '>&', \$out,
		init => sub {
			POSIX::setsid();
			chdir $o{dir} or die "chdir $o{dir}: $!" if $o{dir};
		},
		$t);
	my $pgid = $h->{KIDS}[0]{PID};
	push @groups, [ $o{name} // $o{cmd}[0], $pgid ];
	my $st;
	if (eval { $h->finish; 1 })
	{
		my $full = $h->full_result(0);
		$st = $full & 127 ? -($full & 127) : $full >> 8;
	}
	else
	{
		$out .= "\n[killed: $@]\n";
		stop_group($pgid);
		eval { $h->kill_kill; 1 };
		$st = -1;
	}
	# the group too, with what it left running (workers it started)
	stop_group($pgid);
	if ($o{log})
	{
		open my $fh, '>', $o{log} or die "$o{log}: $!";
		print $fh $out;
		close $fh;
	}
	return ($st, $out);
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
# every process whose command line matches one of @patterns (not this one).
sub leftovers
{
	my (@patterns) = @_;
	my @left;
	foreach my $g (@groups)
	{
		push @left, "$g->[0] (process group $g->[1])" if alive($g->[1]);
	}
	opendir my $d, '/proc' or return @left;
	foreach my $pid (grep { /^\d+$/ && $_ != $$ } readdir $d)
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
# lock services: etcd (one member), ZooKeeper (three servers), Redis,
# PgBouncer (transaction pooling, one server connection), each a process
# group of this test on free ports of 127.0.0.1, under tmp_check

# Start a long-running program in a group of its own, its output in $log.
sub spawn
{
	my ($name, $log, @cmd) = @_;
	my $h = IPC::Run::start(\@cmd, '<', \undef, '>>', $log, '2>&1',
		init => sub { POSIX::setsid(); });
	push @groups, [ $name, $h->{KIDS}[0]{PID} ];
	return $h;
}

# Poll $check until it returns true; false after $secs.
sub wait_for
{
	my ($secs, $check) = @_;
	my $end = time + $secs;
	while (time < $end)
	{
		return 1 if $check->();
		sleep 0.1;
	}
	return 0;
}

# Send $text to 127.0.0.1:$port, return what comes back (up to 4 kB).
sub talk
{
	my ($port, $text) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1', PeerPort => $port, Timeout => 3) or return '';
	print $s $text;
	$s->shutdown(1) if $text =~ /^[a-z]{4}$/;    # a ZooKeeper four-letter word
	my $got = '';
	while (defined(my $l = <$s>)) { $got .= $l; last if length $got > 4096 || $l =~ /^\+PONG/; }
	close $s;
	return $got;
}

sub port { return PostgreSQL::Test::Cluster::get_free_port(); }

# Start the services named (etcd zookeeper redis pgbouncer) for database $db
# of $node; returns { etcd => URL, etcd_port, zk => connect string,
# redis_port, pgbouncer_port }, or undef (with diagnostics) when one did
# not come up.
sub services
{
	my ($node, $db, @want) = @_;
	my %want = map { $_ => 1 } @want;
	my $dir = "$PostgreSQL::Test::Utils::tmp_check/services";
	mkdir $dir;
	my %s;
	if ($want{etcd})
	{
		my ($c, $p) = (port(), port());
		mkdir "$dir/etcd";
		@s{qw(etcd etcd_port)} = ("http://127.0.0.1:$c", $c);
		spawn('etcd', "$dir/etcd/etcd.log", 'etcd', '--name', 's1',
			'--data-dir', "$dir/etcd/data",
			'--listen-client-urls', $s{etcd}, '--advertise-client-urls', $s{etcd},
			'--listen-peer-urls', "http://127.0.0.1:$p",
			'--initial-advertise-peer-urls', "http://127.0.0.1:$p",
			'--initial-cluster', "s1=http://127.0.0.1:$p",
			'--initial-cluster-state', 'new', '--log-level', 'warn');
	}
	my @zk;
	if ($want{zookeeper})
	{
		@zk = map { { n => $_, port => port(), quorum => port(), election => port() } } 1 .. 3;
		foreach my $z (@zk)
		{
			my $d = "$dir/zk$z->{n}";
			mkdir $d;
			mkdir "$d/data";
			PostgreSQL::Test::Utils::append_to_file("$d/data/myid", "$z->{n}\n");
			PostgreSQL::Test::Utils::append_to_file("$d/zoo.cfg", join("\n",
				'tickTime=500', 'initLimit=20', 'syncLimit=10',
				'minSessionTimeout=1000', 'maxSessionTimeout=10000',
				"dataDir=$d/data", "clientPort=$z->{port}", 'clientPortAddress=127.0.0.1',
				'admin.enableServer=false', '4lw.commands.whitelist=srvr,ruok',
				(map { "server.$_->{n}=127.0.0.1:$_->{quorum}:$_->{election}" } @zk)) . "\n");
			system('cp', '/etc/zookeeper/conf/log4j.properties', "$d/");
			spawn("zookeeper-$z->{n}", "$d/server.log", 'java', '-Xmx128m',
				'-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1',
				'-Dzookeeper.root.logger=WARN,CONSOLE', "-Dzookeeper.log.dir=$d",
				'-cp', "$d:/usr/share/java/zookeeper.jar",
				'org.apache.zookeeper.server.quorum.QuorumPeerMain', "$d/zoo.cfg");
		}
		$s{zk} = join(',', map { "127.0.0.1:$_->{port}" } @zk);
	}
	if ($want{redis})
	{
		$s{redis_port} = port();
		mkdir "$dir/redis";
		spawn('redis', "$dir/redis/redis.log", 'redis-server', '--port', $s{redis_port},
			'--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
			'--dir', "$dir/redis", '--daemonize', 'no');
	}
	if ($want{pgbouncer})
	{
		my $d = "$dir/pgbouncer";
		mkdir $d;
		$s{pgbouncer_port} = port();
		PostgreSQL::Test::Utils::append_to_file("$d/userlist.txt", qq{"postgres" ""\n});
		PostgreSQL::Test::Utils::append_to_file("$d/pgbouncer.ini", join("\n",
			'[databases]', "$db = host=127.0.0.1 port=" . $node->port . " dbname=$db user=postgres",
			'', '[pgbouncer]', 'listen_addr = 127.0.0.1', "listen_port = $s{pgbouncer_port}",
			'unix_socket_dir =', 'auth_type = trust', "auth_file = $d/userlist.txt",
			'pool_mode = transaction', 'default_pool_size = 1', 'max_client_conn = 20',
			'ignore_startup_parameters = extra_float_digits,options',
			"logfile = $d/pgbouncer.log") . "\n");
		spawn('pgbouncer', "$d/stdout.log", 'pgbouncer', "$d/pgbouncer.ini");
	}
	my @bad;
	push @bad, 'etcd' if $want{etcd} && !wait_for(60, sub {
		system("ETCDCTL_API=3 etcdctl --endpoints=$s{etcd} endpoint health >/dev/null 2>&1") == 0 });
	push @bad, 'Redis' if $want{redis} && !wait_for(30, sub { talk($s{redis_port}, "PING\r\n") =~ /PONG/ });
	push @bad, 'PgBouncer' if $want{pgbouncer} && !wait_for(30, sub {
		my $psql = $node->installed_command('psql');
		system($psql, '-X', '-qAt', '-h', '127.0.0.1', '-p', $s{pgbouncer_port}, '-U', 'postgres',
			'-d', $db, '-c', 'SELECT 1', '-o', '/dev/null') == 0 });
	push @bad, 'ZooKeeper (a leader, every server serving)' if $want{zookeeper} && !wait_for(120, sub {
		my @modes = map { talk($_->{port}, 'srvr') =~ /^Mode: (\w+)/m ? $1 : '' } @zk;
		(grep { $_ eq 'leader' } @modes) == 1 && !grep { $_ !~ /^(leader|follower)$/ } @modes });
	return \%s unless @bad;
	diag("did not come up: @bad; logs under $dir");
	foreach my $log (glob("$dir/*/*.log"))
	{
		diag("$log:\n" . `tail -n 15 '$log'`);
	}
	return undef;
}

1;
