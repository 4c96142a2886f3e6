// A worker process for the tests: holds a lock of the kind its
// configuration names and writes on command, so that a test can freeze it
// (SIGSTOP) while it holds the lock.  One line in, one line out:
//   acquire [FENCES_JSON] | tryacquire   -> locked TOKEN | nolock
//   next                                 -> token TOKEN (kept: "the prepared token")
//   update source|prepared TABLE ID      -> ok TOKEN | error CLASS REASON MESSAGE
//   insert source|prepared TABLE ACCT    -> the same (INSERT INTO TABLE (acct, amount) VALUES (ACCT, 1))
//   hold TABLE ID                        -> inside TOKEN: a fenced transaction (a new token from
//                                           the source) updated the row and stays open
//   go                                   -> that transaction's end: ok TOKEN | error ...
//   status                               -> held BOOL lost BOOL onlost N
//   release | quit                       -> released

import { createInterface } from 'node:readline';
import { Pool } from 'pg';
import { FencedOutError, runFenced, StaticToken, Token, TokenSource } from '@fencing/client';
import { Kind, makeSource } from './sources';

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2]) as { kind: Kind; name: string; ttlMs: number };
  const pool = new Pool({ max: 2 });
  let onLost = 0;
  const made = await makeSource(cfg.kind, pool, cfg.name, cfg.ttlMs, { onLost: () => { onLost++; } });
  const source = made.source;
  let prepared: Token | null = null;
  const out = (s: string) => process.stdout.write(s + '\n');
  const which = (mode: string): TokenSource => {
    if (mode === 'source') return source;
    if (!prepared) throw new Error('no prepared token');
    return new StaticToken(prepared);
  };
  const errorLine = (e: unknown): string => {
    const err = e as Error;
    const reason = e instanceof FencedOutError ? e.reason : (err as { code?: string }).code ?? '-';
    return `error ${err.name} ${reason} ${String(err.message).replace(/\s+/g, ' ')}`;
  };
  const open: { go: (() => void) | null } = { go: null };
  let holding: Promise<string> | null = null;
  for await (const line of createInterface({ input: process.stdin })) {
    const [cmd, ...args] = line.trim().split(/\s+/);
    try {
      if (cmd === 'acquire') {
        const fences = args.length ? JSON.parse(args.join(' ')) : undefined;
        out(`locked ${await source.acquire({ timeoutMs: 30000, fences })}`);
      } else if (cmd === 'tryacquire') {
        const t = await source.tryAcquire();
        out(t ? `locked ${t}` : 'nolock');
      } else if (cmd === 'next') {
        prepared = await source.nextToken();
        out(`token ${prepared}`);
      } else if (cmd === 'update' || cmd === 'insert') {
        const [mode, table, id] = args;
        const t = await runFenced(pool, which(mode), async (c, { token }) => {
          await c.query(cmd === 'update'
            ? `UPDATE ${table} SET n = n + 1 WHERE id = $1`
            : `INSERT INTO ${table} (acct, amount) VALUES ($1, 1)`, [id]);
          return token;
        });
        out(`ok ${t}`);
      } else if (cmd === 'hold') {
        const [table, id] = args;
        const gate = new Promise<void>((r) => { open.go = r; });
        holding = runFenced(pool, source, async (c, { token }) => {
          await c.query(`UPDATE ${table} SET n = n + 1 WHERE id = $1`, [id]);
          out(`inside ${token}`);
          await gate;
          return token;
        }).then((t) => `ok ${t}`, errorLine);
        void holding.then((r) => { if (r.startsWith('error') && open.go) { open.go = null; out(r); } });
      } else if (cmd === 'go') {
        const g = open.go;
        open.go = null;
        if (g) { g(); out(await holding!); }
      } else if (cmd === 'status') {
        out(`held ${source.held} lost ${source.lost.aborted} onlost ${onLost}`);
      } else if (cmd === 'release') {
        await source.release();
        out('released');
      } else if (cmd === 'quit') {
        break;
      } else {
        out(`error Unknown - ${cmd}`);
      }
    } catch (e) {
      out(errorLine(e));
    }
  }
  await source.release().catch(() => undefined);
  await made.close();
  await pool.end();
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
