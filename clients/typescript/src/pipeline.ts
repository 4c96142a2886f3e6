// Several statements in one round trip, through node-postgres's own
// extension point for queries (a Submittable, as pg-cursor and
// pg-query-stream are): each statement is sent as Parse, Bind, Describe,
// Execute with its values bound as parameters, and one Sync ends them all.
// The server runs them in order and, at the first error, skips the rest up
// to the Sync.  Rows come back as text (or null), by column name.

import type { ClientBase, Connection, Submittable } from 'pg';

export interface Statement {
  text: string;
  values?: readonly (string | null)[];
}

export type Row = Record<string, string | null>;

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

interface Field { name: string }

class Pipeline implements Submittable {
  private readonly results: Row[][] = [];
  private fields: Field[] = [];
  private done = false;
  readonly promise: Promise<PipelineResult>;
  private resolve!: (r: PipelineResult) => void;
  private reject!: (e: unknown) => void;

  constructor(private readonly statements: readonly Statement[]) {
    this.promise = new Promise((res, rej) => { this.resolve = res; this.reject = rej; });
  }

  submit(connection: Connection): void {
    const stream = connection.stream as { cork?: () => void; uncork?: () => void };
    stream.cork?.();
    try {
      for (const s of this.statements) {
        connection.parse({ text: s.text, name: '', types: [] }, true);
        connection.bind({ portal: '', statement: '', values: [...(s.values ?? [])] }, true);
        connection.describe({ type: 'P', name: '' }, true);
        connection.execute({ portal: '' }, true);
      }
      connection.sync();
    } finally {
      stream.uncork?.();
    }
  }

  // node-postgres calls these as the server answers
  handleRowDescription(msg: { fields: Field[] }): void {
    this.fields = msg.fields;
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    const row: Row = {};
    this.fields.forEach((f, i) => { row[f.name] = msg.fields[i] ?? null; });
    this.current().push(row);
  }

  handleCommandComplete(): void {
    this.current();
    this.results.push([]);
    this.fields = [];
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
