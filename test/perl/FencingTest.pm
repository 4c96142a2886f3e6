# test/perl/FencingTest.pm: shared helpers of the Perl TAP tests of fencing.
#
# The stress workload and its invariant checker live here so that the TAP
# tests (033 stress, 050 crash) and the reliability suite share one
# definition of "the guard never let a stale write in":
#
#   FencingTest::stress_setup($node, $db)       the schema "stress": the
#                                                protected tables, the
#                                                history the server writes
#   FencingTest::run_stress($node, $db, %opts)  several psql clients writing
#                                                with fresh, stale and
#                                                missing tokens
#   FencingTest::check_history($node, $db, $run)
#                                                the invariants; a hash of
#                                                counts and violations
#   FencingTest::report($run, $check)            note lines with the figures
#   FencingTest::sql_error($node, $db, $sql)     the SQLSTATE of a statement
#                                                (or '' when it succeeded)
#   FencingTest::acked_max($attempts)            per scope, the highest token
#                                                whose COMMIT a client saw
#   FencingTest::probe_stale($node, $db)         every stored fence, and a
#                                                token below it, must get SF001
#   FencingTest::inst_config($inst, $opt)        pg_config --$opt of the
#                                                installation $inst
#   FencingTest::inst_unusable($var, $inst, ...) why the installation a suite
#                                                named in $var cannot be used
#   FencingTest::inst_fencing_version($inst)     its fencing default_version
#
# How the history is kept.  Every accepted write is logged by the server
# itself, in its own transaction: an AFTER ROW trigger on each written table
# inserts (xid, attempt, scope, key, token) into stress.history, and a
# DEFERRED constraint trigger on stress.history records the transaction's
# commit order as a sequence value taken at COMMIT time (stress.commits).  A
# transaction that must wait for another's row or scope lock takes its
# commit number only after the other committed, so within one scope the
# commit numbers order the writes as the guard serialised them.
#
# Scopes, as the checker names them:
#   accounts/<id>   row scope: stress.accounts, token in the fence column or
#                   in fencing.token
#   acct/<account>  key scope "acct" shared by stress.ledger (INSERT, DELETE)
#                   and stress.holds (UPDATE), token in fencing.token
#   adv/<id>        fencing.advance() in an UPDATE of the unprotected
#                   table stress.adv
#
# Clients are psql processes driven through IPC::Run from this one Perl
# process (no fork, so no END blocks run twice): each attempt is one
# transaction followed by \echo and \warn markers, and the client is polled
# without blocking until both markers came back.  The token generator is
# shared and grows monotonically; a share of attempts reuses an old token
# (stale) or carries none (missing).

package FencingTest;

use strict;
use warnings;

use IPC::Run;
use List::Util qw(max shuffle);
use Test::More;
use Time::HiRes qw(time);

# ---------------------------------------------------------------------
# fences

# Parse "E:C" (or "C") into [E, C]; undef for undef.
sub parse_fence
{
	my ($s) = @_;
	return undef unless defined $s && $s ne '';
	return [ $1 + 0, $2 + 0 ] if $s =~ /^\s*(\d+):(\d+)\s*$/;
	return [ 0, $1 + 0 ] if $s =~ /^\s*(\d+)\s*$/;
	die "not a fence: \"$s\"";
}

# Compare two fences (strings or parsed), undef sorting lowest.
sub fence_cmp
{
	my ($a, $b) = @_;
	$a = parse_fence($a) if defined $a && !ref $a;
	$b = parse_fence($b) if defined $b && !ref $b;
	return 0 if !defined $a && !defined $b;
	return -1 if !defined $a;
	return 1 if !defined $b;
	return $a->[0] <=> $b->[0] || $a->[1] <=> $b->[1];
}

# The larger of two fences (strings), undef losing.
sub fence_max
{
	my ($a, $b) = @_;
	return fence_cmp($a, $b) >= 0 ? $a : $b;
}

# ---------------------------------------------------------------------
# small SQL helpers

# Run $sql; return its SQLSTATE ('' on success), and stderr.
sub sql_error
{
	my ($node, $db, $sql) = @_;
	my ($ret, $stdout, $stderr) =
	  $node->psql($db, "\\set VERBOSITY verbose\n$sql");
	return ('', $stderr) if $ret == 0 && $stderr !~ /ERROR:/;
	return ($1, $stderr) if $stderr =~ /ERROR:\s+([0-9A-Z]{5}):/;
	return ('?????', $stderr);
}

# ---------------------------------------------------------------------
# the schema

