-- The catalog shape of the fence type and advance(): type, operator
-- classes, functions with their signatures, volatility, strictness and
-- parallel safety, casts, operators and aggregates.
BEGIN;
SELECT plan(104);

-- The extension and its schema
SELECT has_extension('fencing', 'extension fencing is installed');
SELECT has_schema('fencing', 'schema fencing exists');
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension
            WHERE extname = 'fencing'), 'fencing', 'the extension lives in schema fencing');
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'fencing'),
          false, 'the extension is not relocatable');

-- The type
SELECT has_type('fencing', 'fence', 'type fencing.fence exists');
SELECT is((SELECT typlen FROM pg_type WHERE oid = 'fencing.fence'::regtype),
          16::smallint, 'fence is 16 bytes');
SELECT is((SELECT typbyval FROM pg_type WHERE oid = 'fencing.fence'::regtype),
          false, 'fence is passed by reference');
SELECT is((SELECT typalign FROM pg_type WHERE oid = 'fencing.fence'::regtype),
          'd', 'fence is double aligned');
SELECT is((SELECT typstorage FROM pg_type WHERE oid = 'fencing.fence'::regtype),
          'p', 'fence storage is plain');
SELECT is((SELECT typreceive::text || ',' || typsend::text FROM pg_type
            WHERE oid = 'fencing.fence'::regtype),
          'fencing.fence_recv,fencing.fence_send', 'fence has binary I/O');

-- Operator classes
SELECT has_opclass('fencing', 'fence_ops', 'btree opclass fencing.fence_ops exists');
SELECT has_opclass('fencing', 'fence_hash_ops', 'hash opclass fencing.fence_hash_ops exists');
SELECT is((SELECT string_agg(am.amname || ':' || opc.opcname || ':' || opc.opcdefault, ','
                             ORDER BY am.amname)
             FROM pg_opclass opc JOIN pg_am am ON am.oid = opc.opcmethod
            WHERE opc.opcintype = 'fencing.fence'::regtype),
          'btree:fence_ops:true,hash:fence_hash_ops:true',
          'the btree and hash opclasses are the defaults for fence');
SELECT is((SELECT string_agg(amprocnum::text || '=' || amproc::text, ',' ORDER BY amprocnum)
             FROM pg_amproc ap JOIN pg_opfamily f ON f.oid = ap.amprocfamily
             JOIN pg_am am ON am.oid = f.opfmethod
            WHERE am.amname = 'hash' AND ap.amproclefttype = 'fencing.fence'::regtype),
          '1=fencing.fence_hash,2=fencing.fence_hash_extended',
          'the hash opclass has the standard and the extended hash function');
SELECT is((SELECT string_agg(amopstrategy::text || '=' || amopopr::regoperator::text, ','
                             ORDER BY amopstrategy)
             FROM pg_amop ap JOIN pg_opfamily f ON f.oid = ap.amopfamily
             JOIN pg_am am ON am.oid = f.opfmethod
            WHERE am.amname = 'btree' AND ap.amoplefttype = 'fencing.fence'::regtype),
          '1=fencing.<(fencing.fence,fencing.fence),2=fencing.<=(fencing.fence,fencing.fence),'
          '3=fencing.=(fencing.fence,fencing.fence),4=fencing.>=(fencing.fence,fencing.fence),'
          '5=fencing.>(fencing.fence,fencing.fence)',
          'the btree opclass has the five strategies');

