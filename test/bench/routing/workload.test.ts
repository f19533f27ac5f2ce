// The routing bench's pure parts: the seeded trace every policy replays, and the arithmetic of its report.
import { describe, expect, it } from 'vitest';
import { tokenize } from '../../../daemons/sim/engine/tokenizer.ts';
import { BACKENDS } from './policies.ts';
import {
  backendCapacity,
  movedAfterMs,
  percentile,
  ratiosToRoundRobin,
  summarize,
  type WindowSummary,
} from './report.ts';
import type { RequestOutcome } from './run.ts';
import { DEFAULT_SHAPE, buildTrace, meanRequest, reusableShare, simAnswer, words } from './workload.ts';
import { seededRandom } from '../../../daemons/shared/seeded-random.ts';

const shape = { ...DEFAULT_SHAPE, rate: 20, durationMs: 60_000, seed: 7 };

describe('buildTrace', () => {
  it('is the same trace for the same seed, and another for another seed', () => {
    expect(buildTrace(shape)).toEqual(buildTrace(shape));
    expect(buildTrace({ ...shape, seed: 8 })[0]!.messages).not.toEqual(buildTrace(shape)[0]!.messages);
  });

  it('arrives as a Poisson process at the rate: the count within a few standard deviations, gaps with mean and sd 1/rate', () => {
    const trace = buildTrace({ ...shape, durationMs: 300_000 });
    const expected = 20 * 300;
    expect(Math.abs(trace.length - expected)).toBeLessThan(4 * Math.sqrt(expected));
    const gaps = trace.slice(1).map((r, i) => r.atMs - trace[i]!.atMs);
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    const sd = Math.sqrt(gaps.reduce((a, b) => a + (b - mean) ** 2, 0) / gaps.length);
    expect(mean).toBeGreaterThan(45);
    expect(mean).toBeLessThan(55);
    // Exponential: the standard deviation equals the mean (a paced trace would have ~0).
    expect(sd / mean).toBeGreaterThan(0.9);
    expect(sd / mean).toBeLessThan(1.1);
    expect(trace.every((r, i) => i === 0 || r.atMs >= trace[i - 1]!.atMs)).toBe(true);
    expect(trace.at(-1)!.atMs).toBeLessThan(300_000);
  });

  it('mixes chat turns with single long and short prompts in the declared shares', () => {
    const trace = buildTrace({ ...shape, durationMs: 300_000 });
    const share = (kind: string) => trace.filter((r) => r.kind === kind).length / trace.length;
    expect(share('long')).toBeGreaterThan(0.08);
    expect(share('long')).toBeLessThan(0.12);
    expect(share('short')).toBeGreaterThan(0.17);
    expect(share('short')).toBeLessThan(0.23);
    const longs = trace.filter((r) => r.kind === 'long').map((r) => r.promptWords);
    const shorts = trace.filter((r) => r.kind === 'short').map((r) => r.promptWords);
    expect(Math.min(...longs)).toBeGreaterThan(Math.max(...shorts) * 10);
  });

  it("carries each chat's conversation so far: turn k is turn k-1's messages, the sim's answer, and one user message", () => {
    const trace = buildTrace(shape);
    const bySession = new Map<string, typeof trace>();
    for (const r of trace.filter((x) => x.kind === 'chat'))
      bySession.set(r.session!, [...(bySession.get(r.session!) ?? []), r]);
    let checked = 0;
    for (const turns of bySession.values()) {
      expect(turns.map((t) => t.turn)).toEqual(turns.map((_, i) => i));
      for (let k = 1; k < turns.length; k++) {
        const prev = turns[k - 1]!;
        const cur = turns[k]!;
        expect(cur.messages.slice(0, prev.messages.length)).toEqual(prev.messages);
        expect(cur.messages[prev.messages.length]).toEqual({ role: 'assistant', content: simAnswer(prev.maxTokens) });
        expect(cur.messages.at(-1)!.role).toBe('user');
        expect(cur.atMs - prev.atMs).toBeGreaterThanOrEqual(DEFAULT_SHAPE.thinkMs);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(100);
  });

  it('shares a few system prompts between many chats', () => {
    const trace = buildTrace(shape);
    const firsts = trace.filter((r) => r.kind === 'chat' && r.turn === 0);
    const systems = new Set(firsts.map((r) => r.messages[0]!.content));
    expect(systems.size).toBeLessThanOrEqual(DEFAULT_SHAPE.systemPrompts);
    expect(firsts.length).toBeGreaterThan(systems.size * 5);
  });

  it("counts prompt sizes in the sim's tokens: a word is one token, an answer of n tokens is n tokens", () => {
    const text = words(seededRandom(1), 50);
    expect(tokenize(text)).toHaveLength(50);
    expect(tokenize(simAnswer(37))).toHaveLength(37);
    for (const r of buildTrace(shape).slice(0, 200)) {
      expect(r.messages.reduce((a, m) => a + tokenize(m.content).length, 0)).toBe(r.promptWords);
      if (r.kind === 'chat') expect(tokenize(r.messages[0]!.content)).toHaveLength(r.systemWords);
    }
  });

  it('refuses a shape it cannot draw from', () => {
    expect(() => buildTrace({ ...shape, rate: 0 })).toThrow(/rate and durationMs must be positive/);
    expect(() => buildTrace({ ...shape, longShare: 0.7, shortShare: 0.5 })).toThrow(/sum to at most 1/);
  });

  it('bounds the reusable share: chats reuse most of their prompt, single prompts none', () => {
    const trace = buildTrace(shape);
    const share = reusableShare(trace);
    expect(share).toBeGreaterThan(0.3);
    expect(share).toBeLessThan(1);
    expect(reusableShare(trace.filter((r) => r.kind !== 'chat'))).toBe(0);
    const mean = meanRequest({ ...DEFAULT_SHAPE, seed: 7 });
    expect(mean.unsharedPromptTokens).toBeLessThan(mean.promptTokens);
  });
});

describe('report arithmetic', () => {
  it('percentile by nearest rank', () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentile(values, 50)).toBe(50);
    expect(percentile(values, 99)).toBe(99);
    expect(percentile(values, 100)).toBe(100);
    expect(percentile([], 50)).toBeNaN();
  });

  it('a backend serves fewer requests per second the slower its steps and the longer the prompts', () => {
    const fast = BACKENDS.find((b) => b.name === 'east-fast')!;
    const slow = BACKENDS.find((b) => b.name === 'east-slow')!;
    expect(backendCapacity(fast, 500, 36)).toBeGreaterThan(backendCapacity(slow, 500, 36));
    expect(backendCapacity(fast, 1000, 36)).toBeLessThan(backendCapacity(fast, 500, 36));
    // 500 tokens x 0.25 ms + 36 steps x (15 + 0.8 x 12) ms shared by 12 sequences = 125 + 73.8 ms.
    expect(backendCapacity(fast, 500, 36)).toBeCloseTo(1000 / 198.8, 3);
  });

  const outcome = (o: Partial<RequestOutcome> & Pick<RequestOutcome, 'sentAtMs'>): RequestOutcome => ({
    index: 0,
    kind: 'chat',
    stream: true,
    endedAtMs: o.sentAtMs + 100,
    status: 200,
    ok: true,
    outputTokens: 10,
    ttftMs: 50,
    e2eMs: 100,
    ...o,
  });

  it('summarizes only the requests sent after the warm-up, failures included in the count', () => {
    const outcomes = [
      outcome({ sentAtMs: 10, ttftMs: 9999 }),
      outcome({ sentAtMs: 2000, backend: 'a' }),
      outcome({ sentAtMs: 3000, ok: false, status: 502 }),
    ];
    const row = summarize(
      'p',
      0.8,
      10,
      outcomes,
      1000,
      { prefixQueries: 200, prefixHits: 50, generationTokens: 400 },
      2000,
    );
    expect(row.requests).toBe(2);
    expect(row.failed).toBe(1);
    expect(row.ttftP99).toBe(50);
    expect(row.prefixHitRate).toBe(0.25);
    expect(row.tokensPerSecond).toBe(200);
    expect(row.shares).toEqual({ a: 1 });
  });

  it('ratios are against round-robin at the same load', () => {
    const row = (policy: string, load: number, ttftP99: number): WindowSummary => ({
      policy,
      load,
      rate: 1,
      requests: 1,
      ttftP50: 1,
      ttftP99,
      e2eP50: 1,
      e2eP99: 1,
      tokensPerSecond: 10,
      prefixHitRate: 0.2,
      failed: 0,
      shares: {},
    });
    const ratios = ratiosToRoundRobin([
      row('round-robin', 0.5, 100),
      row('round-robin', 0.8, 400),
      row('grid', 0.8, 100),
      row('grid', 0.5, 100),
    ]);
    expect(ratios.find((r) => r.load === 0.8)!.ttftP99).toBe(0.25);
    expect(ratios.find((r) => r.load === 0.5)!.ttftP99).toBe(1);
  });

  it('traffic has moved after the last failure or retry since the kill', () => {
    const outcomes = [
      outcome({ sentAtMs: 900, ok: false }),
      outcome({ sentAtMs: 1500, ok: false }),
      outcome({ sentAtMs: 2500 }),
    ];
    expect(movedAfterMs(outcomes, [1800], 1000, 5000)).toBe(800);
    expect(movedAfterMs(outcomes, [], 1000, 5000)).toBe(500);
    expect(movedAfterMs([], [], 1000, 5000)).toBe(0);
  });
});
