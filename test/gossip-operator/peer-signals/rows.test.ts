// Peer signal rows: ages relayed as ages, and per-row refusal ("Rejected rows are dropped ... Only
// rejected rows become unavailable for provider measurement; valid rows from the same peer remain available.")
import { describe, expect, it } from 'vitest';
import { classifyAnswer, RowAges, signalsDocument } from '../../../daemons/gossip-operator/peer-signals/rows.ts';
import { PolledSignals } from '../../../daemons/gossip-operator/peer-signals/polled-signals.ts';
import { MAX_PLAUSIBLE_AGE_MS } from '../../../schemas/signals/validate.ts';
import type { RemoteProviderRecord } from '../../../daemons/routing/model.ts';

const row = (provider: string, age: unknown, extra: Record<string, unknown> = {}) => ({
  provider,
  age_ms: age,
  generation: 1,
  signals: { healthy: true, queue_depth: 0.25 },
  ...extra,
});
const doc = (rows: unknown[], over: Record<string, unknown> = {}) => ({
  schema_version: '1.0',
  site: 'b',
  network: 'grid',
  rows,
  ...over,
});

describe('classifyAnswer', () => {
  it('refuses a negative or implausible age as skew and keeps the valid rows of the same peer', () => {
    const result = classifyAnswer(
      doc([
        row('p1', 1500),
        row('p2', -5),
        row('p3', MAX_PLAUSIBLE_AGE_MS + 1),
        row('p4', 1_764_000_000_000),
        row('p5', 0),
        row('p6', MAX_PLAUSIBLE_AGE_MS),
      ]),
      'b',
      'grid',
    );
    if (!result.ok) throw new Error(result.error);
    expect(result.answer.valid.map((r) => r.provider)).toEqual(['p1', 'p5', 'p6']);
    expect(result.answer.refused.map((r) => [r.reason, r.provider])).toEqual([
      ['skew', 'p2'],
      ['skew', 'p3'],
      ['skew', 'p4'],
    ]);
    expect(result.answer.refused[0]?.detail).toContain('negative');
    expect(result.answer.refused[1]?.detail).toContain('implausible');
  });

  it.each([
    ['a fractional age', row('p', 1.5)],
    ['an age that is a string', row('p', '100')],
    ['a missing provider', { age_ms: 1, generation: 1, signals: { healthy: true } }],
    ['a queue depth below zero', row('p', 1, { signals: { healthy: true, queue_depth: -1 } })],
    ['a utilisation above 1', row('p', 1, { signals: { healthy: true, kv_cache_utilization: 1.5 } })],
    ['no healthy flag', row('p', 1, { signals: {} })],
    ['a row that is not an object', 42],
  ])('refuses %s as invalid, not skew, and keeps the others', (_name, bad) => {
    const result = classifyAnswer(doc([bad, row('ok', 10)]), 'b', 'grid');
    if (!result.ok) throw new Error(result.error);
    expect(result.answer.refused.map((r) => r.reason)).toEqual(['invalid']);
    expect(result.answer.valid.map((r) => r.provider)).toEqual(['ok']);
  });

  it('keeps the first of two rows for one provider', () => {
    const result = classifyAnswer(doc([row('p', 10), row('p', 20)]), 'b', 'grid');
    if (!result.ok) throw new Error(result.error);
    expect(result.answer.valid.map((r) => r.age_ms)).toEqual([10]);
    expect(result.answer.refused.map((r) => r.reason)).toEqual(['invalid']);
  });

  it.each([
    ['not an object', 'hello', 'document'],
    ['no rows', { schema_version: '1.0', site: 'b', network: 'grid' }, 'rows'],
    ['an unknown major version', doc([], { schema_version: '2.0' }), 'schema_version'],
    ['another site', doc([], { site: 'c' }), 'names site "c"'],
    ['another network', doc([], { network: 'other' }), 'network "other"'],
    ['too many rows', doc(Array.from({ length: 1025 }, (_, i) => row(`p${i}`, 1))), 'rows'],
  ])('an answer that is %s is not an answer', (_name, body, message) => {
    const result = classifyAnswer(body, 'b', 'grid');
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error).toContain(message);
  });
});

