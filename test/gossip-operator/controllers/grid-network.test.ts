import { describe, expect, it } from 'vitest';
import {
  distributionVerdict,
  gridIdFor,
  refreshIntervalMs,
} from '../../../daemons/gossip-operator/controllers/grid-network.ts';
import { TerminalError } from '../../../daemons/gossip-operator/manager/manager.ts';
import { boundedMessage, mergeConditions } from '../../../daemons/gossip-operator/controllers/status.ts';
import { readyCondition } from '../../../daemons/gossip-operator/controllers/inference-provider.ts';

describe('metricsRefreshInterval', () => {
  it('defaults to 300 s, or 60 s with TLS metric credentials', () => {
    expect(refreshIntervalMs(undefined, false)).toBe(300_000);
    expect(refreshIntervalMs(undefined, true)).toBe(60_000);
  });
  it('accepts seconds and >= 1000 ms, capped at 60 s with TLS metrics', () => {
    expect(refreshIntervalMs('10s', false)).toBe(10_000);
    expect(refreshIntervalMs('1500ms', false)).toBe(1_500);
    expect(refreshIntervalMs('600s', false)).toBe(600_000);
    expect(refreshIntervalMs('600s', true)).toBe(60_000);
  });
  it('fails the reconcile terminally on malformed data that bypassed admission', () => {
    for (const bad of ['0s', '500ms', '1m', '', '10', '-1s'])
      expect(() => refreshIntervalMs(bad, false)).toThrow(TerminalError);
  });
});

describe('gridId (seed 001: "auto-generated on first join")', () => {
  const generate = () => 'grid-generated';
  it.each([
    ['nothing set', {}, undefined, 'grid-generated'],
    ['the CRD defaults: status and spec ""', { gridId: '' }, { gridId: '' }, 'grid-generated'],
    ['declared in spec, status defaulted to ""', { gridId: 'grid-declared' }, { gridId: '' }, 'grid-declared'],
    ['negotiated in status', { gridId: 'grid-declared' }, { gridId: 'grid-negotiated' }, 'grid-negotiated'],
  ] as const)('%s -> %s', (_label, spec, status, expected) => {
    expect(gridIdFor({ spec, ...(status === undefined ? {} : { status }) }, generate)).toBe(expected);
  });

  it('generates grid-<12 hex> by default, a different one each time', () => {
    const a = gridIdFor({ spec: {}, status: { gridId: '' } });
    expect(a).toMatch(/^grid-[0-9a-f]{12}$/);
    expect(gridIdFor({ spec: {} })).not.toBe(a);
  });
});

describe('status helpers', () => {
  it('bounds messages to 512 bytes, one line, secrets masked', () => {
    const long = boundedMessage(`Authorization: Bearer abc.def\n${'x'.repeat(2_000)}`);
    expect(Buffer.byteLength(long)).toBeLessThanOrEqual(512);
    expect(long).not.toContain('abc.def');
    expect(long).not.toContain('\n');
  });
  it('keeps lastTransitionTime while a condition status holds', () => {
    const first = mergeConditions(
      undefined,
      [{ type: 'Ready', status: 'True', reason: 'A', message: 'a' }],
      Date.parse('2026-01-01T00:00:00Z'),
    );
    const same = mergeConditions(
      first,
      [{ type: 'Ready', status: 'True', reason: 'B', message: 'b' }],
      Date.parse('2026-01-01T00:05:00Z'),
    );
    expect(same[0]).toMatchObject({ reason: 'B', lastTransitionTime: '2026-01-01T00:00:00Z' });
    const flipped = mergeConditions(
      same,
      [{ type: 'Ready', status: 'False', reason: 'C', message: 'c' }],
      Date.parse('2026-01-01T00:06:00Z'),
    );
    expect(flipped[0]?.lastTransitionTime).toBe('2026-01-01T00:06:00Z');
  });
});

