// The generation of a lock service: the token's epoch, kept in the
// database the tokens fence and raised after the service lost or rolled
// back its numbers (docs/lock-services.md).  Read once, right after the
// lock is taken, and kept for the whole grant (never re-read at write time).

import type { Pool } from 'pg';
import { classifyError } from './errors';

/** The table of generations, unless a source is given another. */
export const DEFAULT_GENERATION_TABLE = 'fencing_lock_generations';

/** Where a lock service's source finds its generation. */
export interface GenerationOptions {
  /** `service text PRIMARY KEY, generation bigint NOT NULL` (default fencing_lock_generations; may be schema-qualified) */
  generationTable?: string;
  /** the row of this service (default: the source's kind, 'etcd', 'zookeeper', 'redis') */
  service?: string;
  /** a fixed generation instead of reading the table */
  generation?: number | bigint;
}

/** "schema.table" quoted as identifiers. */
export function quoteQualified(name: string): string {
  return name.split('.').map((p) => '"' + p.replace(/"/g, '""') + '"').join('.');
}

/** SELECT generation FROM <table> WHERE service = $1; an error when the row is missing. */
export async function readGeneration(db: Pool, opts: GenerationOptions, defaultService: string): Promise<bigint> {
  if (opts.generation !== undefined) return BigInt(opts.generation);
  const table = opts.generationTable ?? DEFAULT_GENERATION_TABLE;
  const service = opts.service ?? defaultService;
  let rows;
  try {
    ({ rows } = await db.query(`SELECT generation::text AS g FROM ${quoteQualified(table)} WHERE service = $1`, [service]));
  } catch (e) {
    throw classifyError(e);
  }
  if (rows.length === 0) {
    throw new Error(`no generation for service "${service}" in ${table}: INSERT INTO ${table} VALUES ('${service}', 0)`);
  }
  return BigInt(rows[0].g);
}
