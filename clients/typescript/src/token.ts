// Tokens, scopes and the TokenSource interface every lock implements.

const MAX = (1n << 63n) - 1n;

/** A fencing token, as the server's `fencing.fence` type: `epoch:counter`. */
export class Token {
  readonly epoch: bigint;
  readonly counter: bigint;

  constructor(epoch: bigint | number, counter: bigint | number) {
    const e = BigInt(epoch);
    const c = BigInt(counter);
    if (e < 0n || e > MAX || c < 0n || c > MAX) {
      throw new RangeError(`fence parts must be between 0 and ${MAX}: ${e}:${c}`);
    }
    this.epoch = e;
    this.counter = c;
  }

  /** Parses "E:C" (or a bare "C", epoch 0), as the server's fence input does. */
  static parse(text: string): Token {
    const m = /^\s*(?:(\d+)\s*:\s*)?(\d+)\s*$/.exec(text);
    if (!m) throw new SyntaxError(`invalid fence token: "${text}"`);
    return new Token(m[1] === undefined ? 0n : BigInt(m[1]), BigInt(m[2]));
  }

  /** A Token from a Token or its text. */
  static from(t: Token | string): Token {
    return t instanceof Token ? t : Token.parse(t);
  }

  /** -1, 0 or 1 as this token is older than, equal to or newer than `other`. */
  compare(other: Token | string): number {
    const o = Token.from(other);
    if (this.epoch !== o.epoch) return this.epoch < o.epoch ? -1 : 1;
    if (this.counter !== o.counter) return this.counter < o.counter ? -1 : 1;
    return 0;
  }

  equals(other: Token | string): boolean {
    return this.compare(other) === 0;
  }

  toString(): string {
    return `${this.epoch}:${this.counter}`;
  }

  toJSON(): string {
    return this.toString();
  }
}

/**
 * A key or table scope whose fence a source raises the moment it takes
 * its lock (the first meter): `{ table: 'ledger', key: 'acct-1' }` (the key
 * values in the order of the table's key columns, as text), or
 * `{ table: 'refunds' }` for a table-scope fence.
 */
export interface Scope {
  table: string;
  key?: string | readonly string[];
}

/** How long acquire() waits, what can stop it, and the fences to raise. */
export interface AcquireOptions {
  /** give up after this many milliseconds (NotAcquiredError); default: wait until acquired or `signal` aborts */
  timeoutMs?: number;
  /** abort the wait (the promise rejects with the signal's reason) */
  signal?: AbortSignal;
  /** the scopes whose fences are raised with the grant's token right after the lock is taken */
  fences?: readonly Scope[];
}

/**
 * A lock that hands out fencing tokens.  While it is held the source
 * renews it on its own and `lost` aborts the moment it learns the lock is
 * gone; `nextToken()` gives a new token for each transaction (the
 * fenced transactions call it), which also proves the lock is still held.
 */
export interface TokenSource {
  /** One attempt: the grant's token, or null when another holder has the lock (no token). */
  tryAcquire(options?: Pick<AcquireOptions, 'fences' | 'signal'>): Promise<Token | null>;
  /** Waits for the lock (see AcquireOptions); NotAcquiredError when the timeout passes first. */
  acquire(options?: AcquireOptions): Promise<Token>;
  /** A new token of the lock still held, newer than every one before; LockLostError when it is not held. */
  nextToken(): Promise<Token>;
  /** Gives the lock up (nothing to do when it is not held). */
  release(): Promise<void>;
  /** The last token handed out for the grant held, or null. */
  readonly token: Token | null;
  /** Aborts (reason: a LockLostError) when the grant held ends: lost, or released. */
  readonly lost: AbortSignal;
  /** Is the lock held, as far as this source knows? */
  readonly held: boolean;
}

/**
 * A token you already have (handed over by another process, or a test).
 * `nextToken()` returns that same token every time: on a strict table a
 * second transaction with it is refused (TokenAlreadyUsedError); take a
 * lock's source for many transactions.
 */
export class StaticToken implements TokenSource {
  readonly token: Token;
  private readonly controller = new AbortController();

  constructor(token: Token | string) {
    this.token = Token.from(token);
  }

  get lost(): AbortSignal {
    return this.controller.signal;
  }

  get held(): boolean {
    return true;
  }

  async tryAcquire(): Promise<Token> {
    return this.token;
  }

  async acquire(): Promise<Token> {
    return this.token;
  }

  async nextToken(): Promise<Token> {
    return this.token;
  }

  async release(): Promise<void> {}
}

/** Is x a TokenSource (rather than a token or its text)? */
export function isTokenSource(x: unknown): x is TokenSource {
  return typeof x === 'object' && x !== null && !(x instanceof Token) &&
    typeof (x as TokenSource).nextToken === 'function';
}