describe('InferenceProvider Ready condition', () => {
  const NONE = { signals: [], configured: [] };
  it('follows the signals loop: fail-closed TLS metrics are not ready, plaintext failures score neutral', () => {
    expect(readyCondition('Available', false, undefined)).toMatchObject({
      status: 'True',
      reason: 'MetricsNotConfigured',
    });
    expect(readyCondition('Available', true, undefined)).toMatchObject({ status: 'Unknown', reason: 'AwaitingScrape' });
    expect(
      readyCondition('Available', true, {
        result: 'success',
        sample: undefined,
        stale: false,
        failedClosed: false,
        ...NONE,
      }),
    ).toMatchObject({ status: 'True', reason: 'MetricsScraped' });
    expect(
      readyCondition('Available', true, {
        result: 'tls',
        sample: undefined,
        stale: false,
        failedClosed: true,
        ...NONE,
      }),
    ).toMatchObject({ status: 'False', reason: 'MetricsUnavailable' });
    expect(
      readyCondition('Available', true, {
        result: 'timeout',
        sample: undefined,
        stale: true,
        failedClosed: false,
        ...NONE,
      }),
    ).toMatchObject({ status: 'True', reason: 'MetricsStale' });
    expect(
      readyCondition('Available', true, {
        result: 'unreachable',
        sample: undefined,
        stale: false,
        failedClosed: false,
        ...NONE,
      }),
    ).toMatchObject({ status: 'True', reason: 'MetricsNeutral' });
    expect(
      readyCondition('Unavailable', true, {
        result: 'success',
        sample: undefined,
        stale: false,
        failedClosed: false,
        ...NONE,
      }),
    ).toMatchObject({ status: 'False', reason: 'ProviderUnavailable' });
  });

  it('names the signals a scrape returned and the configured ones the page lacked', () => {
    const signals = [
      {
        signal: 'queueDepth' as const,
        engine: 'vllm' as const,
        metrics: ['vllm:num_requests_waiting', 'vllm:num_requests_running'],
      },
    ];
    const state = {
      result: 'success' as const,
      sample: undefined,
      stale: false,
      failedClosed: false,
      signals,
      configured: ['queueDepth', 'kvCacheUtilization'],
    };
    expect(readyCondition('Available', true, state)).toMatchObject({
      reason: 'MetricsScraped',
      message: 'the last scrape returned queueDepth; missing kvCacheUtilization',
    });
    expect(readyCondition('Available', true, { ...state, configured: ['queueDepth'] }).message).toBe(
      'the last scrape returned queueDepth',
    );
  });
});

describe('GridNetwork Ready from what the reconcile distributed', () => {
  const overlay = (gatewayName: string, phase: 'Distributed' | 'Retained', reason = '') => ({
    gatewayName,
    namespace: 'ns',
    phase,
    reason,
  });
  const serving = (gatewayName: string, phase: 'Distributed' | 'Retained' | 'Error' | 'Disabled', reason = '') => ({
    gatewayName,
    namespace: 'ns',
    phase,
    reason,
  });
  it.each([
    [
      'everything distributed',
      [overlay('a', 'Distributed')],
      [serving('a', 'Distributed')],
      { ready: true, reason: 'OverlaysDistributed', message: '1 gateway overlays distributed, 1 serving configs' },
    ],
    [
      'no served gateway',
      [overlay('a', 'Distributed')],
      [],
      { ready: true, reason: 'OverlaysDistributed', message: '1 gateway overlays distributed' },
    ],
    [
      'a serving config not applied',
      [overlay('a', 'Distributed'), overlay('b', 'Distributed')],
      [serving('a', 'Distributed'), serving('b', 'Retained', 'ApplyFailed')],
      {
        ready: false,
        reason: 'ServingConfigNotDistributed',
        message: '1 of 2 gateway serving configs not distributed: ns/b ApplyFailed',
      },
    ],
    [
      'a serving config never distributed',
      [overlay('a', 'Distributed')],
      [serving('a', 'Error', 'ConsumerWouldReject')],
      { ready: false, reason: 'ServingConfigNotDistributed' },
    ],
    [
      'an overlay failure is named first',
      [overlay('a', 'Retained', 'ApplyFailed')],
      [serving('a', 'Retained', 'ApplyFailed')],
      {
        ready: false,
        reason: 'OverlayNotDistributed',
        message: '1 of 1 gateway overlays not distributed: ns/a ApplyFailed',
      },
    ],
    [
      "a stopped gateway's undeleted ConfigMap (Disabled) leaves Ready alone",
      [overlay('a', 'Distributed')],
      [serving('old', 'Disabled', 'DeleteFailed')],
      { ready: true, message: '1 gateway overlays distributed' },
    ],
  ] as const)('%s', (_label, overlays, servings, expected) => {
    expect(distributionVerdict(overlays, servings, new Map())).toMatchObject(expected);
  });
  it('an overlay held back for credential attestation is a wait, not a failure', () => {
    expect(
      distributionVerdict([overlay('a', 'Retained', 'ProjectedCredentialsNotAttested')], [], new Map([['ns/a', {}]])),
    ).toMatchObject({ ready: true });
  });
});
