# test/perl/FencingLockSvc.pm: real lock services for the Perl TAP tests.
#
# etcd, ZooKeeper, Redis and PgBouncer from Debian's packages, each started
# as a CHILD PROCESS OF THE TEST on free ports of 127.0.0.1, and worker
# processes that can be frozen (SIGSTOP) and thawed.  Every process is
# started in a session (and process group) of its own, and every group
# started is stopped when the test ends, also when it dies (an END block;
# SIGINT and SIGTERM exit through it too): SIGCONT, SIGTERM, and SIGKILL
# after 10 s.  Files (data, configuration, logs) go under dir().
#
#   use FencingLockSvc;
#
# Functions (FencingLockSvc::NAME, none exported by default; each can be
# imported: use FencingLockSvc qw(event wait_until);)
#
#   dir()                      the run's directory, made empty on first use:
#                              tmp_check/locksvc-<test file's name>
#   free_port()                a free TCP port of 127.0.0.1 (reserved as
#                              PostgreSQL::Test::Cluster reserves its own)
#   missing(@what)             what is missing to run @what (etcd,
#                              zookeeper, redis, pgbouncer, java, go, node):
#                              a list of reasons, empty when all is there
#   spawn($name, \@cmd, %opt)  start @cmd in a session of its own; its pid
#                              (= its process group).  %opt: log => FILE
#                              (stdout and stderr appended, default
#                              dir()/NAME.log), env => {VAR => value},
#                              cwd => DIR, stdin/stdout/stderr => FILE
#   stop_group($pid)           SIGCONT, SIGTERM, SIGKILL after 10 s, to its
#                              group; waits until the group is gone
#   wait_exit($pid, $secs)     wait for a spawned process to end: its exit
#                              status ($?), or undef after $secs
#   stop_all()                 stop every group started (newest first)
#   leftovers()                the groups started still alive, and every
#                              process whose command line names dir(): a
#                              list of lines (empty when none)
#   run(\@cmd, %opt)           run a command to its end: (ok, stdout,
#                              stderr, exit code: -1 when it timed out);
#                              %opt: env, timeout (s, default 60)
#   wait_until($what, $secs, sub { ... })
#                              poll (every 0.1 s) until the sub returns
#                              true; false (and a diag) after $secs
#   event($who, $text)         a line of the timeline, as a TAP comment:
#                              "[  1.234s] who        text"
#   listen_tcp($node)          before $node->start: let a
#                              PostgreSQL::Test::Cluster node listen on
#                              127.0.0.1 too (its pg_hba trusts it), for
#                              clients that cannot use a Unix socket (JDBC)
#
# Services.  Each start() waits until the service answers and dies (with
# its log's tail) when it does not within a minute or two.
#
#   my $etcd = FencingLockSvc::Etcd->start;     one member; the shortest
#                                               lease it grants is 2 s
#     $etcd->url                 http://127.0.0.1:PORT (client URL)
#     $etcd->endpoint            127.0.0.1:PORT
#     $etcd->ctl(@args)          etcdctl (API 3) against it: its stdout,
#                                chomped; $etcd->ctl_ok(@args): true when
#                                it exited 0
#     $etcd->revision            the store's current revision
#     $etcd->key_gone($key)      no key $key (a lock key PREFIX/<lease>)
#     $etcd->snapshot_save($f)   etcdctl snapshot save; true when saved
#     $etcd->restore($snapshot)  stop, etcdctl snapshot restore into a new
#                                data directory, start on the same ports
#     $etcd->stop / $etcd->start (again, on the same ports and data)
#
#   my $zk = FencingLockSvc::ZooKeeper->start(servers => 3, wait => 1);
#                                an ensemble (servers => 1: standalone);
#                                tickTime 500 ms, sessions 1 s to 10 s;
#                                wait => 0 returns before the quorum (then
#                                $zk->wait_quorum)
#     $zk->hosts                 127.0.0.1:P1,127.0.0.1:P2,... (connect
#                                string); $zk->port($i), $zk->servers
#     $zk->server_stop($i) / $zk->server_start($i)     server $i (1-based)
#     $zk->mode($i)              leader, follower, standalone, or '' (no
#                                quorum, or down)
#     $zk->leader                the number of the leader, undef if none
#     $zk->wait_quorum           true once every running server serves and
#                                one leads (dies after 120 s)
#     $zk->stop                  every server (at once)
#     $zk->wipe                  every server's data gone (myid kept); then
#                                $zk->start_all: the ensemble starts empty
#     $zk->start_all             start every server that is down, wait
#
#   my $redis = FencingLockSvc::Redis->start;   no persistence
#     $redis->port, $redis->url (redis://127.0.0.1:PORT/0)
#     $redis->cli(@args)         redis-cli against it: stdout, chomped
#     $redis->restart_empty      stop, start on the same port: every key
#                                gone
#     $redis->stop
#
#   my $pgb = FencingLockSvc::PgBouncer->start(node => $node, dbname => $db,
#               pool_mode => 'transaction', pool_size => 1);
#                                PgBouncer in front of a
#                                PostgreSQL::Test::Cluster node (reached
#                                through the node's own host and port),
#                                auth_type trust; transaction pooling with
#                                one server connection by default, so that
#                                consecutive clients share a backend.  Runs
#                                as the test's OS user (never root).  Or
#                                host => and port => of any server instead
#                                of node =>; user => (default: the OS
#                                user) for the server and PgBouncer's
#                                clients.
#     $pgb->port, $pgb->connstr  "host=127.0.0.1 port=P user=U dbname=D"
#     $pgb->stop
#
#   my $w = FencingLockSvc::Worker->start($name, \@cmd, %opt);
#                                @cmd in a session of its own, its stdin and
#                                stdout through FIFOs of its directory
#                                dir()/worker-NAME (in, out; stderr in
#                                stderr); %opt: env => {...}
#     $w->send($line)            a line to its stdin (false when it ended)
#     $w->read($secs)            its next line (default 60 s), undef (and a
#                                diag with its stderr's tail) when none came
#     $w->freeze / $w->thaw      SIGSTOP / SIGCONT to its process group
#     $w->stop                   "quit", close its FIFOs, stop its group
#     $w->pid, $w->dir, $w->name
#
# No port is fixed, nothing is written outside dir(): tests using this can
# run side by side.
package FencingLockSvc;

