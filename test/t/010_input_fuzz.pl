# Fuzz the input functions of fencing.fence, text and binary.
#
# Thousands of random and mutated inputs go through fence_in (a text cast)
# and fence_recv (binary COPY FROM), in one server-side loop each.  Every
# outcome is compared with an independent oracle written here from the
# type's rules (E:C or a bare C, each part 0 .. 2^63-1, white space around
# it and nothing else): which inputs are accepted and their canonical form,
# and which SQLSTATE each rejected input gets.  The same text inputs go through the
# setting fencing.token (SET LOCAL), which must refuse exactly what the type
# refuses and carry the canonical value into the guard.  Finally the server must still be up
# and must not have logged a crash.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $seed = $ENV{FENCING_FUZZ_SEED} // time();
srand($seed);
note "random seed $seed (set FENCING_FUZZ_SEED to repeat)";

my $MAX = '9223372036854775807';

my $node = PostgreSQL::Test::Cluster->new('fuzz');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

# ---------------------------------------------------------------------------
# The oracles
# ---------------------------------------------------------------------------

# Is a string of ASCII digits above the int64 maximum?
sub too_big
{
	my ($digits) = @_;
	$digits =~ s/^0+(?=.)//;
	return length($digits) > length($MAX)
	  || (length($digits) == length($MAX) && $digits gt $MAX);
}

