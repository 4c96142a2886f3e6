# test/perl/FencingLockSvcTest.pm: the scenarios' common part of the
# locksvc TAP tests (test/t/110_locksvc_*.pl), on FencingLockSvc.pm.
#
#   need_env(@vars)         skip the test (with the reason) unless every
#                           FENCING_LOCKSVC_* variable named is set; the
#                           suite test/suites/locksvc.sh sets them:
#     FENCING_LOCKSVC_PYTHON        a python3 with psycopg 3 and kazoo
#     FENCING_LOCKSVC_GO_BIN        the Go clients built (etcdmutex, snippet)
#     FENCING_LOCKSVC_NODE_MODULES  node_modules holding node-postgres (pg)
#   FENCING_LOCKSVC_BREAK=guard     every scenario with the guard off (no
#                                   protect(), advance() left out): every
#                                   scenario must then fail
#   setup()                 a node (fencing preloaded, listening on
#                           127.0.0.1 too) with the database "locksvc": the
#                           tables refunds, ledger, accounts, jobs (protected
#                           unless BREAK) and fencing_lock_generations
#   psql_db($sql)           safe_psql in that database
#   new_rows(@keys)         a row of refunds, accounts, jobs per key
#   start_etcdctl / start_etcdmutex / start_zk / start_redis
#                           a worker (test/locksvc/clients) that takes a
#                           lock and writes with its token on command
#   locked($w, $how)        wait for the worker's grant: its fields (a hash)
#                           or undef; on the timeline
#   write_as($w, $kind, $key, $mapping)
#                           one transaction; a hash: result (ok, a SQLSTATE,
#                           lost when the lock service gave no number, or
#                           none), reason, message, hint, token
#   take_next($w)           the worker takes its next token now (in hand)
#   raise_as($w, $kind, $key)   the first meter with the grant token
#   many_as($w, $n, $kind, $key)  $n transactions: "N ok, M SQLSTATE/reason"
#   unlock($w), freeze($w), thaw($w)
#   rows_of / ledger_of / balance_of($key)   what the rows show
#   pause_scenario(...)     the pause past the TTL, three checks
#   raise_generation($service)
#   finish()                stop every process, check none is left, done
package FencingLockSvcTest;

use strict;
use warnings;

use Cwd qw(abs_path);
use Exporter 'import';
use File::Basename qw(dirname);
use JSON::PP;
use FencingLockSvc qw(event wait_until);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(need_env setup psql_db new_rows start_etcdctl start_etcdmutex
  start_zk start_redis locked write_as take_next raise_as many_as unlock freeze
  thaw rows_of ledger_of
  balance_of pause_scenario raise_generation finish event wait_until $BREAK
  $PY $ROOT $node $DSN);

our $BREAK = $ENV{FENCING_LOCKSVC_BREAK} // '';
our $PY = $ENV{FENCING_LOCKSVC_PYTHON};
our $ROOT = abs_path(dirname(__FILE__) . '/../..');
our $node;
our $DSN;
my $clients = "$ROOT/test/locksvc/clients";

sub need_env
{
	my @unset = grep { !$ENV{$_} } @_;
	plan skip_all => 'set by test/suites/locksvc.sh, which installs the lock services and '
	  . 'builds their clients: ' . join(', ', @unset) . ' unset'
	  if @unset;
	return;
}

sub psql_db { return $node->safe_psql('locksvc', $_[0]); }

sub setup
{
	$node = PostgreSQL::Test::Cluster->new('locksvc');
	$node->init;
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'fencing'");
	FencingLockSvc::listen_tcp($node);
	$node->start;
	my $user = getpwuid($<);
	$DSN = "host=127.0.0.1 port=" . $node->port . " user=$user dbname=locksvc";
	$node->safe_psql('postgres', 'CREATE DATABASE locksvc');
	psql_db(<<'SQL');
CREATE EXTENSION fencing;
-- each lock service's generation: raised after it lost its data (or
-- restored a snapshot), read by a worker when it takes the lock
CREATE TABLE fencing_lock_generations (service text PRIMARY KEY, generation bigint NOT NULL);
INSERT INTO fencing_lock_generations VALUES ('etcd', 0), ('zookeeper', 0), ('redis', 0);
CREATE TABLE refunds (id text PRIMARY KEY, paid_by text, payouts int NOT NULL DEFAULT 0,
                      fence fencing.fence);
