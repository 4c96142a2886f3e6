// What needs no server: tokens, the static token, the error classes, the
// package's ESM and CommonJS entry points.

import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { DatabaseError } from 'pg';
import {
  Token, StaticToken, classifyError, FencedOutError, FencingError, StaleTokenError, TokenAlreadyUsedError,
  LeaseExpiredError, ClaimTakenOverError, TokenRequiredError, KeyInProgressError, KeyReusedError, GuardAlteredError,
  NotAcquiredError, LockLostError,
} from '@fencing/client';
import { fenceFromZxid } from '@fencing/client/zookeeper';

test('Token parses E:C and a bare C, orders epoch first, prints E:C', () => {
  assert.equal(Token.parse(' 3:42 ').toString(), '3:42');
  assert.equal(Token.parse('42').toString(), '0:42');
  assert.equal(new Token(1n, 0n).compare('0:9223372036854775807'), 1);
  assert.equal(Token.parse('2:5').compare(new Token(2, 6)), -1);
  assert.ok(Token.parse('7:7').equals('7:7'));
  assert.throws(() => Token.parse('1:x'), SyntaxError);
  assert.throws(() => Token.parse('-1:2'), SyntaxError);
  assert.throws(() => new Token(0n, 1n << 63n), RangeError);
});

test('a StaticToken hands out its token, for every call', async () => {
  const s = new StaticToken('5:1');
  assert.equal((await s.acquire()).toString(), '5:1');
  assert.equal((await s.tryAcquire()).toString(), '5:1');
  assert.equal((await s.nextToken()).toString(), '5:1');
  assert.ok(s.held && !s.lost.aborted);
  await s.release();
});

test('the ZooKeeper mapping is fencing.fence_from_zxid\'s: ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff)', () => {
  assert.equal(fenceFromZxid(0x0000000500000007n, 0n).toString(), '5:7');
  assert.equal(fenceFromZxid(0x0000000500000007n, 2n).toString(), `${(2n << 32n) | 5n}:7`);
});

test('every SQLSTATE of the extension has its class; SF001 by its reason (err.constraint); each is a FencingError and pg\'s DatabaseError', () => {
  const pgError = (code: string, constraint?: string) =>
    Object.assign(new DatabaseError('m', 1, 'error'), { code, constraint, table: 't', detail: 'd', hint: 'h' });
  const cases: [string, string | undefined, Function, string | undefined][] = [
    ['SF001', 'stale_token', StaleTokenError, 'stale_token'],
    ['SF001', 'token_already_used', TokenAlreadyUsedError, 'token_already_used'],
    ['SF001', 'lease_expired', LeaseExpiredError, 'lease_expired'],
    ['SF001', 'claim_taken_over', ClaimTakenOverError, 'claim_taken_over'],
    ['SF001', undefined, StaleTokenError, 'stale_token'],
    ['SF002', undefined, TokenRequiredError, undefined],
    ['SF003', undefined, KeyReusedError, undefined],
    ['SF004', undefined, KeyInProgressError, undefined],
    ['SF005', undefined, GuardAlteredError, undefined],
  ];
  for (const [code, constraint, cls, reason] of cases) {
    const src = pgError(code, constraint);
    const e = classifyError(src) as FencedOutError;
    assert.ok(e instanceof cls, `${code} ${constraint} → ${cls.name}`);
    assert.ok(e instanceof FencingError && e instanceof DatabaseError && e instanceof Error);
    assert.equal(e.name, cls.name);
    if (reason) { assert.ok(e instanceof FencedOutError); assert.equal(e.reason, reason); }
    assert.equal(e.code, code);
    assert.equal(e.table, 't');
    assert.equal(e.detail, 'd');
    assert.equal(e.hint, 'h');
    assert.equal(e.cause, src);
    assert.equal(classifyError(e), e);
  }
  const other = classifyError(pgError('SF001', 'some_new_reason')) as FencedOutError;
  assert.ok(other instanceof FencedOutError && other.reason === 'some_new_reason');
  const plain = pgError('40001');
  assert.equal(classifyError(plain), plain);
  assert.ok(!(plain instanceof FencingError));
  for (const C of [NotAcquiredError, LockLostError]) {
    const e = new C('x');
    assert.ok(e instanceof FencingError && e instanceof C && !(e instanceof DatabaseError));
    assert.equal(e.name, C.name);
  }
  assert.ok(!(new LockLostError('x') instanceof NotAcquiredError));
});

const pkgDir = join(__dirname, '..', '..');
const modules = [
  ['@fencing/client', 'runFenced runFencedMany runLocked LeaseSource StaticToken FencingError'],
  ['@fencing/client/etcd', 'EtcdSource'],
  ['@fencing/client/zookeeper', 'ZooKeeperSource'],
  ['@fencing/client/redis', 'RedisSource'],
];

test('the package loads as ESM (import) and as CommonJS (require), one copy of each class either way', () => {
  const esm = modules.map(([m, names], i) => `import { ${names.split(' ').join(', ')} } from '${m}'; const m${i} = [${names.split(' ').join(', ')}];`).join('\n') +
    `\nimport { createRequire } from 'node:module';
     const require = createRequire(process.cwd() + '/');
     const all = [${modules.map((_, i) => `...m${i}`).join(', ')}];
     const cjs = [${modules.map(([m, names]) => names.split(' ').map((n) => `require('${m}').${n}`).join(', ')).join(', ')}];
     console.log(all.every((f) => typeof f === 'function'), all.every((f, i) => f === cjs[i]), all.length);`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', esm], { cwd: pkgDir, encoding: 'utf8' });
  assert.equal(out.trim(), 'true true 9');
  const cjs = `const { runFenced, FencingError } = require('@fencing/client');
    const { RedisSource } = require('@fencing/client/redis');
    console.log(typeof runFenced, typeof FencingError, typeof RedisSource);`;
  assert.equal(execFileSync(process.execPath, ['-e', cjs], { cwd: pkgDir, encoding: 'utf8' }).trim(), 'function function function');
});
