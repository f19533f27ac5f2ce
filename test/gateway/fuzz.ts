// Shared pieces of the fuzz suites: a seeded random source (the seed is printed and FUZZ_SEED replays a run), a
// few pickers, and the gateway's own view of its health read from its admin /metrics (RSS, open descriptors, the
// longest event-loop delay since the previous scrape), so every figure is measured in the gateway's process.
import { request } from 'undici';
import { EVENT_LOOP_SAMPLE_MS } from '../../daemons/shared/runtime-metrics.ts';

export function fuzzSeed(): number {
  const fromEnv = process.env['FUZZ_SEED'];
  return fromEnv === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(fromEnv);
}

export interface Random {
  (): number;
  int(maxExclusive: number): number;
  pick<T>(items: readonly T[]): T;
  chance(p: number): boolean;
  bytes(length: number): Buffer;
}

/** mulberry32: small, fast and reproducible from one 32-bit seed. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const random = next as Random;
  random.int = (max) => Math.floor(next() * max);
  random.pick = (items) => items[Math.floor(next() * items.length)]!;
  random.chance = (p) => next() < p;
  random.bytes = (length) => {
    const out = Buffer.alloc(length);
    for (let i = 0; i < length; i++) out[i] = Math.floor(next() * 256);
    return out;
  };
  return random;
}

export interface ProcessHealth {
  rssBytes: number;
  openFds: number;
  /**
   * Longest event-loop delay past a sample's due time since the previous scrape (reset on every collect). A stall of
   * S ms reads at least S - EVENT_LOOP_SAMPLE_MS (daemons/shared/runtime-metrics.ts): see stallReadingBound.
   */
  loopLagMaxMs: number;
}

/** Reads the gateway's process metrics from its admin port. */
export async function gatewayHealth(adminUrl: string): Promise<ProcessHealth> {
  const res = await request(`${adminUrl}/metrics`);
  const text = await res.body.text();
  const value = (name: string): number => {
    const line = text.split('\n').find((l) => l.startsWith(`${name} `));
    if (line === undefined) throw new Error(`${adminUrl}/metrics has no ${name}`);
    return Number(line.split(' ')[1]);
  };
  return {
    rssBytes: value('grid_gateway_process_resident_memory_bytes'),
    openFds: value('grid_gateway_process_open_fds'),
    loopLagMaxMs: value('grid_gateway_nodejs_eventloop_lag_max_seconds') * 1000,
  };
}

/**
 * The largest loopLagMaxMs that still proves no stall reached `stallMs`: the metric can read a stall up to one
 * sampling interval short.
 */
export const stallReadingBound = (stallMs: number): number => stallMs - EVENT_LOOP_SAMPLE_MS;

/** Scrapes every `intervalMs` until stopped; returns the longest event-loop delay seen. */
export function watchLoopLag(adminUrl: string, intervalMs = 250): { stop(): Promise<number> } {
  let worst = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      worst = Math.max(worst, (await gatewayHealth(adminUrl)).loopLagMaxMs);
      await new Promise((r) => setTimeout(r, intervalMs));
    }
    worst = Math.max(worst, (await gatewayHealth(adminUrl)).loopLagMaxMs);
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return worst;
    },
  };
}

/** Runs `count` tasks with at most `concurrency` at once. */
export async function runPool(
  count: number,
  concurrency: number,
  task: (index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

export const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1);