use strict;
use warnings;

use Exporter 'import';
use File::Basename qw(basename);
use File::Copy ();
use File::Path qw(make_path remove_tree);
use IO::Select;
use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use POSIX qw(WNOHANG);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time sleep);

our @EXPORT_OK = qw(dir free_port missing spawn stop_group wait_exit stop_all
  leftovers run wait_until event listen_tcp);

my $dir;
my @groups;    # [name, pid], in the order started
my %status;    # pid => $? once reaped
my $t0 = time;

# a worker that died must not take the test with it (a write to its FIFO);
# a signal ends the test through its END blocks
$SIG{PIPE} = 'IGNORE';
$SIG{INT} = $SIG{TERM} = sub { exit 143 };

sub dir
{
	return $dir if defined $dir;
	my $name = basename($0);
	$name =~ s/\.pl$//;
	$dir = "$PostgreSQL::Test::Utils::tmp_check/locksvc-$name";
	remove_tree($dir);
	make_path($dir);
	return $dir;
}

sub free_port { return PostgreSQL::Test::Cluster::get_free_port(); }

sub _which
{
	my ($prog) = @_;
	for my $d (split /:/, $ENV{PATH} // '')
	{
		return "$d/$prog" if -x "$d/$prog";
	}
	return undef;
}

sub missing
{
	my @why;
	my %need = (
		etcd => [qw(etcd etcdctl)],
		zookeeper => [qw(java)],
		java => [qw(java)],
		redis => [qw(redis-server redis-cli)],
		pgbouncer => [qw(pgbouncer)],
		go => [qw(go)],
		node => [qw(node)]);
	for my $what (@_)
	{
		die "FencingLockSvc::missing: unknown $what" unless $need{$what};
		push @why, "$what: no $_ in PATH" for grep { !_which($_) } @{ $need{$what} };
		push @why, "zookeeper: no /usr/share/java/zookeeper.jar"
		  if $what eq 'zookeeper' && !-f '/usr/share/java/zookeeper.jar';
	}
	return @why;
}

sub spawn
{
	my ($name, $cmd, %opt) = @_;
	my $log = $opt{log} // dir() . "/$name.log";
	my $pid = fork() // die "fork: $!";
	if ($pid == 0)
	{
		eval {
			POSIX::setsid() or die "setsid: $!";
			# the redirections first: a worker's FIFOs are opened whatever
			# fails next (its reader sees the end of its output)
			open STDIN, '<', $opt{stdin} // '/dev/null' or die "stdin: $!";
			open STDOUT, '>>', $opt{stdout} // $log or die "stdout: $!";
			open STDERR, '>>', $opt{stderr} // $log or die "stderr: $!";
			$ENV{$_} = $opt{env}{$_} for keys %{ $opt{env} // {} };
			chdir $opt{cwd} or die "chdir $opt{cwd}: $!" if $opt{cwd};
			exec { $cmd->[0] } @$cmd or die "exec $cmd->[0]: $!";
		};
		print STDERR "spawn $name: $@";
		POSIX::_exit(127);
	}
	push @groups, [ $name, $pid ];
	return $pid;
}

sub _reap
{
	my ($pid) = @_;
	$status{$pid} = $? if !exists $status{$pid} && waitpid($pid, WNOHANG) == $pid;
	return;
}

sub _group_alive
{
	my ($pid) = @_;
	_reap($pid);
	return kill(0, -$pid);
}

sub stop_group
{
	my ($pid) = @_;
	return 1 unless $pid && _group_alive($pid);
	kill 'CONT', -$pid;
	kill 'TERM', -$pid;
	for my $sig ('KILL', undef)
	{
		for (1 .. 100)
		{
			return 1 unless _group_alive($pid);
			sleep 0.1;
		}
		kill $sig, -$pid if $sig;
	}
	return !_group_alive($pid);
}

sub wait_exit
{
	my ($pid, $secs) = @_;
	my $end = time + ($secs // 60);
	while (time < $end)
	{
		_reap($pid);
		return $status{$pid} if exists $status{$pid};
		sleep 0.1;
	}
	return undef;
}

sub stop_all
{
	stop_group($_->[1]) for reverse @groups;
	return;
}

sub leftovers
{
	my @left;
	for my $g (@groups)
	{
		next unless _group_alive($g->[1]);
		my $ps = `ps -o pid=,args= -g $g->[1] 2>/dev/null`;
		$ps =~ s/\n/; /g;
		push @left, "$g->[0] (process group $g->[1]): $ps";
	}
	if (defined $dir)
	{
		for (split /\n/, `pgrep -af -- '$dir/' 2>/dev/null`)
		{
			push @left, $_ unless /^(\d+) / && ($1 == $$ || /pgrep/);
		}
	}
	return @left;
}

END
{
	local $?;
	stop_all();
}

sub run
{
	my ($cmd, %opt) = @_;
	my ($out, $err) = ('', '');
	local %ENV = (%ENV, %{ $opt{env} // {} });
	my $ok = eval {
		IPC::Run::run($cmd, '<', \undef, '>', \$out, '2>', \$err,
			IPC::Run::timeout($opt{timeout} // 60));
	};
	my $code = $@ ? -1 : $? >> 8;
	$err .= $@ if $@;
	return ($ok ? 1 : 0, $out, $err, $code);
}

sub wait_until
{
	my ($what, $secs, $cond) = @_;
	my $end = time + $secs;
	while (1)
	{
		return 1 if $cond->();
		if (time >= $end)
		{
			diag "timed out after ${secs}s waiting for: $what";
			return 0;
		}
		sleep 0.1;
	}
}

sub event
{
	my ($who, $text) = @_;
	note sprintf('[%7.3fs] %-10s %s', time - $t0, $who, $text);
	return;
}

sub listen_tcp
{
	my ($node) = @_;
	$node->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'");
	return;
}

sub _tail
{
	my ($file, $bytes) = @_;
	open my $fh, '<', $file or return '';
	my $size = -s $fh;
	seek $fh, $size > $bytes ? $size - $bytes : 0, 0;
	local $/;
	my $t = <$fh> // '';
	return $t;
}

# ---------------------------------------------------------------------
package FencingLockSvc::Etcd;

sub start
{
	my ($class, %opt) = @_;
	my $self = ref $class ? $class : bless {}, $class;
	if (!$self->{cport})
	{
		$self->{dir} = FencingLockSvc::dir() . '/etcd';
		File::Path::make_path($self->{dir});
		$self->{cport} = FencingLockSvc::free_port();
		$self->{pport} = FencingLockSvc::free_port();
		$self->{data} = "$self->{dir}/data";
	}
	my $url = $self->url;
	my $peer = "http://127.0.0.1:$self->{pport}";
	$self->{pid} = FencingLockSvc::spawn(
		'etcd',
		[
			'etcd', '--name', 's1', '--data-dir', $self->{data},
			'--listen-client-urls', $url, '--advertise-client-urls', $url,
			'--listen-peer-urls', $peer, '--initial-advertise-peer-urls', $peer,
			'--initial-cluster', "s1=$peer", '--initial-cluster-state', 'new',
			'--log-level', 'warn'
		],
		log => "$self->{dir}/etcd.log");
	FencingLockSvc::wait_until("etcd at $url", 60,
		sub { $self->ctl_ok('endpoint', 'health') })
	  or die "etcd did not start:\n" . FencingLockSvc::_tail("$self->{dir}/etcd.log", 2000);
	return $self;
}

sub url { return "http://127.0.0.1:$_[0]{cport}"; }
sub endpoint { return "127.0.0.1:$_[0]{cport}"; }

sub _ctl
{
	my ($self, @args) = @_;
	return FencingLockSvc::run(
		[ 'etcdctl', '--endpoints=' . $self->url, '--command-timeout=10s', @args ],
		env => { ETCDCTL_API => 3 });
}

sub ctl
{
	my ($self, @args) = @_;
	my (undef, $out) = $self->_ctl(@args);
	chomp $out;
	return $out;
}

sub ctl_ok
{
	my ($self, @args) = @_;
	my ($ok) = $self->_ctl(@args);
	return $ok;
}

sub revision
{
	my ($self) = @_;
	my $j = JSON::PP::decode_json($self->ctl('endpoint', 'status', '-w', 'json'));
	return $j->[0]{Status}{header}{revision};
}

sub key_gone
{
	my ($self, $key) = @_;
	my ($ok, $out) = $self->_ctl('get', '--keys-only', $key);
	return $ok && $out !~ /\S/;
}

sub snapshot_save
{
	my ($self, $file) = @_;
	return $self->ctl_ok('snapshot', 'save', $file) && -s $file;
}

sub stop
{
	my ($self) = @_;
	FencingLockSvc::stop_group($self->{pid}) if $self->{pid};
	$self->{pid} = undef;
	return;
}

sub restore
{
	my ($self, $snapshot) = @_;
	$self->stop;
	my $peer = "http://127.0.0.1:$self->{pport}";
	$self->{data} = "$self->{dir}/restored." . ++$self->{restores};
	my ($ok, $out, $err) = FencingLockSvc::run(
		[
			'etcdctl', 'snapshot', 'restore', $snapshot, '--data-dir', $self->{data},
			'--name', 's1', '--initial-cluster', "s1=$peer",
			'--initial-advertise-peer-urls', $peer
		],
		env => { ETCDCTL_API => 3 });
	die "etcdctl snapshot restore failed: $out$err" unless $ok;
	return $self->start;
}

# ---------------------------------------------------------------------
package FencingLockSvc::ZooKeeper;

sub start
{
	my ($class, %opt) = @_;
	my $self = bless { n => $opt{servers} // 3, pid => {} }, $class;
	$self->{dir} = FencingLockSvc::dir() . '/zk';
	my $n = $self->{n};
	for my $i (1 .. $n)
	{
		$self->{port}{$i} = FencingLockSvc::free_port();
		$self->{quorum}{$i} = FencingLockSvc::free_port();
		$self->{election}{$i} = FencingLockSvc::free_port();
	}
	for my $i (1 .. $n)
	{
		my $d = "$self->{dir}/$i";
		File::Path::make_path("$d/data", "$d/conf");
		_write("$d/data/myid", "$i\n");
		File::Copy::copy('/etc/zookeeper/conf/log4j.properties', "$d/conf/")
		  if -f '/etc/zookeeper/conf/log4j.properties';
		my $cfg = join '',
		  map { "$_\n" } 'tickTime=500', 'initLimit=20', 'syncLimit=10',
		  'minSessionTimeout=1000', 'maxSessionTimeout=10000',
		  "dataDir=$d/data", "clientPort=$self->{port}{$i}",
		  'clientPortAddress=127.0.0.1', 'admin.enableServer=false',
		  '4lw.commands.whitelist=srvr,ruok';
		if ($n > 1)
		{
			$cfg .= "server.$_=127.0.0.1:$self->{quorum}{$_}:$self->{election}{$_}\n"
			  for 1 .. $n;
		}
		_write("$d/conf/zoo.cfg", $cfg);
	}
	$self->server_start($_) for 1 .. $n;
	$self->wait_quorum if $opt{wait} // 1;
	return $self;
}

sub _write
{
	my ($file, $text) = @_;
	open my $fh, '>', $file or die "$file: $!";
	print $fh $text;
	close $fh or die "$file: $!";
	return;
}

sub servers { return $_[0]{n}; }
sub port { return $_[0]{port}{ $_[1] }; }

sub hosts
{
	my ($self) = @_;
	return join ',', map { "127.0.0.1:$self->{port}{$_}" } 1 .. $self->{n};
}

sub server_start
{
	my ($self, $i) = @_;
	return if $self->{pid}{$i};
	my $d = "$self->{dir}/$i";
	$self->{pid}{$i} = FencingLockSvc::spawn(
		"zookeeper-$i",
		[
			'java', '-Xmx128m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1',
			'-Dzookeeper.root.logger=WARN,CONSOLE', "-Dzookeeper.log.dir=$d",
			'-cp', "$d/conf:/usr/share/java/zookeeper.jar",
			'org.apache.zookeeper.server.quorum.QuorumPeerMain', "$d/conf/zoo.cfg"
		],
		log => "$d/server.log");
	return;
}

sub server_stop
{
	my ($self, $i) = @_;
	FencingLockSvc::stop_group(delete $self->{pid}{$i}) if $self->{pid}{$i};
	return;
}

sub stop
{
	my ($self) = @_;
	# all at once: a JVM takes a while to shut down
	for my $i (keys %{ $self->{pid} })
	{
		kill 'CONT', -$self->{pid}{$i};
		kill 'TERM', -$self->{pid}{$i};
	}
	$self->server_stop($_) for sort keys %{ $self->{pid} };
	return;
}

sub wipe
{
	my ($self) = @_;
	File::Path::remove_tree("$self->{dir}/$_/data/version-2") for 1 .. $self->{n};
	return;
}

sub start_all
{
	my ($self) = @_;
	$self->server_start($_) for 1 .. $self->{n};
	return $self->wait_quorum;
}

# a four-letter word to server $i: its answer ('' when none)
sub four_letters
{
	my ($self, $i, $word) = @_;
	my $s = IO::Socket::INET->new(
		PeerAddr => '127.0.0.1',
		PeerPort => $self->{port}{$i},
		Timeout => 5) or return '';
	print $s $word;
	my ($answer, $end) = ('', Time::HiRes::time() + 5);
	my $sel = IO::Select->new($s);
	while (Time::HiRes::time() < $end && $sel->can_read(1))
	{
		my $n = sysread($s, my $chunk, 4096);
		last unless $n;
		$answer .= $chunk;
	}
	close $s;
	return $answer;
}

sub mode
{
	my ($self, $i) = @_;
	return '' unless $self->{pid}{$i};
	return $self->four_letters($i, 'srvr') =~ /^Mode: (\S+)/m ? $1 : '';
}

sub leader
{
	my ($self) = @_;
	for my $i (1 .. $self->{n})
	{
		my $m = $self->mode($i);
		return $i if $m eq 'leader' || $m eq 'standalone';
	}
	return undef;
}

sub _serving
{
	my ($self) = @_;
	my $leaders = 0;
	for my $i (sort keys %{ $self->{pid} })
	{
		my $m = $self->mode($i);
		return 0 unless $m =~ /^(leader|follower|standalone)$/;
		$leaders++ if $m ne 'follower';
	}
	return $leaders == 1;
}

sub wait_quorum
{
	my ($self) = @_;
	return 1
	  if FencingLockSvc::wait_until(
		'a ZooKeeper leader with every running server serving',
		120, sub { $self->_serving });
	die "ZooKeeper has no quorum:\n"
	  . join('', map { FencingLockSvc::_tail("$self->{dir}/$_/server.log", 1500) } 1 .. $self->{n});
}

# ---------------------------------------------------------------------
package FencingLockSvc::Redis;

sub start
{
	my ($class) = @_;
	my $self = ref $class ? $class : bless {}, $class;
	$self->{dir} //= FencingLockSvc::dir() . '/redis';
	File::Path::make_path($self->{dir});
	$self->{port} //= FencingLockSvc::free_port();
	$self->{pid} = FencingLockSvc::spawn(
		'redis',
		[
			'redis-server', '--port', $self->{port}, '--bind', '127.0.0.1',
			'--save', '', '--appendonly', 'no', '--dir', $self->{dir},
			'--daemonize', 'no'
		],
		log => "$self->{dir}/redis.log");
	FencingLockSvc::wait_until("redis on port $self->{port}", 30,
		sub { $self->cli('PING') eq 'PONG' })
	  or die "redis did not start:\n" . FencingLockSvc::_tail("$self->{dir}/redis.log", 2000);
	return $self;
}

sub port { return $_[0]{port}; }
sub url { return "redis://127.0.0.1:$_[0]{port}/0"; }

sub cli
{
	my ($self, @args) = @_;
	my (undef, $out) =
	  FencingLockSvc::run([ 'redis-cli', '-h', '127.0.0.1', '-p', $self->{port}, @args ]);
	chomp $out;
	return $out;
}

sub stop
{
	my ($self) = @_;
	FencingLockSvc::stop_group($self->{pid}) if $self->{pid};
	$self->{pid} = undef;
	return;
}

sub restart_empty
{
	my ($self) = @_;
	$self->stop;
	return $self->start;
}

# ---------------------------------------------------------------------
package FencingLockSvc::PgBouncer;

sub start
{
	my ($class, %opt) = @_;
	die "PgBouncer refuses to run as root: run the test as an ordinary user\n"
	  if $< == 0;
	my $node = $opt{node};
	my $host = $opt{host} // ($node && $node->host);
	my $pgport = $opt{port} // ($node && $node->port);
	die "FencingLockSvc::PgBouncer->start: node => (or host => and port =>) needed"
	  unless $host && $pgport;
	my $db = $opt{dbname} // 'postgres';
	my $self = bless { db => $db, user => $opt{user} // scalar getpwuid($<) }, $class;
	my $d = $self->{dir} = FencingLockSvc::dir() . "/pgbouncer-$db";
	File::Path::make_path($d);
	$self->{port} = FencingLockSvc::free_port();
	FencingLockSvc::ZooKeeper::_write("$d/userlist.txt", qq{"$self->{user}" ""\n});
	FencingLockSvc::ZooKeeper::_write(
		"$d/pgbouncer.ini", join '', map { "$_\n" } '[databases]',
		"$db = host=$host port=$pgport dbname=$db user=$self->{user}",
		'', '[pgbouncer]', 'listen_addr = 127.0.0.1', "listen_port = $self->{port}",
		'unix_socket_dir =', 'auth_type = trust', "auth_file = $d/userlist.txt",
		'pool_mode = ' . ($opt{pool_mode} // 'transaction'),
		'default_pool_size = ' . ($opt{pool_size} // 1),
		'max_client_conn = 50',
		'ignore_startup_parameters = extra_float_digits,options',
		"logfile = $d/pgbouncer.log");
	$self->{pid} = FencingLockSvc::spawn('pgbouncer', [ 'pgbouncer', "$d/pgbouncer.ini" ],
		log => "$d/stdout.log");
	FencingLockSvc::wait_until(
		"pgbouncer on port $self->{port}",
		30,
		sub {
			my ($ok, $out) = FencingLockSvc::run(
				[ 'psql', '-X', '-At', '-d', $self->connstr, '-c', 'SELECT 1' ], timeout => 10);
			return $ok && $out =~ /^1$/m;
		})
	  or die "pgbouncer did not start:\n"
	  . FencingLockSvc::_tail("$d/pgbouncer.log", 1500)
	  . FencingLockSvc::_tail("$d/stdout.log", 1500);
	return $self;
}

sub port { return $_[0]{port}; }

sub connstr
{
	my ($self) = @_;
	return "host=127.0.0.1 port=$self->{port} user=$self->{user} dbname=$self->{db}";
}

sub stop
{
	my ($self) = @_;
	FencingLockSvc::stop_group($self->{pid}) if $self->{pid};
	$self->{pid} = undef;
	return;
}

# ---------------------------------------------------------------------
package FencingLockSvc::Worker;

sub start
{
	my ($class, $name, $cmd, %opt) = @_;
	my $d = FencingLockSvc::dir() . "/worker-$name";
	File::Path::remove_tree($d);
	File::Path::make_path($d);
	for my $f ("$d/in", "$d/out")
	{
		POSIX::mkfifo($f, 0600) or die "mkfifo $f: $!";
	}
	my $self = bless { name => $name, dir => $d, buf => '' }, $class;
	$self->{pid} = FencingLockSvc::spawn(
		"worker-$name", $cmd,
		stdin => "$d/in",
		stdout => "$d/out",
		stderr => "$d/stderr",
		env => $opt{env});
	# the child opens in, then out: the same order here
	open $self->{in}, '>', "$d/in" or die "$d/in: $!";
	open $self->{out}, '<', "$d/out" or die "$d/out: $!";
	$self->{in}->autoflush(1);
	return $self;
}

sub name { return $_[0]{name}; }
sub pid { return $_[0]{pid}; }
sub dir { return $_[0]{dir}; }

sub send
{
	my ($self, $line) = @_;
	return 0 unless $self->{in};
	return print { $self->{in} } "$line\n";
}

sub read
{
	my ($self, $secs) = @_;
	my $end = Time::HiRes::time() + ($secs // 60);
	while ($self->{out} && $self->{buf} !~ /\n/)
	{
		my $left = $end - Time::HiRes::time();
		last if $left <= 0;
		next unless IO::Select->new($self->{out})->can_read($left);
		my $n = sysread($self->{out}, my $chunk, 65536);
		last unless $n;
		$self->{buf} .= $chunk;
	}
	return $1 if $self->{buf} =~ s/^(.*?)\n//;
	my $err = FencingLockSvc::_tail("$self->{dir}/stderr", 600);
	$err =~ s/\n/ /g;
	Test::More::diag("worker $self->{name} said nothing (stderr: $err)");
	return undef;
}

sub freeze { my ($self) = @_; return kill 'STOP', -$self->{pid}; }
sub thaw { my ($self) = @_; return kill 'CONT', -$self->{pid}; }

sub stop
{
	my ($self) = @_;
	if ($self->{in})
	{
		print { $self->{in} } "quit\n";
		close $self->{in};
		close $self->{out};
		$self->{in} = $self->{out} = undef;
	}
	return FencingLockSvc::stop_group($self->{pid});
}

1;
