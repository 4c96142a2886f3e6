// Tokens and the classification of errors, without a server.

import test from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import {
  Token, StaticTokenSource, classifyError, FencedOutError, StaleTokenError, TokenAlreadyUsedError,
  LeaseExpiredError, ClaimTakenOverError, TokenRequiredError, InProgressError, IdempotencyKeyReusedError,
} from '@fencing/client';

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

test('a static token source hands out its token', async () => {
  const s = new StaticTokenSource('5:1');
  assert.equal((await s.acquire()).toString(), '5:1');
  await s.release();
});

test('SF001 is classified by its reason (err.constraint), stale_token when absent', () => {
  const sf001 = (constraint?: string) => Object.assign(new Error('m'), { code: 'SF001', constraint, table: 't' });
  const cases: [string | undefined, Function, string][] = [
    ['stale_token', StaleTokenError, 'stale_token'],
    ['token_already_used', TokenAlreadyUsedError, 'token_already_used'],
    ['lease_expired', LeaseExpiredError, 'lease_expired'],
    ['claim_taken_over', ClaimTakenOverError, 'claim_taken_over'],
    [undefined, StaleTokenError, 'stale_token'],
  ];
  for (const [constraint, cls, reason] of cases) {
    const e = classifyError(sf001(constraint)) as FencedOutError;
    assert.ok(e instanceof cls, `${constraint} → ${cls.name}`);
    assert.ok(e instanceof FencedOutError);
    assert.equal(e.reason, reason);
    assert.equal(e.code, 'SF001');
    assert.equal(e.table, 't');
    assert.ok(e.cause instanceof Error);
  }
  const other = classifyError(sf001('some_new_reason')) as FencedOutError;
  assert.ok(other instanceof FencedOutError && other.reason === 'some_new_reason');
  assert.ok(classifyError(Object.assign(new Error('m'), { code: 'SF002' })) instanceof TokenRequiredError);
  assert.ok(classifyError(Object.assign(new Error('m'), { code: 'SF003' })) instanceof IdempotencyKeyReusedError);
  assert.ok(classifyError(Object.assign(new Error('m'), { code: 'SF004' })) instanceof InProgressError);
  const plain = Object.assign(new Error('m'), { code: '40001' });
  assert.equal(classifyError(plain), plain);
});

test('the package loads from ESM too (named imports of every entry point)', () => {
  const code = "import { runFenced, Token } from '@fencing/client';" +
    "import { EtcdTokenSource } from '@fencing/client/etcd';" +
    "import { ZooKeeperTokenSource } from '@fencing/client/zookeeper';" +
    "import { RedisTokenSource } from '@fencing/client/redis';" +
    "console.log([runFenced, EtcdTokenSource, ZooKeeperTokenSource, RedisTokenSource].map((f) => typeof f).join(' '), String(Token.parse('1:2')));";
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: join(__dirname, '..'), encoding: 'utf8' });
  assert.equal(out.trim(), 'function function function function 1:2');
});
