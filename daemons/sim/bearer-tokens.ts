// The sim's bearer token and its rotation. The provider gateway that sends the token and the sim that checks it read
// the same Secret through two kubelets (or one kubelet at two moments), each updated on its own sync: a strict swap
// would answer 401 to every request in between. So after a rotation the previous token is still accepted for a grace
// period (60 s by default, about the kubelet's sync spread), then refused. Pure: the clock is injected.
import { timingSafeEqual } from 'node:crypto';

export const DEFAULT_TOKEN_GRACE_MS = 60_000;

export interface BearerTokensOptions {
  /** How long the previous token is accepted after a rotation. @default DEFAULT_TOKEN_GRACE_MS */
  readonly graceMs?: number;
  readonly now?: () => number;
}

export class BearerTokens {
  readonly #graceMs: number;
  readonly #now: () => number;
  #current: Buffer;
  #previous: Buffer | undefined;
  #previousUntilMs = 0;

  constructor(token: string, options: BearerTokensOptions = {}) {
    if (token === '') throw new Error('sim: a non-empty bearer token is required');
    this.#current = Buffer.from(token);
    this.#graceMs = options.graceMs ?? DEFAULT_TOKEN_GRACE_MS;
    this.#now = options.now ?? Date.now;
  }

  /** Takes `next` as the token; the one it replaces is accepted for the grace period. False when `next` is the token already. */
  rotate(next: string): boolean {
    if (next === '') throw new Error('sim: a non-empty bearer token is required');
    const token = Buffer.from(next);
    if (token.equals(this.#current)) return false;
    this.#previous = this.#current;
    this.#previousUntilMs = this.#now() + this.#graceMs;
    this.#current = token;
    return true;
  }

  /** Whether an Authorization header carries the token, or the previous one within its grace period. */
  accepts(header: string | undefined): boolean {
    if (header === undefined || !header.startsWith('Bearer ')) return false;
    const presented = Buffer.from(header.slice(7));
    if (same(presented, this.#current)) return true;
    return this.#previous !== undefined && this.#now() < this.#previousUntilMs && same(presented, this.#previous);
  }
}

function same(presented: Buffer, token: Buffer): boolean {
  return presented.length === token.length && timingSafeEqual(presented, token);
}