describe('RowAges', () => {
  const sample = (observedAtMs: number, generation = 1) => ({
    generation,
    observedAtMs,
    healthy: true,
    queueDepth: 0.5,
  });

  it('a relayed age survives a wall-clock step: only the monotonic clock advances it', () => {
    const ages = new RowAges();
    expect(ages.rows([{ provider: 'p', sample: sample(10_000) }], 12_000, 500)[0]?.age_ms).toBe(2_000);
    // The wall clock steps back an hour, then forward a day; the monotonic clock moved 3 s.
    expect(ages.rows([{ provider: 'p', sample: sample(10_000) }], 12_000 - 3_600_000, 3_500)[0]?.age_ms).toBe(5_000);
    expect(ages.rows([{ provider: 'p', sample: sample(10_000) }], 12_000 + 86_400_000, 3_500)[0]?.age_ms).toBe(5_000);
  });

  it('relays the EPP pool series as is, and leaves a missing one out (never zero)', () => {
    const ages = new RowAges();
    const [withPool, without] = ages.rows(
      [
        {
          provider: 'p',
          sample: {
            ...sample(10_000),
            runningPerEndpoint: 3.5,
            waitingPerEndpoint: 0,
            flowControlHeld: 2,
            readyEndpoints: 4,
          },
        },
        { provider: 'q', sample: { ...sample(10_000), runningPerEndpoint: Number.NaN } },
      ],
      10_000,
      0,
    );
    expect(withPool?.signals).toEqual({
      healthy: true,
      queue_depth: 0.5,
      running_per_endpoint: 3.5,
      waiting_per_endpoint: 0,
      flow_control_held: 2,
      ready_endpoints: 4,
    });
    expect(without?.signals).toEqual({ healthy: true, queue_depth: 0.5 });
    // What the operator serves is what a receiver accepts.
    const answer = classifyAnswer(signalsDocument('b', 'grid', [withPool!, without!]), 'b', 'grid');
    expect(answer.ok && answer.answer.valid.length).toBe(2);
  });

  it('a new sample starts a new age', () => {
    const ages = new RowAges();
    ages.rows([{ provider: 'p', sample: sample(10_000, 1) }], 12_000, 0);
    expect(ages.rows([{ provider: 'p', sample: sample(20_000, 2) }], 20_100, 9_000)[0]?.age_ms).toBe(100);
  });

  it('serves a future-stamped sample with its negative age instead of hiding the stamping error', () => {
    const ages = new RowAges();
    const rows = ages.rows([{ provider: 'p', sample: sample(70_000) }], 10_000, 0);
    expect(rows[0]?.age_ms).toBe(-60_000);
    const result = classifyAnswer(signalsDocument('b', 'grid', rows), 'b', 'grid');
    expect(result.ok && result.answer.refused[0]?.reason).toBe('skew');
  });

  it('serves clamped, schema-valid values', () => {
    const rows = new RowAges().rows(
      [
        {
          provider: 'p',
          sample: { generation: 3, observedAtMs: 0, healthy: false, kvCacheUtilization: 1.2, errorRate: Number.NaN },
        },
      ],
      5,
      0,
    );
    expect(rows[0]).toEqual({
      provider: 'p',
      age_ms: 5,
      generation: 3,
      signals: { healthy: false, kv_cache_utilization: 1 },
    });
  });
});

describe('PolledSignals', () => {
  const record: RemoteProviderRecord = {
    network: 'grid',
    site: 'b',
    provider: 'p1',
    routingCluster: 'p1',
    backendKind: 'local',
    phase: 'Available',
    models: ['m'],
    metrics: { generation: 9, observedAtMs: 1, healthy: true, queueDepth: 0.9 },
    memberState: 'alive',
    memberAgeSeconds: 0,
  };

  it('gives routing the polled values, no measurement for a refused row, and the gossiped record otherwise', () => {
    const polled = new PolledSignals();
    expect(
      polled.replaceSite(
        'b',
        [{ provider: 'p1', age_ms: 1_000, generation: 4, signals: { healthy: true, queue_depth: 0.2 } }],
        ['p2'],
        50_000,
      ),
    ).toBe(true);
    expect(polled.apply(record).metrics).toEqual({
      generation: 4,
      observedAtMs: 49_000,
      healthy: true,
      queueDepth: 0.2,
    });
    expect(polled.apply({ ...record, provider: 'p2' }).metrics).toBeUndefined();
    expect(polled.apply({ ...record, provider: 'p3' }).metrics).toEqual(record.metrics);
    const other = { ...record, site: 'c' };
    expect(polled.apply(other)).toBe(other);
  });

  it('reports a change only when values change, not when only the age moved', () => {
    const polled = new PolledSignals();
    const rows = (q: number, age: number) => [
      { provider: 'p1', age_ms: age, generation: 4, signals: { healthy: true, queue_depth: q } },
    ];
    polled.replaceSite('b', rows(0.2, 100), [], 1_000);
    expect(polled.replaceSite('b', rows(0.2, 900), [], 2_000)).toBe(false);
    expect(polled.replaceSite('b', rows(0.3, 900), [], 2_000)).toBe(true);
    expect(polled.dropSite('b')).toBe(true);
    expect(polled.apply(record)).toBe(record);
  });
});
