// Several statements in one round trip, through node-postgres's own
// extension point for queries (a Submittable, as pg-cursor and
// pg-query-stream are): each statement is sent as Parse, Bind, Execute with
// its values bound as parameters (no Describe: the caller knows its
// columns), and one Sync ends them all,
// the messages made by node-postgres's own serializer (pg-protocol) and
// written at once (one write: a corked socket's writev of thirteen small
// buffers cost more, measured).  The server runs them in order and, at the
// first error, skips the rest up to the Sync.  Rows come back as text (or
// null), by position.

import type { ClientBase, Connection, Submittable } from 'pg';
import { serialize } from 'pg-protocol';

export interface Statement {
  text: string;
  values?: readonly (string | null)[];
}

/** A row: its columns' text (or null), in the statement's order. */
export type Row = readonly (string | null)[];

/** The rows of each statement, in order; `failedAt` the statement that failed. */
export interface PipelineResult {
  rows: Row[][];
}

/** An error of one statement of a pipeline: which one, and the server's error. */
export class PipelineError extends Error {
  constructor(readonly index: number, readonly error: unknown) {
    super((error as Error)?.message ?? String(error));
  }
}

const SYNC = serialize.sync();
const EXECUTE = serialize.execute({ portal: '' });
// the library's statements are a handful of constant texts: their messages are made once
const parsed = new Map<string, Buffer>();
const constant = new Map<string, Buffer>();

function parseMessage(text: string): Buffer {
  let b = parsed.get(text);
  if (!b) {
    b = serialize.parse({ text, name: '', types: [] });
    if (parsed.size < 64) parsed.set(text, b);
  }
  return b;
}

/** Parse, Bind (no values), Execute of text. */
function constantStatement(text: string): Buffer {
  let b = constant.get(text);
  if (!b) {
    b = Buffer.concat([parseMessage(text), serialize.bind({ portal: '', statement: '', values: [] }), EXECUTE]);
    if (constant.size < 64) constant.set(text, b);
  }
  return b;
}

class Pipeline implements Submittable {
  private readonly results: Row[][] = [];
  private done = false;
  readonly promise: Promise<PipelineResult>;
  private resolve!: (r: PipelineResult) => void;
  private reject!: (e: unknown) => void;

  constructor(private readonly statements: readonly Statement[]) {
    this.promise = new Promise((res, rej) => { this.resolve = res; this.reject = rej; });
  }

  submit(connection: Connection): void {
    const parts: Buffer[] = [];
    for (const s of this.statements) {
      if (s.values === undefined || s.values.length === 0) {
        parts.push(constantStatement(s.text));
      } else {
        parts.push(parseMessage(s.text), serialize.bind({ portal: '', statement: '', values: [...s.values] }), EXECUTE);
      }
    }
    parts.push(SYNC);
    const stream = connection.stream as { writable?: boolean; write(b: Buffer): boolean };
    // as node-postgres sends (a socket that is gone fails the query with its error)
    if (stream.writable !== false) stream.write(Buffer.concat(parts));
  }

  // node-postgres calls these as the server answers
  handleRowDescription(): void {}

  handleDataRow(msg: { fields: (string | null)[] }): void {
    this.current().push(msg.fields);
  }

  handleCommandComplete(): void {
    this.current();
    this.results.push([]);
  }

  handleEmptyQuery(): void {
    this.handleCommandComplete();
  }

  handlePortalSuspended(): void {}

  handleError(err: unknown): void {
    if (this.done) return;
    this.done = true;
    this.reject(new PipelineError(this.results.length === 0 ? 0 : this.results.length - 1, err));
  }

  handleReadyForQuery(): void {
    if (this.done) return;
    this.done = true;
    this.results.pop(); // the empty slot after the last statement
    this.resolve({ rows: this.results });
  }

  handleCopyInResponse(connection: Connection & { sendCopyFail?: (m: string) => void }): void {
    connection.sendCopyFail?.('COPY is not supported in a pipeline');
  }

  handleCopyData(): void {}

  private current(): Row[] {
    if (this.results.length === 0) this.results.push([]);
    return this.results[this.results.length - 1];
  }
}

/** Runs statements in one round trip on client; PipelineError names the one that failed. */
export function pipeline(client: ClientBase, statements: readonly Statement[]): Promise<PipelineResult> {
  const p = new Pipeline(statements);
  client.query(p);
  return p.promise;
}
