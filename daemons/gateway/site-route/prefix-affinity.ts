// Prefix affinity (reference praxis-proxy/grid docs/architecture/prefix-affinity.md): which backend cluster this
// gateway replica sent each prompt block to, and whether a request should stay on the sites holding its prompt.
// In memory, per replica, bounded; time is passed in.
import type { PrefixAffinity } from '../../../schemas/generated/gateway-config.ts';
import { BLOCK_BYTES } from './prefix-keys.ts';

export type PrefixSettings = Required<PrefixAffinity>;

export const DEFAULT_PREFIX_AFFINITY: PrefixSettings = {
  enabled: true,
  threshold: 0.8,
  exploration: 0.02,
  prefill_tokens_per_second: 10_000,
  queued_request_seconds: 2,
};

export function prefixSettings(config: PrefixAffinity | undefined): PrefixSettings {
  return { ...DEFAULT_PREFIX_AFFINITY, ...config };
}

/** "A 32-block run is always sticky, and a run under 4 blocks never is." */
export const ALWAYS_STICKY_BLOCKS = 32;
export const NEVER_STICKY_BELOW_BLOCKS = 4;
/** "Each cluster remembers 16,384 blocks. A block with no answer yet lasts 30s, and a confirmed one 10 minutes." */
export const BLOCKS_PER_CLUSTER = 16_384;
export const PENDING_TTL_MS = 30_000;
export const CONFIRMED_TTL_MS = 600_000;
/** A block is 256 bytes, about 64 tokens: "A 40-block match saves about 2,560 tokens". */
const TOKENS_PER_BLOCK = BLOCK_BYTES / 4;

interface Block {
  confirmed: boolean;
  expiresAtMs: number;
}

/** Per-cluster block memory, each cluster bounded to BLOCKS_PER_CLUSTER (least recently written goes first). */
export class PrefixMemory {
  readonly #clusters = new Map<string, Map<string, Block>>();

  #blocks(cluster: string): Map<string, Block> {
    let blocks = this.#clusters.get(cluster);
    if (blocks === undefined) {
      blocks = new Map();
      this.#clusters.set(cluster, blocks);
    }
    return blocks;
  }

  #put(blocks: Map<string, Block>, key: string, block: Block): void {
    blocks.delete(key);
    blocks.set(key, block);
    while (blocks.size > BLOCKS_PER_CLUSTER) blocks.delete(blocks.keys().next().value as string);
  }

  /** The request went to `cluster`: its blocks are pending there until the answer (a confirmed block stays confirmed). */
  sent(cluster: string, keys: readonly string[], nowMs: number): void {
    const blocks = this.#blocks(cluster);
    for (const key of keys) {
      const known = blocks.get(key);
      if (known?.confirmed && known.expiresAtMs > nowMs) continue;
      this.#put(blocks, key, { confirmed: false, expiresAtMs: nowMs + PENDING_TTL_MS });
    }
  }

  /** "A block counts toward a match only once the site answers with success". */
  confirmed(cluster: string, keys: readonly string[], nowMs: number): void {
    const blocks = this.#blocks(cluster);
    for (const key of keys) this.#put(blocks, key, { confirmed: true, expiresAtMs: nowMs + CONFIRMED_TTL_MS });
  }

  /** "the gateway drops it when the site answers 429 or 5xx". */
  dropped(cluster: string, keys: readonly string[]): void {
    const blocks = this.#clusters.get(cluster);
    if (blocks === undefined) return;
    for (const key of keys) blocks.delete(key);
  }

  /** Length of the longest confirmed, unexpired prefix of `keys` this cluster holds. */
  run(cluster: string, keys: readonly string[], nowMs: number): number {
    const blocks = this.#clusters.get(cluster);
    if (blocks === undefined) return 0;
    let run = 0;
    for (const key of keys) {
      const block = blocks.get(key);
      if (block === undefined || !block.confirmed || block.expiresAtMs <= nowMs) break;
      run++;
    }
    return run;
  }

  size(cluster: string): number {
    return this.#clusters.get(cluster)?.size ?? 0;
  }
}

export type AffinityOutcome = 'sticky' | 'no_match' | 'load_override' | 'exploration' | 'not_applicable';

export interface AffinityCandidate {
  /** Longest run of the request's blocks the site holds. */
  readonly run: number;
  /** Queued work per ready endpoint; undefined when unmeasured. */
  readonly queue: number | undefined;
}

/** What the match is worth in queued requests: the prefill it saves, priced in queue. */
export function matchWorth(runBlocks: number, settings: PrefixSettings): number {
  return (runBlocks * TOKENS_PER_BLOCK) / settings.prefill_tokens_per_second / settings.queued_request_seconds;
}

/**
 * The affinity step over the admitted candidates (two or more): which of them stay in the draw, and the outcome.
 * "A site is sticky when it holds the longest run of the request's blocks. That run must cover 80 percent of the
 * prompt or 32 blocks ... A run under 4 blocks never counts"; "The sticky set reopens when the best sticky site's
 * queue is deeper than the best other site's by more than the match is worth"; "An unmeasured sticky site gives way to
 * a measured one"; "Two percent of requests skip affinity".
 */
export function affinityStep(
  candidates: readonly AffinityCandidate[],
  totalBlocks: number | undefined,
  settings: PrefixSettings,
  random: () => number,
): { outcome: AffinityOutcome; sticky: readonly number[] } {
  if (totalBlocks === undefined) return { outcome: 'not_applicable', sticky: [] };
  if (random() < settings.exploration) return { outcome: 'exploration', sticky: [] };
  const longest = Math.max(0, ...candidates.map((c) => c.run));
  const qualifies =
    longest >= NEVER_STICKY_BELOW_BLOCKS &&
    (longest >= ALWAYS_STICKY_BLOCKS || longest >= settings.threshold * totalBlocks);
  if (!qualifies) return { outcome: 'no_match', sticky: [] };
  const sticky = candidates.map((_, i) => i).filter((i) => candidates[i]!.run === longest);
  const others = candidates.map((_, i) => i).filter((i) => candidates[i]!.run !== longest);
  const least = (indexes: readonly number[]): number | undefined => {
    let best: number | undefined;
    for (const i of indexes) {
      const q = candidates[i]!.queue;
      if (q === undefined) continue;
      if (best === undefined || q < best) best = q;
    }
    return best;
  };
  const stickyQueue = least(sticky);
  const otherQueue = least(others);
  if (otherQueue !== undefined) {
    if (stickyQueue === undefined) return { outcome: 'load_override', sticky: [] };
    if (stickyQueue - otherQueue > matchWorth(longest, settings)) return { outcome: 'load_override', sticky: [] };
  }
  return { outcome: 'sticky', sticky };
}
