import { describe, expect, it } from 'vitest';
import type { GridNetworkSpec } from '../../schemas/generated/gridnetworks.ts';
import { resolveRoutingPolicy } from '../../daemons/routing/policy.ts';

function resolve(spec: GridNetworkSpec) {
  const result = resolveRoutingPolicy('production', spec);
  if (!result.ok) throw new Error(result.error.message);
  return result.value;
}

describe('resolveRoutingPolicy', () => {
  it('applies the CRD defaults to an empty spec (geographyFirst, noMetrics, legacy admission, gossip)', () => {
    // routingPolicy "geographyFirst (default)"; scoringPolicy absent means noMetrics; "When
    // spec.admissionPolicy is omitted, admission preserves the legacy instantaneous behavior".
    expect(resolve({})).toEqual({
      routingPolicy: 'geographyFirst',
      scoringStrategy: 'noMetrics',
      signalTransport: 'gossip',
    });
  });

  it('treats admissionPolicy mode instantaneous (its default) as the legacy rule', () => {
    expect(resolve({ admissionPolicy: {} }).admission).toBeUndefined();
    expect(
      resolve({ admissionPolicy: { mode: 'instantaneous', pressure: { enterThreshold: 0.5 } } }).admission,
    ).toBeUndefined();
  });

  it('fills stabilized pressure defaults: enter 0.85, exit 0.70, failure 2, success 3, 10s, 30s (docs/contract.md §1)', () => {
    expect(resolve({ admissionPolicy: { mode: 'stabilized' } }).admission).toEqual({
      enterThreshold: 0.85,
      exitThreshold: 0.7,
      failureThreshold: 2,
      successThreshold: 3,
      minimumStateDurationSeconds: 10,
      recoveryHoldDownSeconds: 30,
      missingMetrics: 'existingOnly',
    });
  });

  it('copies every configured field', () => {
    expect(
      resolve({
        routingPolicy: 'scoreFirst',
        scoringPolicy: { strategy: 'kvCachePressure' },
        selectionPolicy: { mode: 'weightedRandom' },
        placementPolicy: { strategy: 'static' },
        staleCandidateTtlSeconds: 3600,
        signalTransport: { mode: 'poll' },
        admissionPolicy: {
          mode: 'stabilized',
          missingMetrics: 'excluded',
          pressure: {
            enterThreshold: 0.9,
            exitThreshold: 0.5,
            failureThreshold: 4,
            successThreshold: 5,
            minimumStateDuration: '15s',
            recoveryHoldDown: '120s',
          },
        },
      }),
    ).toEqual({
      routingPolicy: 'scoreFirst',
      scoringStrategy: 'kvCachePressure',
      selectionMode: 'weightedRandom',
      placementStrategy: 'static',
      staleCandidateTtlSeconds: 3600,
      signalTransport: 'poll',
      admission: {
        enterThreshold: 0.9,
        exitThreshold: 0.5,
        failureThreshold: 4,
        successThreshold: 5,
        minimumStateDurationSeconds: 15,
        recoveryHoldDownSeconds: 120,
        missingMetrics: 'excluded',
      },
    });
  });

  it.each([0, -1, 1.5, Number.NaN])('treats staleCandidateTtlSeconds %s as absent, never as "evict now"', (ttl) => {
    // "The controller also defensively treats an internally observed 0 as absent".
    expect(resolve({ staleCandidateTtlSeconds: ttl }).staleCandidateTtlSeconds).toBeUndefined();
  });

  it.each([
    [
      'unknown routing policy',
      { routingPolicy: 'nearest' },
      'spec.routingPolicy: "nearest" is not one of geographyFirst, scoreFirst',
    ],
    ['unknown strategy', { scoringPolicy: { strategy: 'latency' } }, 'spec.scoringPolicy.strategy'],
    ['unknown selection mode', { selectionPolicy: { mode: 'sticky' } }, 'spec.selectionPolicy.mode'],
    ['unknown transport', { signalTransport: { mode: 'carrier-pigeon' } }, 'spec.signalTransport.mode'],
    [
      'threshold above 1',
      { admissionPolicy: { mode: 'stabilized', pressure: { enterThreshold: 1.2 } } },
      'pressure.enterThreshold: 1.2 is not a number in [0, 1]',
    ],
    [
      'exit not below enter',
      { admissionPolicy: { mode: 'stabilized', pressure: { enterThreshold: 0.6, exitThreshold: 0.6 } } },
      'exitThreshold: 0.6 must be below enterThreshold 0.6',
    ],
    [
      'failure threshold 0',
      { admissionPolicy: { mode: 'stabilized', pressure: { failureThreshold: 0 } } },
      'failureThreshold: 0 is not an integer in 1..100',
    ],
    [
      'sub-second duration',
      { admissionPolicy: { mode: 'stabilized', pressure: { minimumStateDuration: '500ms' } } },
      'spec.admissionPolicy.pressure.minimumStateDuration: "500ms" is in ms, which is not accepted here; use whole seconds (s) from 1s, such as 10s',
    ],
    [
      'unknown missingMetrics',
      { admissionPolicy: { mode: 'stabilized', missingMetrics: 'ignore' } },
      'spec.admissionPolicy.missingMetrics',
    ],
  ])('refuses %s with invalid_policy naming the field', (_label, spec, message) => {
    const result = resolveRoutingPolicy('production', spec as unknown as GridNetworkSpec);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.error.code).toBe('invalid_policy');
      expect(result.error.message).toContain('GridNetwork production: ');
      expect(result.error.message).toContain(message);
    }
  });
});
