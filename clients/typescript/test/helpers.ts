// Shared by the tests: the servers (from the environment the suite sets),
// worker processes, polling for a state.

import { ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import * as path from 'node:path';
import { Pool, PoolConfig } from 'pg';

/** The servers, as test/suites/client_typescript.sh exports them. */
export const env = {
  etcd: process.env.FENCING_TS_ETCD,
  zk: process.env.FENCING_TS_ZK,
  redisPort: process.env.FENCING_TS_REDIS_PORT ? Number(process.env.FENCING_TS_REDIS_PORT) : undefined,
  pgbouncerPort: process.env.FENCING_TS_PGBOUNCER_PORT ? Number(process.env.FENCING_TS_PGBOUNCER_PORT) : undefined,
};

/** A pool on the test database (PGHOST, PGPORT, PGUSER, PGDATABASE). */
export function newPool(config: PoolConfig = {}): Pool {
  return new Pool({ max: 4, ...config });
}

/** A name unique to this process, for tables, keys and locks. */
export function unique(prefix: string): string {
  return `${prefix}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
}

/** Polls cond() every 20 ms until it is true; an error after timeoutMs. */
export async function waitFor(what: string, cond: () => Promise<boolean> | boolean, timeoutMs = 20000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A table protected in key scope (strict) by acct: (id, acct, amount, fence). */
export async function ledgerTable(pool: Pool, prefix: string): Promise<string> {
  const t = unique(prefix);
  await pool.query(`CREATE TABLE ${t} (id bigserial PRIMARY KEY, acct text NOT NULL, amount int NOT NULL, fence fencing.fence)`);
  await pool.query(`SELECT fencing.protect('${t}', key_columns => '{acct}')`);
  return t;
}

/** A table protected in row scope (strict) with one row, id 'r'. */
/**
 * Does the DDL guard (SF005) watch the table?  The edition for managed
 * PostgreSQL installed by a role that may not create event triggers has
 * none and says so in fencing.protected_tables.ddl_guarded
 * (managed/README.md, "the DDL guard (SF005)"); the C edition has no such
 * column: always guarded.
 */
export async function ddlGuarded(pool: Pool, table: string): Promise<boolean> {
  const { rows } = await pool.query(
    "SELECT coalesce((to_jsonb(p) ->> 'ddl_guarded')::boolean, true) AS g FROM fencing.protected_tables p WHERE p.relid = $1::text::regclass",
    [table]);
  return rows[0].g === true;
}

export async function protectedTable(pool: Pool, prefix: string, protectArgs = ''): Promise<string> {
  const t = unique(prefix);
  await pool.query(`CREATE TABLE ${t} (id text PRIMARY KEY, n int NOT NULL DEFAULT 0, fence fencing.fence)`);
  await pool.query(`INSERT INTO ${t} (id) VALUES ('r')`);
  await pool.query(`SELECT fencing.protect('${t}'${protectArgs})`);
  return t;
}

/**
 * A worker: build/test/worker.js in a process of its own, holding a lock
 * of a source and writing on command (one line in, one line out).
 */
export class Worker {
  readonly proc: ChildProcess;
  private readonly replies: string[] = [];
  private readonly waiting: ((line: string | null) => void)[] = [];
  private ended = false;
  stderr = '';

  constructor(config: Record<string, unknown>) {
    this.proc = spawn(process.execPath, [path.join(__dirname, 'worker.js'), JSON.stringify(config)], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: process.env,
    });
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      const w = this.waiting.shift();
      if (w) w(line); else this.replies.push(line);
    });
    this.proc.stderr!.on('data', (d) => { this.stderr += d; });
    this.proc.on('exit', () => {
      this.ended = true;
      for (const w of this.waiting.splice(0)) w(null);
    });
  }

  /** Sends a command, resolves with the worker's answer. */
  call(line: string, timeoutMs = 60000): Promise<string> {
    this.proc.stdin!.write(line + '\n');
    return this.next(timeoutMs);
  }

  private next(timeoutMs: number): Promise<string> {
    const r = this.replies.shift();
    if (r !== undefined) return Promise.resolve(r);
    if (this.ended) return Promise.reject(new Error(`worker ended: ${this.stderr}`));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker said nothing in ${timeoutMs} ms: ${this.stderr}`)), timeoutMs);
      this.waiting.push((line) => {
        clearTimeout(timer);
        if (line === null) reject(new Error(`worker ended: ${this.stderr}`)); else resolve(line);
      });
    });
  }

  /** SIGSTOP: frozen, holding its lock as far as it knows. */
  freeze(): void {
    this.proc.kill('SIGSTOP');
  }

  thaw(): void {
    this.proc.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    if (this.ended) return;
    this.proc.kill('SIGCONT');
    const gone = new Promise((r) => this.proc.once('exit', r));
    this.proc.stdin!.end('quit\n');
    const timer = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(timer);
  }
}

/** Warnings the process emits while fn runs (process.emitWarning). */
export async function collectWarnings<T>(fn: () => Promise<T>): Promise<{ result: T; warnings: Error[] }> {
  const warnings: Error[] = [];
  const on = (w: Error) => warnings.push(w);
  process.on('warning', on);
  try {
    const result = await fn();
    await new Promise((r) => setImmediate(r)); // 'warning' is emitted on the next tick
    return { result, warnings };
  } finally {
    process.off('warning', on);
  }
}

/** A timeline of a scenario, printed as the test's diagnostics. */
export class Timeline {
  private readonly t0 = Date.now();
  readonly lines: string[] = [];
  event(who: string, what: string): void {
    this.lines.push(`[${((Date.now() - this.t0) / 1000).toFixed(3)}s] ${who.padEnd(8)} ${what}`);
  }
  print(tc: { diagnostic(s: string): void }): void {
    for (const l of this.lines) tc.diagnostic(l);
  }
}
