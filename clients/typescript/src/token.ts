// A fencing token: a fencing.fence, the pair (epoch, counter) of 64-bit
// integers ordered epoch first; its text form is "epoch:counter".

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
 * Where tokens come from: a lock service's grant mapped onto a fence.
 * `acquire()` resolves once the lock is held, with that grant's token;
 * `release()` gives the lock up (a no-op when it is not held).
 */
export interface TokenSource {
  acquire(): Promise<Token>;
  release(): Promise<void>;
}

/** A token that never changes (tests, a token handed over by another process). */
export class StaticTokenSource implements TokenSource {
  readonly token: Token;
  constructor(token: Token | string) {
    this.token = Token.from(token);
  }
  async acquire(): Promise<Token> {
    return this.token;
  }
  async release(): Promise<void> {}
}
