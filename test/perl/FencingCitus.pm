# test/perl/FencingCitus.pm: a Citus cluster on this machine for the TAP
# tests test/t/100_citus*.pl, and the checks they share.
#
#   citus_unusable($inst)        why the installation $inst (bin/, with
#                                fencing and Citus installed) cannot run the
#                                test, or undef
#   citus_start($inst, @names)   start one server per name (Citus and fencing
#                                preloaded, listening on 127.0.0.1, where
#                                Citus' nodes reach each other)
#   port($name), name_of_port($port)
#   Q($name, @sql)               psql on a node, one -c per statement, as the
#                                harness' shell did: its stdout (stderr goes
#                                to the TAP log as notes)
#   Q2($name, @sql)              the same, stdout and stderr together
#   Qerr($name, @sql)            Q2 with VERBOSITY verbose: SQLSTATE, DETAIL,
#                                HINT and CONTEXT of an error
#   Qa, Qa2, Qaerr               the same as the application's role "app"
#   q_start / q_finish           q2 (or qaerr, ...) in the background
#   session($name)               a psql session fed statement by statement
#                                (->feed, ->mark, ->wait_out, ->finish)
#   stale, used, stale_key, used_key
#                                the checks of an error relayed from a worker
#   shard_of, node_of_shard, guard_census, wait_until
package FencingCitus;

use strict;
use warnings;

use Exporter 'import';
use FencingTest;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

our @EXPORT = qw(citus_unusable citus_start port name_of_port Q Q2 Qerr Qa Qa2 Qaerr
  q_start q_finish session stale used stale_key used_key shard_of node_of_shard
  name_of_shard guard_census wait_until cleanup_orphans fencing_default_version
  COORD_TOKEN);

# a coordinator session that may SET LOCAL fencing.token and have it reach
# the workers
use constant COORD_TOKEN => "SET citus.propagate_set_commands = 'local'";

my %nodes;    # name => PostgreSQL::Test::Cluster
my %names;    # port => name
my @handles;  # background psql, killed at the end

END
{
	foreach my $h (@handles)
	{
		eval { $h->kill_kill if $h->pumpable; };
	}
}

sub citus_unusable
{
	FencingTest::inst_unusable('FENCING_CITUS_INSTALL', $_[0], extensions => [ 'citus', 'fencing' ]);
}

sub fencing_default_version { FencingTest::inst_fencing_version(@_) }

sub citus_start
{
	my ($inst, @names) = @_;
	# PostgreSQL 15.20 approves logical decoding plugins; Citus' shard split
	# decodes with its own
	my $gucs = `"$inst/bin/postgres" --describe-config 2>/dev/null`;
	my $plugins =
	  $gucs =~ /^output_plugin_libraries/m
	  ? "output_plugin_libraries = 'pgoutput, test_decoding, citus'"
	  : '';
	foreach my $name (@names)
	{
		my $node = PostgreSQL::Test::Cluster->new("citus_$name", install_path => $inst);
		$node->init;
		$node->append_conf('postgresql.conf', <<"EOC");
shared_preload_libraries = 'citus,fencing'
listen_addresses = '127.0.0.1'
max_connections = 100
max_prepared_transactions = 100
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
citus.node_conninfo = 'sslmode=disable'
citus.local_hostname = '127.0.0.1'
$plugins
log_statement = none
log_min_messages = warning
EOC
		$node->start;
		$nodes{$name} = $node;
		$names{ $node->port } = $name;
	}
	return;
}

