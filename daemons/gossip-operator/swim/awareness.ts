/**
 * Lifeguard local health awareness: a score in [0, max - 1]. Missed acks and nacks and refuting an accusation
 * raise it (our own node or network is probably slow); successful probes lower it. Timeouts are multiplied by
 * (score + 1), so an overloaded node probes less aggressively instead of accusing healthy peers.
 */
export function applyAwarenessDelta(score: number, delta: number, max: number): number {
  return Math.min(max - 1, Math.max(0, score + delta));
}

export function scaleByAwareness(timeoutMs: number, score: number): number {
  return timeoutMs * (score + 1);
}

export class Awareness {
  readonly #max: number;
  #score = 0;

  constructor(max: number) {
    this.#max = max;
  }

  get score(): number {
    return this.#score;
  }

  applyDelta(delta: number): void {
    this.#score = applyAwarenessDelta(this.#score, delta, this.#max);
  }

  scale(timeoutMs: number): number {
    return scaleByAwareness(timeoutMs, this.#score);
  }
}
