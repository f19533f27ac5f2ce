// The engine preset table (schemas/engines/engine-presets.json): valid against its own schema, one entry per engine
// the CRD accepts, every row citing where the engine defines its metrics, and the preset table of
// docs/engine-presets.md naming the same series. A broken table is refused with the place that is wrong.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import table from '../../schemas/engines/engine-presets.json' with { type: 'json' };
import { checkEnginePresets, ENGINE_PRESETS, METRICS_ENGINES, selectorText } from '../../schemas/engines/presets.ts';
import type { SeriesSelector, SignalReading } from '../../schemas/generated/engine-presets.ts';
import { REPO_ROOT } from '../fixtures-path.ts';

const copy = (): typeof table => JSON.parse(JSON.stringify(table));

function selectors(reading: SignalReading): SeriesSelector[] {
  switch (reading.kind) {
    case 'fraction':
      return [reading.value];
    case 'waitingShare':
      return [reading.waiting, reading.running];
    default:
      return [reading.numerator, reading.denominator];
  }
}

describe('engine preset table', () => {
  it('is valid and has exactly the engines of the CRD enum metricsConfig.engine', () => {
    expect(checkEnginePresets(table)).toEqual([]);
    expect(METRICS_ENGINES).toEqual(['vllm', 'sglang', 'tgi', 'triton-trtllm']);
    expect(Object.keys(ENGINE_PRESETS).sort()).toEqual([...METRICS_ENGINES].sort());
  });

  it('cites a source for every engine and every signal row', () => {
    for (const [engine, preset] of Object.entries(ENGINE_PRESETS)) {
      expect(preset.source, engine).not.toBe('');
      for (const [signal, row] of Object.entries(preset.signals))
        expect(row?.source, `${engine}.${signal}`).toMatch(/\S{8,}/);
    }
  });

  it('configures the signals each engine exports, and no KV-cache or prefix signal where the engine has none', () => {
    expect(
      Object.fromEntries(Object.entries(ENGINE_PRESETS).map(([engine, p]) => [engine, Object.keys(p.signals)])),
    ).toEqual({
      vllm: ['queueDepth', 'kvCacheUtilization', 'prefixCacheHitRatio'],
      sglang: ['queueDepth', 'kvCacheUtilization', 'prefixCacheHitRatio'],
      tgi: ['queueDepth'],
      'triton-trtllm': ['queueDepth', 'kvCacheUtilization'],
    });
  });

  it.each([
    [
      'an unknown reading kind',
      (t: ReturnType<typeof copy>) =>
        ((t.engines.vllm.signals.queueDepth.readings[0] as { kind: string }).kind = 'ratio'),
      '/engines/vllm/signals/queueDepth/readings/0',
    ],
    [
      'a metric name Prometheus cannot have',
      (t: ReturnType<typeof copy>) => (t.engines.tgi.signals.queueDepth.readings[0]!.waiting!.metric = 'tgi queue'),
      '/engines/tgi/signals/queueDepth/readings/0',
    ],
    [
      'a signal row without its source',
      (t: ReturnType<typeof copy>) =>
        delete (t.engines.sglang.signals.kvCacheUtilization as { source?: string }).source,
      '/engines/sglang/signals/kvCacheUtilization',
    ],
    [
      'a signal scoring does not know',
      (t: ReturnType<typeof copy>) =>
        ((t.engines.tgi.signals as Record<string, unknown>)['batchSize'] = t.engines.tgi.signals.queueDepth),
      '/engines/tgi/signals',
    ],
  ])('refuses %s, naming where', (_what, breakIt, where) => {
    const broken = copy();
    breakIt(broken);
    const problems = checkEnginePresets(broken);
    expect(problems.length).toBeGreaterThan(0);
    expect(problems.some((p) => p.startsWith(`engine-presets.json${where}`))).toBe(true);
  });

  it('refuses an engine the CRD does not accept, and a missing one', () => {
    const extra = copy() as unknown as { engines: Record<string, unknown> };
    extra.engines['llamacpp'] = extra.engines['tgi'];
    expect(checkEnginePresets(extra)).toEqual([
      expect.stringContaining("differ from the CRD's metricsConfig.engine enum"),
    ]);
    const missing = copy() as unknown as { engines: Record<string, unknown> };
    delete missing.engines['sglang'];
    expect(checkEnginePresets(missing)[0]).toContain('engines tgi, triton-trtllm, vllm differ');
  });

  it('is what the docs/engine-presets.md table lists (every series of every reading)', () => {
    const page = readFileSync(join(REPO_ROOT, 'docs', 'engine-presets.md'), 'utf8');
    const section = page.slice(page.indexOf('| engine |'));
    for (const preset of Object.values(ENGINE_PRESETS)) {
      for (const row of Object.values(preset.signals)) {
        for (const reading of row?.readings ?? [])
          for (const s of selectors(reading)) expect(section).toContain(selectorText(s));
      }
    }
  });
});
