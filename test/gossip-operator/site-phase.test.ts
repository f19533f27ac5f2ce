import { describe, expect, it } from 'vitest';
import { type SitePhaseInput, nextSitePhase } from '../../daemons/gossip-operator/site-phase.ts';

const base: SitePhaseInput = { current: undefined, hasGatewayAddress: true, member: 'alive', probe: undefined };
const verified = { outcome: 'verified', fingerprint: 'a'.repeat(64) } as const;
const unreachable = { outcome: 'unreachable', detail: 'refused' } as const;

describe('GridSite phase machine (seed 001 "GridSite phase transitions")', () => {
  it.each([
    [
      'no SWIM peer and no address: Pending/AwaitingDiscovery ("its own GridSite stays Pending with reason AwaitingDiscovery")',
      { hasGatewayAddress: false, member: undefined },
      'Pending',
      'AwaitingDiscovery',
    ],
    [
      'peer alive, no address: Discovered/GatewayAddressMissing',
      { hasGatewayAddress: false, member: 'alive' },
      'Discovered',
      'GatewayAddressMissing',
    ],
    ['address present, not yet probed: Connecting', {}, 'Connecting', 'ProbePending'],
    ['mTLS verified with pin: Active/TlsVerified', { probe: verified }, 'Active', 'TlsVerified'],
    [
      'Active and the probe cannot connect: Unreachable ("demotes Active to Unreachable when the probe cannot connect")',
      { current: 'Active', probe: unreachable },
      'Unreachable',
      'ProbeUnreachable',
    ],
    [
      'never verified and unreachable: stays Connecting',
      { current: 'Connecting', probe: unreachable },
      'Connecting',
      'ProbeUnreachable',
    ],
    [
      'Active and a pin mismatch: Connecting ("Identity or trust failures demote Active to Connecting")',
      { current: 'Active', probe: { outcome: 'pin_mismatch', fingerprint: 'b'.repeat(64), detail: 'x' } },
      'Connecting',
      'FingerprintMismatch',
    ],
    [
      'Active and a chain failure: Connecting',
      { current: 'Active', probe: { outcome: 'identity_failed', detail: 'x' } },
      'Connecting',
      'TlsVerificationFailed',
    ],
    [
      'trust material missing: Connecting/TrustMaterialMissing',
      { probe: { outcome: 'trust_missing', detail: 'x' } },
      'Connecting',
      'TrustMaterialMissing',
    ],
    [
      'plaintext reachable: stays Connecting ("TCP reachability alone cannot make a site routing-eligible")',
      { probe: { outcome: 'plaintext', reachable: true, detail: 'x' } },
      'Connecting',
      'PlaintextTransport',
    ],
    ['member left: Left', { member: 'left', probe: verified }, 'Left', 'MemberLeft'],
    [
      'Unreachable recovers to Active when the probe verifies again',
      { current: 'Unreachable', probe: verified },
      'Active',
      'TlsVerified',
    ],
  ] as [string, Partial<SitePhaseInput>, string, string][])('%s', (_name, overrides, phase, reason) => {
    expect(nextSitePhase({ ...base, ...overrides })).toMatchObject({ phase, reason });
  });

  it('sets the readiness conditions beside the flat phase (docs/contract.md §1 beyond)', () => {
    const active = nextSitePhase({ ...base, probe: verified });
    expect(Object.fromEntries(active.conditions.map((c) => [c.type, c.status]))).toEqual({
      Reachable: 'True',
      IdentityVerified: 'True',
      CertificatePinned: 'True',
      Ready: 'True',
    });
    const pinned = nextSitePhase({
      ...base,
      probe: { outcome: 'pin_mismatch', fingerprint: 'b'.repeat(64), detail: 'x' },
    });
    expect(Object.fromEntries(pinned.conditions.map((c) => [c.type, c.status]))).toEqual({
      Reachable: 'True',
      IdentityVerified: 'True',
      CertificatePinned: 'False',
      Ready: 'False',
    });
  });
});