# The expected outcome of text input: ['ok', canonical] or ['err', sqlstate].
sub text_oracle
{
	my ($s) = @_;
	my $ws = qr/[ \t\n\r\x0b\x0c]/;
	$s =~ s/^$ws+//;
	$s =~ s/$ws+$//;
	return [ 'err', '22P02' ]
	  unless $s =~ /^(-?)([0-9]+)(?::(-?)([0-9]+))?$/;
	my ($n1, $d1, $n2, $d2) = ($1, $2, $3, $4);
	# "-0" is not a negative number, and not a fence either
	return [ 'err', '22P02' ] if $n1 && $d1 =~ /^0+$/;
	return [ 'err', '22P02' ] if defined $n2 && $n2 && $d2 =~ /^0+$/;
	my @parts = defined $d2 ? ([ $n1, $d1 ], [ $n2, $d2 ]) : ([ '', '0' ], [ $n1, $d1 ]);
	for my $p (@parts)
	{
		return [ 'err', '22003' ] if $p->[0] || too_big($p->[1]);
	}
	my @canon = map { my $d = $_->[1]; $d =~ s/^0+(?=.)//; $d } @parts;
	return [ 'ok', "$canon[0]:$canon[1]" ];
}

# The expected outcome of binary input of one field of the given bytes.
sub binary_oracle
{
	my ($bytes) = @_;
	my $len = length($bytes);
	# fence_recv reads two int8: PostgreSQL reports a short field itself
	return [ 'err', '08P01' ] if $len < 16;
	my ($e, $c) = unpack('q>q>', $bytes);
	return [ 'err', '22003' ] if $e < 0 || $c < 0;
	# COPY checks that the whole field was consumed
	return [ 'err', '22P03' ] if $len > 16;
	return [ 'ok', "$e:$c" ];
}

# ---------------------------------------------------------------------------
# Text input
# ---------------------------------------------------------------------------

my @alphabet = (
	('0' .. '9') x 6, ':', ':', ':', '-', '-', '+', ' ', "\t", "\n", "\r",
	"\x0b", "\x0c", 'e', 'E', 'x', '.', ',', 'a', 'z', "\x01", "\x1b", "\x7f",
	"\x{ff11}", "\x{0661}", "\x{00a0}", "\x{00e9}", "'", '"', '\\', '(', ')');

sub random_digits
{
	my ($n) = @_;
	return join('', map { int(rand(10)) } 1 .. $n);
}

# A valid-looking fence near interesting values
sub random_valid
{
	my @parts;
	for (1 .. 2)
	{
		my $r = rand();
		push @parts,
		    $r < 0.3 ? int(rand(10))
		  : $r < 0.5 ? random_digits(1 + int(rand(19)))
		  : $r < 0.7 ? substr($MAX, 0, 18) . int(rand(10)) . int(rand(10))
		  : $r < 0.8 ? $MAX
		  : $r < 0.9 ? ('0' x int(rand(5))) . random_digits(1 + int(rand(3)))
		  :            random_digits(19 + int(rand(3)));
	}
	my $s = rand() < 0.8 ? "$parts[0]:$parts[1]" : $parts[1];
	$s = '-' . $s if rand() < 0.05;
	$s = "$parts[0]:-$parts[1]" if rand() < 0.05;
	$s = ' ' x int(rand(3)) . $s . "\t" x int(rand(2)) if rand() < 0.3;
	return $s;
}

# Mutate a string: insert, delete, replace or duplicate characters
sub mutate
{
	my ($s) = @_;
	my $n = 1 + int(rand(3));
	for (1 .. $n)
	{
		my $pos = int(rand(length($s) + 1));
		my $op = int(rand(4));
		my $ch = $alphabet[ int(rand(@alphabet)) ];
		if ($op == 0) { substr($s, $pos, 0) = $ch; }
		elsif ($op == 1 && length($s)) { substr($s, $pos, 1) = ''; }
		elsif ($op == 2 && length($s)) { substr($s, $pos, 1) = $ch; }
		else { substr($s, $pos, 0) = substr($s, 0, $pos); }
	}
	return $s;
}

my @inputs = (
	'', ' ', '0', '0:0', '-0', '-1', ":", '1:', ':1', '1::2', '1:2:3',
	"$MAX:$MAX", "$MAX", '9223372036854775808', "0:9223372036854775808",
	'9' x 100, '0' x 100, '1e3', '0x1F', "\t\n 3:42 \r\n", "3:42\x{00a0}");
while (@inputs < 6000)
{
	my $r = rand();
	if ($r < 0.35) { push @inputs, random_valid(); }
	elsif ($r < 0.8) { push @inputs, mutate(random_valid()); }
	else
	{
		push @inputs,
		  join('', map { $alphabet[ int(rand(@alphabet)) ] } 1 .. int(rand(12)));
	}
}

# Send the inputs hex-encoded (UTF-8), so that no quoting can go wrong.
sub hexenc
{
	my ($s) = @_;
	my $b = $s;
	utf8::encode($b);
	return unpack('H*', $b);
}
my $array = join(',', map { '"' . hexenc($_) . '"' } @inputs);

$node->safe_psql(
	'postgres', qq{
CREATE TABLE text_inputs (n int PRIMARY KEY, input text NOT NULL);
INSERT INTO text_inputs
  SELECT n, convert_from(decode(h, 'hex'), 'UTF8')
    FROM unnest('{$array}'::text[]) WITH ORDINALITY AS u(h, n);
CREATE TABLE text_results (n int PRIMARY KEY, state text, result text);
DO \$\$
DECLARE
    r record;
    v text;
BEGIN
    FOR r IN SELECT n, input FROM text_inputs ORDER BY n LOOP
        BEGIN
            v := r.input::fencing.fence::text;
            INSERT INTO text_results VALUES (r.n, NULL, v);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO text_results VALUES (r.n, SQLSTATE, NULL);
        END;
    END LOOP;
END \$\$;
});

my $out = $node->safe_psql('postgres',
	q{SELECT n, coalesce(state, ''), coalesce(result, '') FROM text_results ORDER BY n});
my (%states, $mismatch, $accepted);
$mismatch = 0;
$accepted = 0;
for my $line (split /\n/, $out)
{
	my ($n, $state, $result) = split /\|/, $line, 3;
	my $input = $inputs[ $n - 1 ];
	my $want = text_oracle($input);
	$states{ $state eq '' ? 'accepted' : $state }++;
	my $got = $state eq '' ? [ 'ok', $result ] : [ 'err', $state ];
	if ($got->[0] ne $want->[0] || $got->[1] ne $want->[1])
	{
		$mismatch++;
		diag sprintf("input %s: got %s %s, expected %s %s",
			hexenc($input), @$got, @$want)
		  if $mismatch <= 20;
	}
	$accepted++ if $state eq '';
}
is(scalar(split /\n/, $out), scalar(@inputs), 'every text input was tried');
note join(', ', map { "$_: $states{$_}" } sort keys %states);
is($mismatch, 0, 'text input: every outcome agrees with the oracle');
ok($accepted > 500, "text input: many inputs were accepted ($accepted)");
ok(($states{'22P02'} // 0) > 500, 'text input: many syntax errors');
ok(($states{'22003'} // 0) > 50, 'text input: many range errors');
is(join(',', grep { !/^(accepted|22P02|22003)$/ } sort keys %states),
	'', 'text input: no SQLSTATE other than 22P02 and 22003');

# Accepted values round-trip to their canonical form
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM text_results
 WHERE state IS NULL
   AND (result::fencing.fence::text <> result
        OR fencing.fence_send(result::fencing.fence)
           <> int8send(split_part(result, ':', 1)::bigint)
              || int8send(split_part(result, ':', 2)::bigint))}),
	'0',
	'text input: accepted values round-trip and send as two int8');

# ---------------------------------------------------------------------------
# Binary input, through COPY FROM ... (FORMAT binary)
# ---------------------------------------------------------------------------

sub random_field
{
	my $r = rand();
	my $q = sub { pack('q>', $_[0]) };
	return
	    $r < 0.25 ? pack('q>q>', int(rand(1000)), int(rand(1000)))
	  : $r < 0.35 ? pack('q>q>', 9223372036854775807, 9223372036854775807 - int(rand(3)))
	  : $r < 0.6  ? join('', map { chr(int(rand(256))) } 1 .. 16)
	  : $r < 0.7  ? pack('q>q>', -1 - int(rand(1000)), int(rand(1000)))
	  : $r < 0.8  ? pack('q>q>', int(rand(1000)), -1 - int(rand(1000)))
	  :             join('', map { chr(int(rand(256))) } 1 .. int(rand(33)));
}

my @fields = ('', "\0" x 15, "\0" x 16, "\0" x 17, "\x80" . "\0" x 15,
	"\0" x 8 . "\x80" . "\0" x 7, "\x7f" . "\xff" x 7 . "\x7f" . "\xff" x 7);
push @fields, random_field() while @fields < 2000;
my $barray = join(',', map { '"' . unpack('H*', $_) . '"' } @fields);

$node->safe_psql(
	'postgres', qq{
CREATE TABLE binary_inputs (n int PRIMARY KEY, field bytea NOT NULL);
INSERT INTO binary_inputs
  SELECT n, decode(h, 'hex') FROM unnest('{$barray}'::text[]) WITH ORDINALITY AS u(h, n);
CREATE TABLE binary_results (n int PRIMARY KEY, state text, result text);
CREATE TABLE target (f fencing.fence);
CREATE FUNCTION copy_one(file bytea) RETURNS void LANGUAGE plpgsql AS \$\$
DECLARE
    path text := current_setting('data_directory') || '/fuzz.bin';
    lo oid;
BEGIN
    lo := lo_from_bytea(0, file);
    PERFORM lo_export(lo, path);
    PERFORM lo_unlink(lo);
    EXECUTE format('COPY target FROM %L WITH (FORMAT binary)', path);
END \$\$;
CREATE FUNCTION copy_file(field bytea, declared int DEFAULT NULL) RETURNS bytea
LANGUAGE sql AS \$\$
    SELECT '\\x5047434f50590aff0d0a00'::bytea || '\\x0000000000000000'::bytea
           || '\\x0001'::bytea || int4send(coalesce(declared, length(field)))
           || field || '\\xffff'::bytea
\$\$;
DO \$\$
DECLARE
    r record;
    v text;
BEGIN
    FOR r IN SELECT n, field FROM binary_inputs ORDER BY n LOOP
        BEGIN
            DELETE FROM target;
            PERFORM copy_one(copy_file(r.field));
            SELECT f::text INTO STRICT v FROM target;
            INSERT INTO binary_results VALUES (r.n, NULL, v);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO binary_results VALUES (r.n, SQLSTATE, NULL);
        END;
    END LOOP;
END \$\$;
});

$out = $node->safe_psql('postgres',
	q{SELECT n, coalesce(state, ''), coalesce(result, '') FROM binary_results ORDER BY n});
%states = ();
$mismatch = 0;
for my $line (split /\n/, $out)
{
	my ($n, $state, $result) = split /\|/, $line, 3;
	my $field = $fields[ $n - 1 ];
	my $want = binary_oracle($field);
	$states{ $state eq '' ? 'accepted' : $state }++;
	my $got = $state eq '' ? [ 'ok', $result ] : [ 'err', $state ];
	if ($got->[0] ne $want->[0] || $got->[1] ne $want->[1])
	{
		$mismatch++;
		diag sprintf("field %s: got %s %s, expected %s %s",
			unpack('H*', $field), @$got, @$want)
		  if $mismatch <= 20;
	}
}
is(scalar(split /\n/, $out), scalar(@fields), 'every binary input was tried');
note join(', ', map { "$_: $states{$_}" } sort keys %states);
is($mismatch, 0, 'binary input: every outcome agrees with the oracle');
ok(($states{accepted} // 0) > 300, 'binary input: many fields were accepted');
ok(($states{'22003'} // 0) > 300, 'binary input: many negative parts were rejected');
is(join(',', grep { !/^(accepted|22003|22P03|08P01)$/ } sort keys %states),
	'', 'binary input: no SQLSTATE other than 22003, 22P03 and 08P01');

# A field whose declared length runs past the end of the file, and a NULL
$node->safe_psql(
	'postgres', q{
CREATE FUNCTION try_copy(file bytea) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM target;
    PERFORM copy_one(file);
    RETURN 'accepted';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
});
like(
	$node->safe_psql('postgres',
		q{SELECT try_copy(copy_file('\x00000000000000010000000000000002', 40))}),
	qr/^(22P04|08P01)$/,
	'binary input: a field running past the end of the file is rejected');
like(
	$node->safe_psql('postgres',
		q{SELECT try_copy(copy_file('\x00000000000000010000000000000002', 8))}),
	qr/^(22P04|08P01)$/,
	'binary input: a field shorter than declared is rejected');
is( $node->safe_psql(
		'postgres',
		q{SELECT try_copy(copy_file('', -1));
		  SELECT count(*) FROM target WHERE f IS NULL}),
	"accepted\n1",
	'binary input: a NULL field is NULL');

# ---------------------------------------------------------------------------
# The setting fencing.token: the same inputs through SET LOCAL
# ---------------------------------------------------------------------------

# Every text input is set with SET LOCAL fencing.token (inside a
# subtransaction, with the library loaded, so the check hook parses it),
# then a row is inserted into a table protected in row scope: the guard
# writes the token it used into the fence column.  A bad value must fail at
# SET with 22P02 or 22003, as the type's input does; a good one must be
# the canonical parse of the text; the empty string means "no token".
$node->safe_psql(
	'postgres', q{
CREATE TABLE token_target (n int, fence fencing.fence);
SELECT fencing.protect('token_target');
CREATE TABLE token_results (n int PRIMARY KEY, state text, result text);
DO $$
DECLARE
    r record;
    v text;
BEGIN
    PERFORM '0'::fencing.fence;     -- the library is loaded: SET is checked
    FOR r IN SELECT n, input FROM text_inputs ORDER BY n LOOP
        BEGIN
            EXECUTE pg_catalog.format('SET LOCAL fencing.token = %L', r.input);
            INSERT INTO token_target VALUES (r.n) RETURNING fence::text INTO v;
            INSERT INTO token_results VALUES (r.n, NULL, coalesce(v, 'none'));
            RESET fencing.token;
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO token_results VALUES (r.n, SQLSTATE, NULL);
        END;
    END LOOP;
END $$;
});
$out = $node->safe_psql('postgres',
	q{SELECT n, coalesce(state, ''), coalesce(result, '') FROM token_results ORDER BY n});
%states = ();
$mismatch = 0;
for my $line (split /\n/, $out)
{
	my ($n, $state, $result) = split /\|/, $line, 3;
	my $input = $inputs[ $n - 1 ];
	my $want = $input eq '' ? [ 'ok', 'none' ] : text_oracle($input);
	$states{ $state eq '' ? 'accepted' : $state }++;
	my $got = $state eq '' ? [ 'ok', $result ] : [ 'err', $state ];
	if ($got->[0] ne $want->[0] || $got->[1] ne $want->[1])
	{
		$mismatch++;
		diag sprintf("fencing.token %s: got %s %s, expected %s %s",
			hexenc($input), @$got, @$want)
		  if $mismatch <= 20;
	}
}
is(scalar(split /\n/, $out), scalar(@inputs),
	'fencing.token: every input was tried with SET LOCAL');
note 'fencing.token: ' . join(', ', map { "$_: $states{$_}" } sort keys %states);
is($mismatch, 0,
	'fencing.token: every value is refused as the type refuses it, or used as its canonical parse');
is(join(',', grep { !/^(accepted|22P02|22003)$/ } sort keys %states),
	'', 'fencing.token: no SQLSTATE other than 22P02 and 22003');
is($node->safe_psql('postgres', q{SELECT count(*) FROM token_target WHERE fence IS NULL}),
	scalar(grep { $_ eq '' } @inputs),
	'fencing.token: only the empty value wrote no token');

# ---------------------------------------------------------------------------
# Idempotency keys: fencing.idem_begin with random keys and requests
# ---------------------------------------------------------------------------

# Keys: the text inputs above (empty, white space, control characters,
# non-ASCII), some over 255 characters, a few NULL; requests: a handful of
# JSON documents (so that keys come back with another request: SF003), a
# few NULL.  Only 22023 (empty or over-long key), 22004 (NULL), SF003, SF004
# or a row in state started, done or resumed may come back.
my @requests = ('{"a": 1}', '{"a": 1, "b": [1, 2]}', '"x"', '[]', 'null', '{"a": 2}');
my @idem;
for my $i (0 .. 2999)
{
	my $r = rand();
	my $key =
	    $r < 0.03 ? undef
	  : $r < 0.08 ? 'k' x (250 + int(rand(10)))
	  : $r < 0.5  ? $inputs[ int(rand(@inputs)) ]
	  :             'key-' . int(rand(300));
	my $req = rand() < 0.03 ? undef : $requests[ int(rand(@requests)) ];
	push @idem, [ $key, $req ];
}
my $iarray = join(',',
	map { defined $_->[0] ? '"' . hexenc($_->[0]) . '"' : 'NULL' } @idem);
my $rarray = join(',', map { defined $_->[1] ? '"' . hexenc($_->[1]) . '"' : 'NULL' } @idem);
$node->safe_psql(
	'postgres', qq{
CREATE TABLE idem_inputs (n int PRIMARY KEY, key text, request jsonb);
INSERT INTO idem_inputs
  SELECT n, convert_from(decode(k, 'hex'), 'UTF8'), convert_from(decode(r, 'hex'), 'UTF8')::jsonb
    FROM unnest('{$iarray}'::text[], '{$rarray}'::text[]) WITH ORDINALITY AS u(k, r, n);
CREATE TABLE idem_results (n int PRIMARY KEY, state text);
DO \$\$
DECLARE
    i record;
    st text;
BEGIN
    FOR i IN SELECT n, key, request FROM idem_inputs ORDER BY n LOOP
        BEGIN
            SELECT b.state INTO st
              FROM fencing.idem_begin(i.key, i.request, wait => false) b;
            -- now and then finish the claim, so that later calls see "done"
            IF st IN ('started', 'resumed') AND i.n % 3 = 0 THEN
                PERFORM fencing.idem_complete(i.key, k.claim, '{"ok": true}')
                   FROM fencing.idempotency_keys k WHERE k.key = i.key;
            END IF;
            INSERT INTO idem_results VALUES (i.n, st);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO idem_results VALUES (i.n, SQLSTATE);
        END;
    END LOOP;
END \$\$;
});
$out = $node->safe_psql('postgres',
	q{SELECT state, count(*) FROM idem_results GROUP BY 1 ORDER BY 1});
my %istates = map { split /\|/ } split /\n/, $out;
note 'idem_begin: ' . join(', ', map { "$_: $istates{$_}" } sort keys %istates);
is(join(',', grep { !/^(started|done|resumed|22023|22004|SF003|SF004)$/ } sort keys %istates),
	'', 'idem_begin: only started/done/resumed, 22023, 22004, SF003 or SF004');
ok(($istates{started} // 0) > 0 && ($istates{'22023'} // 0) > 0
	  && ($istates{SF003} // 0) > 0 && ($istates{'22004'} // 0) > 0,
	'idem_begin: keys were started, and refused as empty/over-long, NULL and reused');

# ---------------------------------------------------------------------------
# The server survived
# ---------------------------------------------------------------------------
is($node->safe_psql('postgres', q{SELECT '3:42'::fencing.fence::text}),
	'3:42', 'the server is still alive');
ok(!$node->log_contains('terminated by signal|was terminated|PANIC'),
	'no backend crashed');

$node->stop;
done_testing();
