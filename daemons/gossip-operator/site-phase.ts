/**
 * The GridSite phase machine, pure: Pending → Discovered → Connecting → Active → Unreachable → Left, with the
 * machine-readable reasons and (docs/contract.md §1) standard conditions
 * Reachable, IdentityVerified, CertificatePinned and Ready.
 */
import type { SiteProbeResult } from './probes/site-probe.ts';

export const GRID_SITE_PHASES = ['Pending', 'Discovered', 'Connecting', 'Active', 'Unreachable', 'Left'] as const;
export type GridSitePhase = (typeof GRID_SITE_PHASES)[number];

/** The site's SWIM member state as this operator sees it; undefined when no member carries the site. */
export type MemberView = 'alive' | 'suspect' | 'dead' | 'left' | undefined;

export interface SitePhaseInput {
  readonly current: GridSitePhase | undefined;
  readonly hasGatewayAddress: boolean;
  readonly member: MemberView;
  /** The result of this reconcile's probe; undefined when no probe ran (no address). */
  readonly probe: SiteProbeResult | undefined;
}

export interface SiteCondition {
  readonly type: 'Reachable' | 'IdentityVerified' | 'CertificatePinned' | 'Ready';
  readonly status: 'True' | 'False' | 'Unknown';
  readonly reason: string;
}

export interface SitePhaseDecision {
  readonly phase: GridSitePhase;
  readonly reason: string;
  readonly message: string;
  readonly conditions: readonly SiteCondition[];
}

export function nextSitePhase(input: SitePhaseInput): SitePhaseDecision {
  const decide = (
    phase: GridSitePhase,
    reason: string,
    message: string,
    reachable: Status,
    identity: Status,
    pinned: Status,
  ) => ({
    phase,
    reason,
    message,
    conditions: [
      { type: 'Reachable', status: reachable, reason },
      { type: 'IdentityVerified', status: identity, reason },
      { type: 'CertificatePinned', status: pinned, reason },
      { type: 'Ready', status: phase === 'Active' ? 'True' : 'False', reason },
    ] as SiteCondition[],
  });
  if (input.member === 'left')
    return decide('Left', 'MemberLeft', 'the site left the grid voluntarily', 'Unknown', 'Unknown', 'Unknown');
  if (!input.hasGatewayAddress) {
    if (input.member === 'alive' || input.current === 'Discovered') {
      return decide(
        'Discovered',
        'GatewayAddressMissing',
        'gateway address not yet available; cannot advance to Connecting',
        'Unknown',
        'Unknown',
        'Unknown',
      );
    }
    return decide(
      'Pending',
      'AwaitingDiscovery',
      'waiting for the site to be observed alive over SWIM',
      'Unknown',
      'Unknown',
      'Unknown',
    );
  }
  const probe = input.probe;
  if (probe === undefined)
    return decide('Connecting', 'ProbePending', 'gateway endpoint not probed yet', 'Unknown', 'Unknown', 'Unknown');
  switch (probe.outcome) {
    case 'verified':
      return decide(
        'Active',
        'TlsVerified',
        'TLS handshake succeeded; certificate chain, identity, and pin verified',
        'True',
        'True',
        'True',
      );
    case 'unreachable': {
      // Only a site that was eligible is demoted to Unreachable; one never verified stays Connecting.
      const wasEligible = input.current === 'Active' || input.current === 'Unreachable';
      return decide(
        wasEligible ? 'Unreachable' : 'Connecting',
        'ProbeUnreachable',
        probe.detail,
        'False',
        'Unknown',
        'Unknown',
      );
    }
    case 'trust_missing':
      return decide('Connecting', 'TrustMaterialMissing', probe.detail, 'Unknown', 'Unknown', 'Unknown');
    case 'identity_failed':
      return decide('Connecting', 'TlsVerificationFailed', probe.detail, 'True', 'False', 'Unknown');
    case 'pin_mismatch':
      return decide('Connecting', 'FingerprintMismatch', probe.detail, 'True', 'True', 'False');
    case 'plaintext':
      return decide(
        'Connecting',
        'PlaintextTransport',
        probe.detail,
        probe.reachable ? 'True' : 'False',
        'False',
        'False',
      );
  }
}

type Status = SiteCondition['status'];
