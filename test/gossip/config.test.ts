import { describe, expect, test } from 'vitest';
import {
  applySwimSpec,
  loopbackProfile,
  pushPullIntervalFor,
  retransmitLimit,
  SwimConfigError,
  wanProfile,
} from '../../daemons/gossip-operator/swim/config.ts';

test('WAN profile carries the docs/contract.md §5 reference values', () => {
  const w = wanProfile();
  expect(w).toMatchObject({
    probeIntervalMs: 5_000,
    probeTimeoutMs: 3_000,
    indirectChecks: 3,
    suspicionTimeoutMs: 30_000,
    gossipIntervalMs: 500,
    gossipFanout: 4,
    announceIntervalMs: 60_000,
    deadMemberTtlMs: 300_000,
    suspectRetentionMs: 120_000,
  });
});

test('loopback profile divides the protocol timers only', () => {
  const l = loopbackProfile(25);
  expect(l.probeIntervalMs).toBe(200);
  expect(l.suspicionTimeoutMs).toBe(1_200);
  expect(l.maxPacketBytes).toBe(wanProfile().maxPacketBytes);
  expect(l.dnsTimeoutMs).toBe(wanProfile().dnsTimeoutMs);
});

describe('applySwimSpec', () => {
  test('spec.swim overrides the profile; gossipNodes is the indirect probe fanout', () => {
    const c = applySwimSpec('site-a', wanProfile(), { probeInterval: '2s', suspicionTimeout: '10s', gossipNodes: 5 });
    expect(c).toMatchObject({
      name: 'site-a',
      probeIntervalMs: 2_000,
      probeTimeoutMs: 1_200,
      suspicionTimeoutMs: 10_000,
      indirectChecks: 5,
    });
  });

  test('absent spec keeps the profile', () => {
    expect(applySwimSpec('a', wanProfile(), undefined)).toEqual({ ...wanProfile(), name: 'a' });
  });

  test.each([
    [
      { probeInterval: 'fast' },
      'spec.swim.probeInterval: "fast" is not a duration; use whole seconds (s) or milliseconds (ms) from 1s, such as 5s',
    ],
    [{ probeInterval: '500ms' }, 'spec.swim.probeInterval: "500ms" is below 1s'],
    [
      { suspicionTimeout: '0s' },
      'spec.swim.suspicionTimeout: "0s" is zero; use whole seconds (s) or milliseconds (ms) from 1s, such as 30s',
    ],
    [{ suspicionTimeout: '1m30s' }, 'spec.swim.suspicionTimeout: "1m30s" combines units'],
    [{ gossipNodes: 0 }, 'spec.swim.gossipNodes: 0 must be an integer from 1 to 16'],
    [{ gossipNodes: 2.5 }, 'spec.swim.gossipNodes: 2.5 must be an integer from 1 to 16'],
  ])('rejects %j with a message naming the field', (spec, message) => {
    expect(() => applySwimSpec('a', wanProfile(), spec)).toThrow(SwimConfigError);
    expect(() => applySwimSpec('a', wanProfile(), spec)).toThrow(message);
  });

  test('rejects a profile whose probe timeout is not below the interval', () => {
    expect(() => applySwimSpec('a', { ...wanProfile(), probeTimeoutMs: 5_000 }, undefined)).toThrow(
      'probeTimeoutMs: 5000 must be below probeIntervalMs (5000)',
    );
    // The opening frame of a push-pull stream: room for the longest header, never more than a packet (so authentication
    // comes before any larger buffer).
    expect(() => applySwimSpec('a', { ...wanProfile(), maxOpeningBytes: 512 }, undefined)).toThrow(
      'maxOpeningBytes: 512 must be from 768 to maxPacketBytes (1400)',
    );
    expect(() => applySwimSpec('a', { ...wanProfile(), maxOpeningBytes: 4_096 }, undefined)).toThrow(
      'maxOpeningBytes: 4096 must be from 768 to maxPacketBytes (1400)',
    );
    expect(() => applySwimSpec('a', { ...wanProfile(), maxPendingStreams: 0 }, undefined)).toThrow(
      'maxPendingStreams: 0 must be a positive number',
    );
  });
});

// memberlist's mult * ceil(log10(N + 1)) where it is at least the floor ceil(ln(N + 1)) + 7 (a member missing every
// copy of a broadcast has odds of about N * e^-limit).
test.each([
  { mult: 4, n: 1, want: 8 },
  { mult: 4, n: 8, want: 10 },
  { mult: 4, n: 64, want: 12 },
  { mult: 4, n: 100, want: 12 },
  { mult: 4, n: 300, want: 13 },
  { mult: 4, n: 1000, want: 16 },
  { mult: 3, n: 1000, want: 14 },
  { mult: 10, n: 9, want: 10 },
])('retransmit limit mult=$mult N=$n -> $want (grows with log N)', ({ mult, n, want }) => {
  expect(retransmitLimit(mult, n)).toBe(want);
});

test.each([
  { n: 8, want: 30_000 },
  { n: 32, want: 30_000 },
  { n: 33, want: 60_000 },
  { n: 64, want: 60_000 },
  { n: 65, want: 90_000 },
])('push-pull interval for N=$n -> $want', ({ n, want }) => {
  expect(pushPullIntervalFor(30_000, n)).toBe(want);
});