-- Functions and their signatures
SELECT has_function('fencing', f, args, format('function fencing.%s(%s) exists', f, array_to_string(args, ', ')))
  FROM (VALUES
    ('fence_in', ARRAY['cstring']),
    ('fence_out', ARRAY['fencing.fence']),
    ('fence_recv', ARRAY['internal']),
    ('fence_send', ARRAY['fencing.fence']),
    ('fence', ARRAY['bigint', 'bigint']),
    ('fence', ARRAY['bigint']),
    ('fence', ARRAY['integer']),
    ('epoch', ARRAY['fencing.fence']),
    ('counter', ARRAY['fencing.fence']),
    ('next', ARRAY['fencing.fence']),
    ('next_epoch', ARRAY['fencing.fence']),
    ('fence_eq', ARRAY['fencing.fence', 'fencing.fence']),
    ('fence_ne', ARRAY['fencing.fence', 'fencing.fence']),
    ('fence_lt', ARRAY['fencing.fence', 'fencing.fence']),
    ('fence_le', ARRAY['fencing.fence', 'fencing.fence']),
    ('fence_gt', ARRAY['fencing.fence', 'fencing.fence']),
    ('fence_ge', ARRAY['fencing.fence', 'fencing.fence']),
    ('fence_cmp', ARRAY['fencing.fence', 'fencing.fence']),
    ('fence_hash', ARRAY['fencing.fence']),
    ('fence_hash_extended', ARRAY['fencing.fence', 'bigint']),
    ('fence_larger', ARRAY['fencing.fence', 'fencing.fence']),
    ('fence_smaller', ARRAY['fencing.fence', 'fencing.fence']),
    ('max', ARRAY['fencing.fence']),
    ('min', ARRAY['fencing.fence']),
    ('advance', ARRAY['fencing.fence', 'fencing.fence', 'boolean'])
  ) AS v(f, args);

-- Return types of the public functions
SELECT function_returns('fencing', 'fence', ARRAY['bigint', 'bigint'], 'fencing.fence',
                        'fence(bigint, bigint) returns fence');
SELECT function_returns('fencing', 'epoch', ARRAY['fencing.fence'], 'bigint', 'epoch() returns bigint');
SELECT function_returns('fencing', 'counter', ARRAY['fencing.fence'], 'bigint', 'counter() returns bigint');
SELECT function_returns('fencing', 'next', ARRAY['fencing.fence'], 'fencing.fence', 'next() returns fence');
SELECT function_returns('fencing', 'next_epoch', ARRAY['fencing.fence'], 'fencing.fence', 'next_epoch() returns fence');
SELECT function_returns('fencing', 'advance', ARRAY['fencing.fence', 'fencing.fence', 'boolean'],
                        'fencing.fence', 'advance() returns fence');
SELECT is(pg_get_function_arguments('fencing.advance(fencing.fence, fencing.fence, boolean)'::regprocedure),
          'current fencing.fence, token fencing.fence, strict boolean DEFAULT true',
          'advance() has named arguments current, token, strict (default true)');
SELECT is(pg_get_function_arguments('fencing.fence(bigint, bigint)'::regprocedure),
          'epoch bigint, counter bigint', 'fence() has named arguments epoch, counter');
SELECT is_aggregate('fencing', 'max', ARRAY['fencing.fence'], 'max(fence) is an aggregate');
SELECT is_aggregate('fencing', 'min', ARRAY['fencing.fence'], 'min(fence) is an aggregate');

-- Volatility: every function of the type is a pure function of its arguments
SELECT volatility_is('fencing', p.proname, string_to_array(oidvectortypes(p.proargtypes), ', ')::name[],
                     'immutable', format('%s is IMMUTABLE', p.oid::regprocedure))
  FROM pg_proc p
 WHERE p.pronamespace = 'fencing'::regnamespace AND p.prokind = 'f'
   AND p.proname IN ('fence_in', 'fence_out', 'fence_recv', 'fence_send', 'fence',
                     'epoch', 'counter', 'next', 'next_epoch', 'fence_eq', 'fence_ne',
                     'fence_lt', 'fence_le', 'fence_gt', 'fence_ge', 'fence_cmp',
                     'fence_hash', 'fence_hash_extended', 'fence_larger',
                     'fence_smaller', 'advance')
 ORDER BY p.oid::regprocedure::text;

-- Parallel safety: all of them, and the aggregates
SELECT is(array_agg(p.oid::regprocedure::text ORDER BY 1), NULL,
          'no function of the type or advance() is PARALLEL UNSAFE or RESTRICTED')
  FROM pg_proc p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('fence_in', 'fence_out', 'fence_recv', 'fence_send', 'fence',
                     'epoch', 'counter', 'next', 'next_epoch', 'fence_eq', 'fence_ne',
                     'fence_lt', 'fence_le', 'fence_gt', 'fence_ge', 'fence_cmp',
                     'fence_hash', 'fence_hash_extended', 'fence_larger',
                     'fence_smaller', 'advance', 'max', 'min')
   AND p.proparallel <> 's';