CREATE TABLE ledger (id bigserial PRIMARY KEY, account text NOT NULL, amount int NOT NULL,
                     written_by text, fence fencing.fence);
CREATE TABLE accounts (id text PRIMARY KEY, balance int NOT NULL, fence fencing.fence);
CREATE TABLE jobs (id text PRIMARY KEY, runs int NOT NULL DEFAULT 0, fence fencing.fence);
SQL
	if ($BREAK ne 'guard')
	{
		psql_db("SELECT fencing.protect('refunds');
			SELECT fencing.protect('ledger', key_columns => '{account}');
			SELECT fencing.protect('jobs', strict => false)");
	}
	else
	{
		note 'FENCING_LOCKSVC_BREAK=guard: no table is protected, advance() is left out';
	}
	return $node;
}

sub new_rows
{
	psql_db("INSERT INTO refunds (id) VALUES ('$_'); INSERT INTO accounts VALUES ('$_', 100, NULL);
		INSERT INTO jobs (id) VALUES ('$_')")
	  for @_;
	return;
}

# ---------------------------------------------------------------------
# workers; NAME is the worker's name in the timeline

sub _worker
{
	my ($name, @cmd) = @_;
	return FencingLockSvc::Worker->start($name, \@cmd);
}

# etcdctl lock; each token the revision of a put on the holder's key
sub start_etcdctl
{
	my ($etcd, $name, $lock) = @_;
	my $wdir = FencingLockSvc::dir() . "/worker-$name";
	return FencingLockSvc::Worker->start(
		$name,
		[
			'etcdctl', '--endpoints=' . $etcd->url, 'lock', '--ttl=2', $lock, '--',
			$PY, "$clients/worker.py", 'etcdctl', '--who', $name, '--dsn', $DSN,
			'--etcd', $etcd->url, '--run-dir', FencingLockSvc::dir(), '--commands', "$wdir/in"
		],
		env => { ETCDCTL_API => 3 });
}

# Go concurrency.Mutex; each token the revision of a put on the holder's key
sub start_etcdmutex
{
	my ($etcd, $name, $lock) = @_;
	return _worker($name, "$ENV{FENCING_LOCKSVC_GO_BIN}/etcdmutex", '-who', $name,
		'-dsn', $DSN, '-etcd', $etcd->url, '-lock', $lock, '-ttl', 2,
		'-run-dir', FencingLockSvc::dir());
}

# the lock recipe with Curator's node names (kazoo); each token the mzxid
# of a setData on the holder's node
sub start_zk
{
	my ($zk, $name, $path) = @_;
	return _worker($name, $PY, "$clients/worker.py", 'zookeeper', '--who', $name,
		'--dsn', $DSN, '--zk', $zk->hosts, '--lock', $path, '--session-timeout', 2,
		'--run-dir', FencingLockSvc::dir());
}

# lock:{NAME} and fence:{NAME}: SET NX PX 2000 and INCR in one script;
# each token an INCR in a script that checks the lock
sub start_redis
{
	my ($redis, $name, $lock, $counter) = @_;
	return _worker($name, $PY, "$clients/worker.py", 'redis', '--who', $name,
		'--dsn', $DSN, '--redis-port', $redis->port, '--lock', $lock,
		'--counter', $counter, '--ttl-ms', 2000, '--run-dir', FencingLockSvc::dir());
}

# "word {json}": the JSON as a hash
sub _jparse
{
	my ($line) = @_;
	my (undef, $json) = split / /, $line, 2;
	my $j = eval { decode_json($json // '{}') } // {};
	return $j;
}

sub locked
{
	my ($w, $how) = @_;
	my $line = $w->read(120);
	if (!defined $line || $line !~ /^locked/)
	{
		event('worker ' . $w->name, "$how -> no lock: " . ($line // 'nothing'));
		return undef;
	}
	my $j = _jparse($line);
	my $facts = join ', ',
	  map { "$_ $j->{$_}" } grep { !/^(lock|token|session)$/ } sort keys %$j;
	event('worker ' . $w->name, "$how -> locked $j->{lock}: $facts; token $j->{token}");
	return $j;
}

my %what = (
	refund => 'UPDATE refunds %s (row scope)',
	ledger => 'INSERT ledger %s (key scope)',
	advance => 'UPDATE accounts %s SET fence = advance(fence, token)',
	job => 'UPDATE jobs %s (row scope, strict => false)');

sub write_as
{
	my ($w, $kind, $key, $mapping) = @_;
	my $what = sprintf $what{$kind}, $key;
	$w->send("write $kind $key" . ($mapping ? " $mapping" : ''));
	my $line = $w->read(60);
	if (!defined $line)
	{
		event('worker ' . $w->name, "$what -> no answer");
		return { result => 'none' };
	}
	my $j = _jparse($line);
	my $tok = ", token " . ($j->{token} // '') . ($mapping ? " ($mapping)" : '');
	if ($line =~ /^ok/)
	{
		event('worker ' . $w->name, "$what$tok -> COMMIT");
		return { %$j, result => 'ok' };
	}
	if (($j->{sqlstate} // '') eq 'lost')
	{
		event('worker ' . $w->name, "$what: no new token, the lock is lost: $j->{message}");
		return { %$j, result => 'lost' };
	}
	event('worker ' . $w->name,
		"$what$tok -> ERROR "
		  . ($j->{sqlstate} // '?')
		  . ($j->{reason} ? " $j->{reason}" : '') . ': '
		  . ($j->{message} // ''));
	return { %$j, result => $j->{sqlstate} // 'error' };
}

sub take_next
{
	my ($w) = @_;
	$w->send('next');
	my $line = $w->read(60) // 'none';
	my $j = _jparse($line);
	event('worker ' . $w->name,
		$line =~ /^ok/
		? "takes its next token now: $j->{token} (in hand)"
		: "takes its next token: none, the lock is lost");
	return $line =~ /^ok/ ? $j->{token} : undef;
}

my %fence = (
	refund => 'UPDATE refunds SET fence = grant token WHERE id = %s (row scope)',
	ledger => "SELECT fencing.raise_fence('ledger', grant token, %s) (key scope)",
	advance => 'UPDATE accounts SET fence = advance(fence, grant token) WHERE id = %s');

sub raise_as
{
	my ($w, $kind, $key) = @_;
	my $what = sprintf $fence{$kind}, $key;
	$w->send("raise $kind $key");
	my $line = $w->read(60);
	my $j = _jparse($line // '');
	my $ok = defined $line && $line =~ /^ok/;
	event('worker ' . $w->name,
		"$what, token " . ($j->{token} // '?') . ' -> '
		  . ($ok ? 'COMMIT' : 'ERROR ' . ($j->{sqlstate} // '?') . ': ' . ($j->{message} // '')));
	return { %$j, result => $ok ? 'ok' : $j->{sqlstate} // 'none' };
}

# $n transactions, a new token each: "N ok" or "N ok, M SF001/..." (sorted)
sub many_as
{
	my ($w, $n, $kind, $key) = @_;
	my $what = sprintf $what{$kind}, $key;
	$w->send("many $n $kind $key");
	my $line = $w->read(600);
	my $j = _jparse($line // '');
	my $o = $j->{outcomes} // {};
	my $r = join ', ', map { "$o->{$_} $_" } sort { ($a ne 'ok') <=> ($b ne 'ok') || $a cmp $b } keys %$o;
	$r = 'none' if $r eq '';
	event('worker ' . $w->name,
		sprintf('%s x %d, a new token each -> %s (%.1f s)', $what, $n, $r, $j->{seconds} // 0));
	return $r;
}

sub freeze
{
	my ($w) = @_;
	$w->freeze;
	event('test', 'kill -STOP worker ' . $w->name
		  . ' (its process group): frozen, holding the lock as far as it knows');
	return;
}

sub thaw
{
	my ($w) = @_;
	$w->thaw;
	event('test', 'kill -CONT worker ' . $w->name . ': it carries on where it stopped');
	return;
}

# give the lock back and end (etcdctl unlocks when its command ends)
sub unlock
{
	my ($w) = @_;
	$w->send('unlock');
	$w->read(30);
	event('worker ' . $w->name, 'unlock');
	$w->stop;
	return;
}

# What a stale holder must never achieve: the rows show only the rightful
# holder's writes.
sub rows_of
{
	return psql_db("SELECT coalesce(paid_by, '-') || ' ' || payouts || ' ' || "
		  . "coalesce(fence::text, '-') FROM refunds WHERE id = '$_[0]'");
}

# who wrote the account's ledger entries: "A 1,B 100"
sub ledger_of
{
	return psql_db("SELECT coalesce(string_agg(written_by || ' ' || n, ',' ORDER BY written_by), '-') "
		  . "FROM (SELECT written_by, count(*) AS n FROM ledger WHERE account = '$_[0]' "
		  . "GROUP BY written_by) AS w");
}

sub balance_of { return psql_db("SELECT balance FROM accounts WHERE id = '$_[0]'"); }

sub raise_generation
{
	my ($service) = @_;
	my $g = psql_db("UPDATE fencing_lock_generations SET generation = generation + 1 "
		  . "WHERE service = '$service' RETURNING generation");
	event('operator', "UPDATE fencing_lock_generations SET generation = generation + 1 "
		  . "WHERE service = '$service' (now $g)");
	return;
}

# The pause past the TTL.  A takes the lock and writes three transactions
# (row scope, key scope, advance()), a new token each; it takes the tokens
# of its next three writes and is frozen.  Once the lock service reports
# A's lock gone, B takes it and raises the three fences with its grant
# token, writing nothing (the first meter).  A, thawed before B wrote, gets
# SF001 with each token it holds, and no new token from the lock service.
# Then B writes 100 transactions under its one lock, strict, a new token
# each: all accepted.
#   pause_scenario($svc, $key, sub { start a worker named $_[0] }, $gone, $how)
# $gone->($lock) is true once the lock service no longer holds A's lock.
sub pause_scenario
{
	my ($svc, $key, $start, $gone, $how) = @_;
	note "--- $svc: the pause past the TTL ($key) ---";
	new_rows($key);
	my $wa = $start->('A');
	my $grant = locked($wa, $how);
	if (!$grant)
	{
		fail("$svc pause: A takes the lock");
		$wa->stop;
		return;
	}
	my $r = join '/', map { write_as($wa, $_, $key)->{result} } qw(refund ledger advance);
	is($r, 'ok/ok/ok', "$svc pause: A writes three transactions under its lock, a new token each ($r)");
	take_next($wa) for 1 .. 3;
	freeze($wa);
	if (wait_until("$svc: A's lock gone", 60, sub { $gone->($grant->{lock}) }))
	{
		event($svc, "A's lock $grant->{lock} is gone: its TTL ran out while A is frozen");
	}
	else
	{
		fail("$svc pause: the lock service lets A's lock go while A is frozen");
	}
	my $wb = $start->('B');
	my $gb = locked($wb, $how);
	if ($gb)
	{
		$r = join '/', map { raise_as($wb, $_, $key)->{result} } qw(refund ledger advance);
		is($r, 'ok/ok/ok',
			"$svc pause: the new holder B raises the three fences with its grant token, writing nothing ($r)");
	}
	else
	{
		fail("$svc pause: B takes the lock once A's is gone");
	}
	thaw($wa);
	$r = join '/', map { write_as($wa, $_, $key)->{result} } qw(refund ledger advance);
	is($r, 'SF001/SF001/SF001',
		"$svc pause: A, thawed before B's first write, gets SF001 with the tokens it holds, in row scope, key scope and from advance() ($r)"
	);
	$r = write_as($wa, 'refund', $key)->{result};
	is($r, 'lost', "$svc pause: A gets no new token: the lock service says its lock is lost ($r)");
	$wa->stop;
	if ($gb)
	{
		$r = many_as($wb, 100, 'ledger', $key);
		is($r, '100 ok',
			"$svc pause: B writes 100 transactions under its one lock in a strict table, a new token each: $r");
		$r = join '/', map { write_as($wb, $_, $key)->{result} } qw(refund advance);
		is($r, 'ok/ok', "$svc pause: and B pays the refund and debits the account ($r)");
		unlock($wb);
	}
	else
	{
		$wb->stop;
	}
	my ($rows, $ledger, $balance) = (rows_of($key), ledger_of($key), balance_of($key));
	is( join('/', join(' ', (split / /, $rows)[ 0, 1 ]), $ledger, $balance),
		'B 2/A 1,B 100/50',
		"$svc pause: only A's writes before its pause and B's were accepted ($rows; ledger $ledger; balance $balance)"
	);
	return;
}

sub finish
{
	FencingLockSvc::stop_all();
	my @left = FencingLockSvc::leftovers();
	diag "left: $_" for @left;
	ok(!@left, 'no server or worker of this run is left');
	$node->stop if $node;
	done_testing();
	return;
}

1;
