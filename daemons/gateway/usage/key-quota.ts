// Per caller key request and token counts in fixed one-minute windows (the window starts at a key's first request
// after the previous one ended), and the x-ratelimit-* headers OpenAI sends. Tokens are counted when an answer
// ends (usage_meter), so a key may overshoot its token limit by the answers in flight; the next request then waits.
// Pure: the clock is injected.

export const WINDOW_MS = 60_000;

interface Window {
  startMs: number;
  requests: number;
  tokens: number;
}

export interface QuotaLimits {
  readonly requestsPerMinute?: number;
  readonly tokensPerMinute?: number;
}

export type QuotaVerdict =
  | { readonly ok: true; readonly headers: Record<string, string> }
  | {
      readonly ok: false;
      readonly kind: 'requests' | 'tokens';
      readonly retryAfterSeconds: number;
      readonly headers: Record<string, string>;
    };

/** OpenAI's reset duration format: "1s", "6m0s", "250ms". */
export function resetText(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const seconds = Math.ceil(ms / 1000);
  return seconds < 60 ? `${seconds}s` : `${Math.floor(seconds / 60)}m${seconds % 60}s`;
}

export class KeyQuota {
  readonly #windows = new Map<string, Window>();
  readonly #now: () => number;
  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  #window(key: string): Window {
    const now = this.#now();
    let w = this.#windows.get(key);
    if (w === undefined || now - w.startMs >= WINDOW_MS) {
      w = { startMs: now, requests: 0, tokens: 0 };
      this.#windows.set(key, w);
    }
    return w;
  }

  /** Admits one request of `key` (counting it) or says which limit it hit. */
  admit(key: string, limits: QuotaLimits): QuotaVerdict {
    const w = this.#window(key);
    const resetMs = w.startMs + WINDOW_MS - this.#now();
    const headers: Record<string, string> = {};
    const rpm = limits.requestsPerMinute;
    const tpm = limits.tokensPerMinute;
    const tokensLeft = tpm === undefined ? undefined : Math.max(0, tpm - w.tokens);
    if (rpm !== undefined) {
      const allowed = w.requests < rpm;
      headers['x-ratelimit-limit-requests'] = String(rpm);
      headers['x-ratelimit-remaining-requests'] = String(Math.max(0, rpm - w.requests - (allowed ? 1 : 0)));
      headers['x-ratelimit-reset-requests'] = resetText(resetMs);
    }
    if (tpm !== undefined) {
      headers['x-ratelimit-limit-tokens'] = String(tpm);
      headers['x-ratelimit-remaining-tokens'] = String(tokensLeft);
      headers['x-ratelimit-reset-tokens'] = resetText(resetMs);
    }
    const retryAfterSeconds = Math.max(1, Math.ceil(resetMs / 1000));
    if (rpm !== undefined && w.requests >= rpm) return { ok: false, kind: 'requests', retryAfterSeconds, headers };
    if (tokensLeft === 0) return { ok: false, kind: 'tokens', retryAfterSeconds, headers };
    w.requests++;
    return { ok: true, headers };
  }

  /** Counts the tokens of an answer of `key` into its current window. */
  consumeTokens(key: string, tokens: number): void {
    if (tokens > 0) this.#window(key).tokens += tokens;
  }
}