SELECT is((SELECT count(*)::int FROM pg_proc p
            WHERE p.pronamespace = 'fencing'::regnamespace
              AND p.proname IN ('max', 'min') AND p.proparallel = 's'),
          2, 'min() and max() are PARALLEL SAFE');

-- Strictness: everything is STRICT except advance(), which handles NULLs
SELECT is_strict('fencing', f, args, format('%s(%s) is STRICT', f, array_to_string(args, ', ')))
  FROM (VALUES
    ('fence', ARRAY['bigint', 'bigint']), ('fence', ARRAY['bigint']),
    ('fence', ARRAY['integer']),
    ('epoch', ARRAY['fencing.fence']), ('counter', ARRAY['fencing.fence']),
    ('next', ARRAY['fencing.fence']), ('next_epoch', ARRAY['fencing.fence']),
    ('fence_in', ARRAY['cstring']), ('fence_recv', ARRAY['internal'])
  ) AS v(f, args);
SELECT isnt_strict('fencing', 'advance', ARRAY['fencing.fence', 'fencing.fence', 'boolean'],
                   'advance() is not STRICT (a NULL token must raise SF002)');

-- Comparison functions are LEAKPROOF (usable under row security)
SELECT is(array_agg(p.proname::text ORDER BY 1), NULL, 'the comparison functions are LEAKPROOF')
  FROM pg_proc p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('fence_eq', 'fence_ne', 'fence_lt', 'fence_le', 'fence_gt', 'fence_ge', 'fence_cmp')
   AND NOT p.proleakproof;

-- Casts
SELECT has_cast('bigint', 'fencing.fence', 'fencing', 'fence', 'cast bigint -> fence through fencing.fence(bigint)');
SELECT cast_context_is('bigint', 'fencing.fence', 'assignment', 'bigint -> fence is an assignment cast');
SELECT has_cast('integer', 'fencing.fence', 'fencing', 'fence', 'cast integer -> fence through fencing.fence(integer)');
SELECT cast_context_is('integer', 'fencing.fence', 'assignment', 'integer -> fence is an assignment cast');
SELECT has_cast('fencing.fence', 'text', 'cast fence -> text exists');
SELECT has_cast('text', 'fencing.fence', 'cast text -> fence exists');
SELECT is((SELECT castmethod FROM pg_cast
            WHERE castsource = 'fencing.fence'::regtype AND casttarget = 'text'::regtype),
          'i', 'fence -> text goes through I/O');
SELECT is((SELECT castmethod FROM pg_cast
            WHERE castsource = 'text'::regtype AND casttarget = 'fencing.fence'::regtype),
          'i', 'text -> fence goes through I/O');

-- Operators
SELECT has_operator('fencing.fence', 'fencing', op, 'fencing.fence', 'boolean',
                    format('operator fencing.%s(fence, fence) exists', op))
  FROM unnest(ARRAY['=', '<>', '<', '<=', '>', '>=']) AS op;
SELECT is((SELECT count(*)::int FROM pg_operator o
            WHERE o.oprleft = 'fencing.fence'::regtype AND o.oprright = 'fencing.fence'::regtype
              AND o.oprcom <> 0 AND o.oprnegate <> 0
              AND o.oprrest <> 0 AND o.oprjoin <> 0),
          6, 'all six operators have a commutator, a negator and selectivity estimators');
SELECT is((SELECT oprcanhash AND oprcanmerge FROM pg_operator
            WHERE oid = 'fencing.=(fencing.fence, fencing.fence)'::regoperator),
          true, '= is HASHES and MERGES');

-- Comments on the public objects
SELECT isnt(obj_description('fencing.fence'::regtype, 'pg_type'), NULL, 'the type has a comment');
SELECT is(array_agg(p.oid::regprocedure::text ORDER BY 1), NULL,
          'every public function and aggregate has a comment')
  FROM pg_proc p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('fence', 'epoch', 'counter', 'next', 'next_epoch', 'advance', 'max', 'min')
   AND obj_description(p.oid, 'pg_proc') IS NULL;

SELECT * FROM finish();
ROLLBACK;