sub node { return $nodes{ $_[0] } // die "no node $_[0]"; }
sub port { return node($_[0])->port; }
sub name_of_port { return $names{ $_[0] } // ''; }
sub logfiles { return map { $_->logfile } values %nodes; }

sub psql_cmd
{
	my ($name, @sql) = @_;
	my $node = node($name);
	return [
		$node->installed_command('psql'), '-X', '-q', '-At',
		'-h', '127.0.0.1', '-p', $node->port, '-d', 'postgres',
		'-v', 'ON_ERROR_STOP=1', map { ('-c', $_) } @sql
	];
}

sub trim { my $s = shift; $s =~ s/\n+\z//; return $s; }

sub Q
{
	my ($name, @sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(psql_cmd($name, @sql), '<', \undef, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	note("$name: $err") if $err ne '';
	return trim($out);
}

sub Q2
{
	my ($name, @sql) = @_;
	my $out = '';
	IPC::Run::run(psql_cmd($name, @sql), '<', \undef, '>&', \$out,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return trim($out);
}

sub Qerr { my $name = shift; return Q2($name, '\set VERBOSITY verbose', @_); }
sub Qa { my $name = shift; return Q($name, 'SET ROLE app', @_); }
sub Qa2 { my $name = shift; return Q2($name, 'SET ROLE app', @_); }
sub Qaerr { my $name = shift; return Qerr($name, 'SET ROLE app', @_); }

sub cleanup_orphans
{
	Q2('coord', 'CALL citus_cleanup_orphaned_resources()');
	return;
}

# Q2 in the background: q_start(NAME, SQL...) then q_finish($job)
sub q_start
{
	my ($name, @sql) = @_;
	my $job = { out => '' };
	$job->{h} = IPC::Run::start(psql_cmd($name, @sql), '<', \undef, '>&', \$job->{out},
		IPC::Run::timeout(600));
	push @handles, $job->{h};
	return $job;
}

sub q_finish
{
	my ($job) = @_;
	$job->{h}->finish;
	return trim($job->{out});
}

# A psql session on a node, verbose errors, fed through its stdin.
sub session
{
	my ($name, %o) = @_;
	my $s = bless { in => '', out => '' }, 'FencingCitus::Session';
	my $cmd = psql_cmd($name);
	pop @$cmd;
	pop @$cmd;    # no ON_ERROR_STOP: the session goes on
	push @$cmd, '-v', 'VERBOSITY=verbose';
	$s->{h} = IPC::Run::start($cmd, '<', \$s->{in}, '>&', \$s->{out}, IPC::Run::timeout(600));
	push @handles, $s->{h};
	return $s;
}

package FencingCitus::Session;

use Time::HiRes qw(time usleep);

sub feed
{
	my ($s, $text) = @_;
	$s->{in} .= $text;
	$s->{h}->pump_nb while length $s->{in};
	return;
}

# \echo a marker, and wait until the session printed it (every statement
# before it has run)
sub mark
{
	my ($s, $marker) = @_;
	$s->feed("\\echo \@\@$marker\@\@\n");
	return $s->wait_out(qr/\@\@$marker\@\@/, 60);
}

sub wait_out
{
	my ($s, $re, $secs) = @_;
	my $end = time + $secs;
	until ($s->{out} =~ $re)
	{
		return 0 if time > $end;
		$s->{h}->pump_nb;
		usleep(100_000);
	}
	return 1;
}

# is the marker there (without waiting)?
sub done
{
	my ($s, $marker) = @_;
	$s->{h}->pump_nb if $s->{h}->pumpable;
	return $s->{out} =~ /\@\@$marker\@\@/;
}

# close its input, wait for it to end; its output without the markers
sub finish
{
	my ($s) = @_;
	$s->feed("\\q\n");
	$s->{h}->finish;
	(my $out = $s->{out}) =~ s/^\@\@\w+\@\@\n?//mg;
	$out =~ s/\n+\z//;
	return $out;
}

package FencingCitus;

# the shard of a row, and the port and node name of the worker holding it
sub shard_of { return Q('coord', "SELECT get_shard_id_for_distribution_column('$_[0]', $_[1])"); }

sub node_of_shard
{
	return Q('coord', "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $_[0] LIMIT 1");
}
sub name_of_shard { return name_of_port(node_of_shard($_[0])); }

# guard triggers (row guard enabled ALWAYS, TRUNCATE guard) of every
# placement of a table: "placements guarded truncate-guarded"
sub guard_census
{
	my ($table) = @_;
	my $r = Q('coord', qq{SELECT count(*), count(*) FILTER (WHERE g.result = '1'), count(*) FILTER (WHERE t.result <> '0')
             FROM run_command_on_placements('$table',
                  \$\$SELECT count(*) FROM pg_trigger WHERE tgrelid = '%s'::regclass
                    AND tgfoid = 'fencing.guard'::regproc AND tgenabled = 'A'\$\$) g
             JOIN run_command_on_placements('$table',
                  \$\$SELECT count(*) FROM pg_trigger WHERE tgrelid = '%s'::regclass
                    AND tgfoid = 'fencing.guard_truncate'::regproc AND tgenabled = 'A'\$\$) t
             USING (shardid, nodename, nodeport)});
	$r =~ tr/|/ /;
	return $r;
}

# poll a condition every 0.1 s for up to $secs seconds; true once it holds
sub wait_until
{
	my ($secs, $cond) = @_;
	my $end = time + $secs;
	while (time < $end)
	{
		return 1 if $cond->();
		usleep(100_000);
	}
	return 0;
}

# a stale write relayed from a worker: SF001, DETAIL, HINT
sub stale
{
	my ($got, $name) = @_;
	like($got, qr/ERROR:  SF001: stale fence token/, "$name: SF001");
	like($got, qr/DETAIL:  The row has already accepted fence token/, "$name: its DETAIL");
	like($got, qr/HINT:  (The lock that issued token .* was lost|Token \S+ is of an older epoch than the fence: the lock was lost)/,
		"$name: its HINT");
	return;
}

# a token equal to the row's fence (strict), relayed from a worker: its own
# message (the token was already used), the same DETAIL, a HINT with remedies
sub used
{
	my ($got, $name) = @_;
	like($got, qr/ERROR:  SF001: fence token [0-9]+:[0-9]+ for table "[a-z_0-9]+" was already used/,
		"$name: SF001");
	like($got, qr/DETAIL:  The row has already accepted fence token/, "$name: its DETAIL");
	like($got, qr/HINT:  A strict table accepts a token in one transaction only/, "$name: its HINT");
	return;
}

# the same in key scope (scope public.ledger): the DETAIL
# names the scope and the key (its JSON elements, e.g. main","7)
sub stale_key
{
	my ($got, $key, $name) = @_;
	like($got, qr/ERROR:  SF001: stale fence token/, "$name: SF001");
	like($got, qr/DETAIL:  The scope "public\.ledger" key \["\Q$key\E"\] has already accepted fence token/,
		"$name: the DETAIL names the scope and key");
	like($got, qr/HINT:  (The lock that issued token .* was lost|Token \S+ is of an older epoch than the fence: the lock was lost)/,
		"$name: its HINT");
	return;
}

sub used_key
{
	my ($got, $key, $name) = @_;
	like($got, qr/ERROR:  SF001: fence token [0-9]+:[0-9]+ for table "[a-z_0-9]+" was already used/,
		"$name: SF001");
	like($got, qr/DETAIL:  The scope "public\.ledger" key \["\Q$key\E"\] has already accepted fence token/,
		"$name: the DETAIL names the scope and key");
	like($got, qr/HINT:  A strict table accepts a token in one transaction only/, "$name: its HINT");
	return;
}

1;