our $SCHEMA_SQL = <<'EOSQL';
CREATE EXTENSION IF NOT EXISTS fencing;
CREATE SCHEMA stress;

-- what the server accepted, written by the accepting transaction itself
CREATE TABLE stress.history (
    id      bigserial PRIMARY KEY,
    xid     xid8 NOT NULL DEFAULT pg_current_xact_id(),
    attempt bigint,
    tbl     text NOT NULL,
    op      text NOT NULL,
    scope   text NOT NULL,
    token   fencing.fence NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON stress.history (xid);

-- the commit order of the transactions that wrote history
CREATE SEQUENCE stress.commit_seq;
CREATE TABLE stress.commits (
    xid xid8 PRIMARY KEY,
    seq bigint NOT NULL UNIQUE,
    at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- AFTER ROW: log the write with the token the guard accepted
-- TG_ARGV: scope prefix, key column; the token is the row's fence column,
-- or for DELETE the setting fencing.token
CREATE FUNCTION stress.log_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    r   jsonb := to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
    tok fencing.fence;
BEGIN
    IF TG_OP = 'DELETE' THEN
        tok := nullif(current_setting('fencing.token'), '')::fencing.fence;
    ELSE
        tok := (r ->> 'fence')::fencing.fence;
    END IF;
    INSERT INTO stress.history (attempt, tbl, op, scope, token)
    VALUES (nullif(current_setting('stress.attempt', true), '')::bigint,
            TG_TABLE_NAME, TG_OP,
            TG_ARGV[0] || '/' || (r ->> TG_ARGV[1]), tok);
    RETURN NULL;
END
$$;

-- DEFERRED: the commit number, taken at COMMIT while every lock is held
CREATE FUNCTION stress.record_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM stress.commits WHERE xid = pg_current_xact_id()) THEN
        INSERT INTO stress.commits (xid, seq)
        VALUES (pg_current_xact_id(), nextval('stress.commit_seq'));
    END IF;
    RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER commit_order AFTER INSERT ON stress.history
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION stress.record_commit();

-- row scope
CREATE TABLE stress.accounts (
    id      int PRIMARY KEY,
    balance bigint NOT NULL DEFAULT 0,
    fence   fencing.fence
);
INSERT INTO stress.accounts (id) SELECT g FROM generate_series(1, 3) g;
SELECT fencing.protect('stress.accounts');
CREATE TRIGGER log_write AFTER INSERT OR UPDATE OR DELETE ON stress.accounts
    FOR EACH ROW EXECUTE FUNCTION stress.log_write('accounts', 'id');

-- key scope "acct", shared by an append-only ledger and a holds table
CREATE TABLE stress.ledger (
    id      bigserial PRIMARY KEY,
    account text NOT NULL,
    amount  int NOT NULL,
    fence   fencing.fence
);
CREATE INDEX ON stress.ledger (account, id);
SELECT fencing.protect('stress.ledger', key_columns => '{account}',
                       scope_name => 'acct');
CREATE TRIGGER log_write AFTER INSERT OR UPDATE OR DELETE ON stress.ledger
    FOR EACH ROW EXECUTE FUNCTION stress.log_write('acct', 'account');

CREATE TABLE stress.holds (
    account text PRIMARY KEY,
    amount  bigint NOT NULL DEFAULT 0,
    fence   fencing.fence
);
INSERT INTO stress.holds (account, fence)
    SELECT 'acct-' || g, '0:1' FROM generate_series(1, 3) g;
SELECT fencing.protect('stress.holds', key_columns => '{account}',
                       scope_name => 'acct');
CREATE TRIGGER log_write AFTER INSERT OR UPDATE OR DELETE ON stress.holds
    FOR EACH ROW EXECUTE FUNCTION stress.log_write('acct', 'account');

-- no guard: fencing.advance() in the UPDATE
CREATE TABLE stress.adv (
    id    int PRIMARY KEY,
    n     bigint NOT NULL DEFAULT 0,
    fence fencing.fence
);
INSERT INTO stress.adv (id) SELECT g FROM generate_series(1, 2) g;
CREATE TRIGGER log_write AFTER UPDATE ON stress.adv
    FOR EACH ROW EXECUTE FUNCTION stress.log_write('adv', 'id');
EOSQL

# The fence stored for every scope, as "scope|fence" lines.
our $STORED_SQL = <<'EOSQL';
SELECT 'accounts/' || id, coalesce(fence::text, '') FROM stress.accounts
UNION ALL
SELECT 'acct/' || (key::jsonb ->> 0), fence::text FROM fencing.scopes
 WHERE scope_name = 'acct'
UNION ALL
SELECT 'adv/' || id, coalesce(fence::text, '') FROM stress.adv
ORDER BY 1
EOSQL

# Read the stored fences: { scope => fence string or undef }.
sub stored_fences
{
	my ($node, $db) = @_;
	my %f;
	foreach my $line (split /\n/, $node->safe_psql($db, $STORED_SQL))
	{
		my ($scope, $fence) = split /\|/, $line, 2;
		$f{$scope} = $fence eq '' ? undef : $fence;
	}
	return \%f;
}

# Create the schema; returns the baseline (the stored fences before load).
sub stress_setup
{
	my ($node, $db) = @_;
	$node->safe_psql($db, $SCHEMA_SQL);
	return stored_fences($node, $db);
}

# ---------------------------------------------------------------------
# the clients

# Start a psql client; returns its state.
sub start_client
{
	my ($node, $db, $name) = @_;
	my $c = { name => $name, in => '', out => '', err => '' };
	my $connstr = $node->connstr($db) . " application_name=fencing_stress";
	$c->{h} = IPC::Run::start(
		[
			$node->installed_command('psql'), '-X', '-q', '-A', '-t',
			'-v', 'ON_ERROR_STOP=0', '-d', $connstr
		],
		'<', \$c->{in}, '>', \$c->{out}, '2>', \$c->{err});
	$c->{in} .= "\\set VERBOSITY verbose\n";
	return $c;
}

# Reap a client whose psql ended (or end it).
sub stop_client
{
	my ($c) = @_;
	return if $c->{dead};
	$c->{dead} = 1;
	eval { $c->{in} .= "\\q\n"; $c->{h}->finish; 1 }
	  or eval { $c->{h}->kill_kill; 1 };
}

# The token generator: monotonically growing, with occasional new epochs
# (whose counters restart lower, to exercise the lexicographic order).
sub new_generator
{
	return { epoch => 1, counter => int(rand(100)), issued => [] };
}

sub fresh_token
{
	my ($g) = @_;
	if (rand() < 0.01)
	{
		$g->{epoch}++;
		$g->{counter} = int(rand(5));
	}
	else
	{
		$g->{counter} += 1 + int(rand(3));
	}
	my $t = "$g->{epoch}:$g->{counter}";
	push @{ $g->{issued} }, $t;
	return $t;
}

# An old token: one of the last few dozen issued.
sub stale_token
{
	my ($g) = @_;
	my $n = scalar @{ $g->{issued} };
	return fresh_token($g) if $n < 2;
	my $back = 1 + int(rand(($n - 1) < 40 ? $n - 1 : 40));
	return $g->{issued}[ $n - 1 - $back ];
}

# Build one attempt: its kind, token, scopes and SQL.
sub new_attempt
{
	my ($id, $g, %o) = @_;
	my $r = rand();
	my $tokmode =
	    $r < $o{missing_ratio} ? 'missing'
	  : $r < $o{missing_ratio} + $o{stale_ratio} ? 'stale'
	  :                                            'fresh';
	my $token =
	    $tokmode eq 'missing' ? undef
	  : $tokmode eq 'stale'   ? stale_token($g)
	  :                         fresh_token($g);
	my @kinds = @{ $o{kinds} };
	my $kind = $kinds[ int(rand(@kinds)) ];
	my $acc = 1 + int(rand(3));
	my $acct = 'acct-' . (1 + int(rand(3)));
	my $set = defined $token ? "SET LOCAL fencing.token = '$token';\n" : '';
	my (@sql, @scopes);

	if ($kind eq 'row')
	{
		# the token in the fence column, or in the setting
		my $via_column = defined $token && rand() < 0.5;
		my $upd =
		  $via_column
		  ? "UPDATE stress.accounts SET balance = balance + 1, fence = '$token' WHERE id = $acc;"
		  : "UPDATE stress.accounts SET balance = balance + 1 WHERE id = $acc;";
		push @sql, ($via_column ? '' : $set) . $upd;
		push @sql, $upd if rand() < 0.2;    # a repeat in one transaction
		@scopes = ("accounts/$acc");
	}
	elsif ($kind eq 'key')
	{
		my $rows = 1 + int(rand(2));
		my $how = rand();
		if ($how < 0.2 && defined $token)
		{
			# the token in the fence column of the new rows
			push @sql,
			  "INSERT INTO stress.ledger (account, amount, fence) SELECT '$acct', g, '$token' FROM generate_series(1, $rows) g;";
		}
		elsif ($how < 0.4)
		{
			push @sql,
			  $set
			  . "COPY stress.ledger (account, amount) FROM STDIN;\n"
			  . join('', map { "$acct\t$_\n" } 1 .. $rows) . "\\.";
		}
		else
		{
			push @sql,
			  $set
			  . "INSERT INTO stress.ledger (account, amount) SELECT '$acct', g FROM generate_series(1, $rows) g;";
		}
		push @sql,
		  rand() < 0.5
		  ? "UPDATE stress.holds SET amount = amount + 1 WHERE account = '$acct';"
		  : "INSERT INTO stress.holds (account, amount) VALUES ('$acct', 1) ON CONFLICT (account) DO UPDATE SET amount = holds.amount + 1;"
		  if rand() < 0.3;
		push @sql,
		  "DELETE FROM stress.ledger WHERE id = (SELECT min(id) FROM stress.ledger WHERE account = '$acct');"
		  if rand() < 0.2;
		@scopes = ("acct/$acct");
	}
	elsif ($kind eq 'transfer')
	{
		# two scopes, one token: a row and a key
		push @sql,
		  $set
		  . "UPDATE stress.accounts SET balance = balance - 1 WHERE id = $acc;";
		push @sql,
		  "INSERT INTO stress.ledger (account, amount) VALUES ('$acct', -1);";
		@scopes = ("accounts/$acc", "acct/$acct");
	}
	elsif ($kind eq 'adv')
	{
		my $id2 = 1 + int(rand(2));
		my $tok = defined $token ? "'$token'" : 'NULL';
		push @sql,
		  "UPDATE stress.adv SET n = n + 1, fence = fencing.advance(fence, $tok) WHERE id = $id2;";
		@scopes = ("adv/$id2");
	}
	else
	{
		die "unknown kind $kind";
	}

	# widen the race windows now and then
	splice(@sql, int(rand(@sql + 1)), 0, 'SELECT pg_sleep(0.002);')
	  if rand() < $o{sleep_ratio};

	# hold the written rows a while before COMMIT (to crash in between)
	push @sql, "SELECT pg_sleep($o{commit_sleep});" if $o{commit_sleep};

	# mostly READ COMMITTED; the others may fail with 40001 instead
	my $ir = rand();
	my $iso =
	    $ir < $o{rr_ratio} ? 'REPEATABLE READ'
	  : $ir < $o{rr_ratio} + $o{serializable_ratio} ? 'SERIALIZABLE'
	  :                                               'READ COMMITTED';

	return {
		id      => $id,
		iso     => $iso,
		kind    => $kind,
		commit_sleep => $o{commit_sleep},
		tokmode => $tokmode,
		token   => $token,
		scopes  => \@scopes,
		sql     => join("\n",
			"BEGIN ISOLATION LEVEL $iso;", "SET LOCAL stress.attempt = '$id';",
			@sql, 'COMMIT;'),
	};
}

# Send an attempt to a client, followed by the markers.
sub send_attempt
{
	my ($c, $a) = @_;
	$a->{client} = $c->{name};
	$a->{sent} = time;
	$c->{attempt} = $a;
	$c->{in} .= "$a->{sql}\n\\echo \@\@$a->{id}\@\@\n\\warn \@\@$a->{id}\@\@\n";
}

# Classify the stderr of a finished attempt.
sub classify
{
	my ($a, $err) = @_;
	$a->{acked} = time;
	if ($err =~ /ERROR:\s+([0-9A-Z]{5}):\s*(.*)/)
	{
		$a->{sqlstate} = $1;
		$a->{message} = $2;
		$a->{outcome} =
		    $1 eq 'SF001' ? 'stale'
		  : $1 eq 'SF002' ? 'missing'
		  :                 'other';
		$a->{lost_to} = $1
		  if $err =~ /DETAIL:\s+.*has already accepted fence token (\S+?)\.\s*$/m;
	}
	elsif ($err =~ /\S/)
	{
		# no SQL error but something on stderr: the connection was lost
		# (FATAL, server closed the connection), possibly in the middle of
		# COMMIT, so the attempt may or may not have committed
		$a->{outcome} = 'unknown';
		$a->{message} = $err;
	}
	else
	{
		$a->{outcome} = 'accepted';
	}
}

# Poll a client; true when something happened.
sub poll_client
{
	my ($c) = @_;
	return 0 if $c->{dead};
	my $alive = eval { $c->{h}->pump_nb; 1 } && $c->{h}->pumpable;
	my $a = $c->{attempt};
	if ($a)
	{
		my $m = "\@\@$a->{id}\@\@\n";
		my $io = index($c->{out}, $m);
		my $ie = index($c->{err}, $m);
		if ($io >= 0 && $ie >= 0)
		{
			classify($a, substr($c->{err}, 0, $ie));
			substr($c->{out}, 0, $io + length $m) = '';
			substr($c->{err}, 0, $ie + length $m) = '';
			$c->{attempt} = undef;
			return 1;
		}
	}
	if (!$alive)
	{
		# psql ended: the server went away; the attempt's fate is unknown
		if ($a)
		{
			$a->{outcome} = 'unknown';
			$a->{message} = $c->{err};
			$c->{attempt} = undef;
		}
		stop_client($c);
		return 1;
	}
	return 0;
}

# Run the workload.  Options: clients, seconds, stale_ratio, missing_ratio,
# sleep_ratio, rr_ratio and serializable_ratio (of transactions run at
# REPEATABLE READ and SERIALIZABLE; the rest READ COMMITTED), kinds, seed,
# on_tick (called with the elapsed seconds and the run; return true to stop
# sending new attempts), until (called with the run once seconds have
# passed: the run goes on until it returns true), max_seconds (the ceiling
# for on_tick and until, default 600: a run that reaches it stops, and the
# checks that waited for it fail), first_id, generator (to continue the
# tokens of an earlier run), pause_after and pause_sleep (after pause_after
# seconds, every transaction sleeps pause_sleep seconds, default 0.3,
# before its COMMIT: on_tick can then crash the server while every client
# is inside a write transaction).
#
# A test that checks what a run did (writes accepted, refused, cut off)
# makes it true with on_tick or until, which look at the run's outcomes,
# never with a number of seconds that a slow machine may not fill.
# Returns the run: { attempts => [...], seed, seconds, clients }.
sub run_stress
{
	my ($node, $db, %o) = @_;
	$o{clients} //= $ENV{FENCING_STRESS_CLIENTS} // 4;
	$o{seconds} //= $ENV{FENCING_STRESS_SECONDS} // 15;
	$o{stale_ratio} //= 0.3;
	$o{missing_ratio} //= 0.05;
	$o{sleep_ratio} //= 0.2;
	$o{rr_ratio} //= 0.1;
	$o{serializable_ratio} //= 0.1;
	$o{kinds} //= [qw(row row key key transfer adv)];
	$o{seed} //= $ENV{FENCING_STRESS_SEED} // int(rand(1 << 30));
	$o{first_id} //= 1;
	srand($o{seed});

	my $g = $o{generator} // new_generator();
	my @clients =
	  map { start_client($node, $db, "c$_") } 1 .. $o{clients};
	my $run = {
		attempts  => [],
		seed      => $o{seed},
		clients   => $o{clients},
		generator => $g,
	};
	my $id = $o{first_id};
	my $start = time;
	my $deadline = $start + $o{seconds};
	my $ceiling = $start + ($o{max_seconds} // 600);
	my $stop_sending = 0;
	my $stopped_at;

	while (1)
	{
		my $busy = 0;
		my $progress = 0;
		foreach my $c (@clients)
		{
			next if $c->{dead};
			$progress += poll_client($c);
			next if $c->{dead};
			if (!$c->{attempt} && !$stop_sending)
			{
				my $a = new_attempt(
					$id++, $g, %o,
					commit_sleep => defined $o{pause_after}
					  && time - $start >= $o{pause_after}
					? ($o{pause_sleep} // 0.3)
					: 0);
				push @{ $run->{attempts} }, $a;
				send_attempt($c, $a);
				$progress++;
			}
			$busy++ if $c->{attempt};
		}
		if ($o{on_tick} && !$stop_sending)
		{
			$stop_sending = 1 if $o{on_tick}->(time - $start, $run);
		}
		# the time is up once seconds have passed and until holds (if
		# given), or on_tick (if given) has stopped the run, or at the
		# ceiling
		if (!$stop_sending && time >= $deadline && !$o{on_tick}
			&& (!$o{until} || $o{until}->($run)))
		{
			$stop_sending = 1;
		}
		if (!$stop_sending && time >= $ceiling)
		{
			diag("stress run: stopped at the ceiling of "
				  . ($o{max_seconds} // 600)
				  . ' s before what it waited for happened');
			$stop_sending = 1;
		}
		$stopped_at //= time if $stop_sending;
		last if !$busy && $stop_sending;
		last if !grep { !$_->{dead} } @clients;
		if ($stopped_at && time > $stopped_at + 60)
		{
			diag('stress clients did not finish in time');
			last;
		}
		select(undef, undef, undef, 0.001) unless $progress;
	}
	stop_client($_) foreach @clients;
	foreach my $a (@{ $run->{attempts} })
	{
		$a->{outcome} //= 'unknown';
	}
	$run->{elapsed} = time - $start;
	$run->{next_id} = $id;
	return $run;
}

# How many attempts of a run ended with an outcome ('accepted', 'stale',
# 'missing', 'other', 'unknown'); a filter (a sub given an attempt) may
# narrow them.
sub outcomes
{
	my ($run, $outcome, $filter) = @_;
	return scalar grep {
		defined $_->{outcome}
		  && $_->{outcome} eq $outcome
		  && (!$filter || $filter->($_))
	} @{ $run->{attempts} };
}

# True when a crash now would cut a client off inside a write transaction
# after writes were accepted: an attempt was accepted, and one sent with a
# commit sleep has no answer yet.
sub ready_to_crash
{
	my ($run) = @_;
	return outcomes($run, 'accepted') > 0
	  && grep { $_->{commit_sleep} && !defined $_->{outcome} } @{ $run->{attempts} };
}

# ---------------------------------------------------------------------
# the checker

# Check the invariants of a run (or several runs' attempts) against what
# the server recorded.  $baseline: the stored fences before the load.
# Returns { counts..., violations => [strings] }.
sub check_history
{
	my ($node, $db, $attempts, $baseline) = @_;
	my @v;
	my %count = (attempts => scalar @$attempts);
	$count{$_} = 0 foreach qw(accepted stale missing other unknown);
	$count{ $_->{outcome} }++ foreach @$attempts;
	$count{rejected} = $count{stale} + $count{missing};

	# the server's history, in commit order
	my @hist;
	foreach my $line (
		split /\n/,
		$node->safe_psql(
			$db, q{
		SELECT h.id, coalesce(h.attempt, 0), h.scope, h.token, h.xid,
		       coalesce(c.seq, -1), h.tbl, h.op
		  FROM stress.history h LEFT JOIN stress.commits c USING (xid)
		 ORDER BY c.seq NULLS FIRST, h.id}))
	{
		my %h;
		@h{qw(id attempt scope token xid seq tbl op)} = split /\|/, $line;
		push @hist, \%h;
	}
	$count{history} = scalar @hist;

	# 1. every history row belongs to a committed transaction with a number
	foreach my $h (grep { $_->{seq} < 0 } @hist)
	{
		push @v, "history row $h->{id} (xid $h->{xid}) has no commit number";
	}

	# 2. per scope, in commit order, every accepted token beats every token
	#    accepted by an earlier transaction (and the baseline)
	my %best = %{ $baseline // {} };
	my %accepted_tokens;    # scope => { token => 1 }
	my %cur;                # scope => [xid, max token of this transaction]
	foreach my $h (grep { $_->{seq} >= 0 } @hist)
	{
		my $s = $h->{scope};
		$accepted_tokens{$s}{ $h->{token} } = 1;
		if ($cur{$s} && $cur{$s}[0] ne $h->{xid})
		{
			$best{$s} = fence_max($best{$s}, $cur{$s}[1]);
			delete $cur{$s};
		}
		if (fence_cmp($h->{token}, $best{$s}) <= 0)
		{
			push @v,
			  sprintf(
				"scope %s: token %s accepted (history %d, attempt %d, commit %d) after %s had been accepted by an earlier transaction",
				$s, $h->{token}, $h->{id}, $h->{attempt}, $h->{seq},
				$best{$s});
		}
		$cur{$s} = [ $h->{xid}, fence_max($cur{$s} ? $cur{$s}[1] : undef, $h->{token}) ];
	}
	foreach my $s (keys %cur)
	{
		$best{$s} = fence_max($best{$s}, $cur{$s}[1]);
	}

	# 3. the stored fence is the highest accepted token
	my $stored = stored_fences($node, $db);
	$count{fence_below} = $count{fence_mismatch} = 0;
	foreach my $s (sort keys %best)
	{
		my $cmp = fence_cmp($stored->{$s}, $best{$s});
		next if $cmp == 0;
		$count{fence_mismatch}++;
		$count{fence_below}++ if $cmp < 0;
		push @v,
		  sprintf("scope %s: stored fence %s, but the highest accepted token is %s",
			$s, $stored->{$s} // 'NULL', $best{$s} // 'NULL');
	}

	# 4. what clients were told matches what the server recorded
	$count{lost_commits} = $count{unknown_committed} = 0;
	my %by_attempt;
	push @{ $by_attempt{ $_->{attempt} } }, $_ foreach grep { $_->{seq} >= 0 } @hist;
	foreach my $a (@$attempts)
	{
		my $rows = $by_attempt{ $a->{id} } // [];
		if ($a->{outcome} eq 'accepted')
		{
			if (!defined $a->{token})
			{
				push @v, "attempt $a->{id} ($a->{kind}) without a token was accepted";
				next;
			}
			foreach my $s (@{ $a->{scopes} })
			{
				my @mine = grep { $_->{scope} eq $s } @$rows;
				$count{lost_commits}++ unless @mine;
				push @v,
				  "attempt $a->{id} ($a->{kind}, $s, $a->{token}) committed but is missing from the history"
				  unless @mine;
				foreach my $h (@mine)
				{
					push @v,
					  "attempt $a->{id}: history has token $h->{token}, the client sent $a->{token}"
					  if fence_cmp($h->{token}, $a->{token}) != 0;
				}
			}
		}
		elsif ($a->{outcome} eq 'unknown')
		{
			# cut off by a crash: all of it committed, or none of it
			my %seen = map { $_->{scope} => 1 } @$rows;
			my $n = grep { $seen{$_} } @{ $a->{scopes} };
			$count{unknown_committed}++ if $n;
			push @v,
			  "attempt $a->{id} ($a->{kind}) was cut off and committed only $n of its "
			  . scalar(@{ $a->{scopes} }) . " scopes"
			  if $n && $n != @{ $a->{scopes} };
		}
		elsif (@$rows)
		{
			push @v,
			  "attempt $a->{id} ($a->{kind}) was refused ($a->{sqlstate}) but the history has its writes";
		}
		if ($a->{outcome} eq 'stale')
		{
			# a stale refusal names a fence at least as new, that was accepted
			my $lost = $a->{lost_to};
			if (!defined $lost)
			{
				push @v, "attempt $a->{id}: SF001 without the fence it lost to";
			}
			elsif (fence_cmp($lost, $a->{token}) < 0)
			{
				push @v,
				  "attempt $a->{id}: token $a->{token} refused as stale against the older fence $lost";
			}
			elsif (!grep {
					$accepted_tokens{$_}{$lost}
					  || fence_cmp(($baseline // {})->{$_}, $lost) == 0
				} @{ $a->{scopes} })
			{
				push @v,
				  "attempt $a->{id}: refused against fence $lost, which no committed write of @{$a->{scopes}} carried";
			}
		}
		if ($a->{outcome} eq 'other')
		{
			$count{other_states}{ $a->{sqlstate} // 'none' }++;
		}
	}

	# 5. real time: a write sent after a newer-or-equal token of its scope
	#    was acknowledged must have been refused
	my @events;
	foreach my $a (grep { $_->{outcome} eq 'accepted' } @$attempts)
	{
		push @events, [ $a->{acked}, 1, $a ], [ $a->{sent}, 0, $a ];
	}
	my %acked_max;
	foreach my $e (sort { $a->[0] <=> $b->[0] || $b->[1] <=> $a->[1] } @events)
	{
		my $a = $e->[2];
		foreach my $s (@{ $a->{scopes} })
		{
			if ($e->[1])
			{
				$acked_max{$s} = fence_max($acked_max{$s}, $a->{token});
			}
			elsif (fence_cmp($a->{token}, $acked_max{$s}) <= 0)
			{
				push @v,
				  "attempt $a->{id} ($s, $a->{token}) was accepted though $acked_max{$s} had been acknowledged before it was sent";
			}
		}
	}

	$count{violations} = scalar @v;
	$count{violation_list} = \@v;
	return \%count;
}

# The highest token of the writes whose COMMIT a client saw, per scope:
# { scope => fence string }.
sub acked_max
{
	my ($attempts) = @_;
	my %m;
	foreach my $a (grep { $_->{outcome} eq 'accepted' } @$attempts)
	{
		$m{$_} = fence_max($m{$_}, $a->{token}) foreach @{ $a->{scopes} };
	}
	return \%m;
}

# Try a write with $token on the scope $scope ("accounts/1", "acct/acct-2",
# "adv/1"); returns its SQLSTATE ('' when it was accepted).
sub write_scope
{
	my ($node, $db, $scope, $token) = @_;
	my ($kind, $key) = split m{/}, $scope, 2;
	my $sql =
	    $kind eq 'accounts'
	  ? "SET LOCAL fencing.token = '$token'; UPDATE stress.accounts SET balance = balance + 1 WHERE id = $key;"
	  : $kind eq 'acct'
	  ? "SET LOCAL fencing.token = '$token'; INSERT INTO stress.ledger (account, amount) VALUES ('$key', 0);"
	  : "UPDATE stress.adv SET n = n + 1, fence = fencing.advance(fence, '$token') WHERE id = $key;";
	my ($state) = sql_error($node, $db, "BEGIN;\n$sql\nCOMMIT;");
	return $state;
}

# Probe every stored fence with stale tokens: the fence itself and a token
# just below it must both be refused with SF001.  Returns the number of
# probes and a list of the failures.
sub probe_stale
{
	my ($node, $db) = @_;
	my $stored = stored_fences($node, $db);
	my ($n, @bad) = (0);
	foreach my $s (sort keys %$stored)
	{
		my $f = parse_fence($stored->{$s}) or next;
		my @tokens = ("$f->[0]:$f->[1]");
		push @tokens, $f->[1] > 0 ? "$f->[0]:" . ($f->[1] - 1)
		  : $f->[0] > 0 ? ($f->[0] - 1) . ':9223372036854775807'
		  : ();
		foreach my $t (@tokens)
		{
			$n++;
			my $state = write_scope($node, $db, $s, $t);
			push @bad, "$s: token $t (stored fence $stored->{$s}) got '$state'"
			  if $state ne 'SF001';
		}
	}
	return ($n, \@bad);
}

# Note the figures of a check.
sub report
{
	my ($label, $run, $check) = @_;
	note sprintf(
		"%s: seed %s, %d clients, %.1f s: %d attempts, %d accepted, %d rejected (%d stale, %d missing), %d other errors, %d unknown (%d committed), %d history rows, %d violations",
		$label, $run->{seed} // '-', $run->{clients} // 0, $run->{elapsed} // 0,
		@{$check}{qw(attempts accepted rejected stale missing other unknown unknown_committed history violations)});
	if ($check->{other_states})
	{
		note "$label: other errors by SQLSTATE: "
		  . join(', ',
			map { "$_ x$check->{other_states}{$_}" }
			  sort keys %{ $check->{other_states} });
	}
	my @v = @{ $check->{violation_list} };
	diag("violation: $_") foreach @v[ 0 .. ($#v < 19 ? $#v : 19) ];
}


# ---------------------------------------------------------------------
# the installations other suites build and name in variables

# pg_config --$opt of installation $inst (a directory with bin/pg_config),
# or undef.
sub inst_config
{
	my ($inst, $opt) = @_;
	my $v = `"$inst/bin/pg_config" --$opt 2>/dev/null`;
	return undef if $?;
	chomp $v;
	return $v;
}

# Why installation $inst, named by variable $var, cannot be used, or undef:
# it needs bin/pg_config, the programs of $o{programs} in bin/, and each
# extension of $o{extensions} (default fencing) installed, its control file
# and, unless $o{control_only}, its library.
sub inst_unusable
{
	my ($var, $inst, %o) = @_;
	return "$var is not set" unless defined $inst && $inst ne '';
	return "$var=$inst: no $inst/bin/pg_config" unless -x "$inst/bin/pg_config";
	foreach my $p (@{ $o{programs} // [] })
	{
		return "$var=$inst: no $p in $inst/bin" unless -x "$inst/bin/$p";
	}
	my $share = inst_config($inst, 'sharedir') // '';
	my $lib = inst_config($inst, 'pkglibdir') // '';
	foreach my $ext (@{ $o{extensions} // ['fencing'] })
	{
		return "$var=$inst: $ext is not installed there (no $share/extension/$ext.control)"
		  unless -f "$share/extension/$ext.control";
		next if $o{control_only};
		my @libs = glob("$lib/$ext.*");
		return "$var=$inst: $ext is not installed there (no $ext library in $lib)"
		  unless @libs;
	}
	return undef;
}

# default_version of the fencing.control of installation $inst
sub inst_fencing_version
{
	my ($inst) = @_;
	my $file = (inst_config($inst, 'sharedir') // '') . '/extension/fencing.control';
	open my $fh, '<', $file or return '?';
	local $/;
	my $ctl = <$fh>;
	return $ctl =~ /^default_version\s*=\s*'([^']*)'/m ? $1 : '?';
}

1;
