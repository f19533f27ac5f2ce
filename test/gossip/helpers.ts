// Shared fixtures for the gossip suites: real UDP/TCP transports on 127.0.0.1 with port 0, a scaled timing
// profile, a poll-with-timeout helper that says what it was waiting for, and teardown bookkeeping.
import { randomBytes } from 'node:crypto';
import { loopbackProfile, type SwimConfig, type SwimTiming } from '../../daemons/gossip-operator/swim/config.ts';
import { KeyRing } from '../../daemons/gossip-operator/swim/keyring.ts';
import { Membership, type MembershipOptions } from '../../daemons/gossip-operator/swim/membership.ts';
import { FaultyTransport } from '../../daemons/gossip-operator/swim/transport.ts';
import { transportBounds, UdpTransport } from '../../daemons/gossip-operator/swim/udp-transport.ts';

/** Fast but not frantic: 100 ms probes, 60 ms probe timeout, 1 s suspicion (loopback RTTs are sub-millisecond). */
export function testTiming(overrides: Partial<SwimTiming> = {}): SwimTiming {
  return {
    ...loopbackProfile(50),
    probeIntervalMs: 100,
    probeTimeoutMs: 60,
    suspicionTimeoutMs: 1_000,
    gossipIntervalMs: 30,
    pushPullIntervalMs: 1_000,
    announceIntervalMs: 500,
    joinRetryIntervalMs: 100,
    deadMemberTtlMs: 30_000,
    // The scaled profile gives 200 ms for a join's TCP exchange, which a loaded 2-core CI box can exceed (a join then
    // reports 0 contacts). Only a peer that accepts and never answers waits this long; refused or closed streams fail
    // at once, so a generous bound costs the suites nothing.
    pushPullTimeoutMs: 2_000,
    ...overrides,
  };
}

export const sharedKey = randomBytes(32);

export interface TestNode {
  readonly membership: Membership;
  readonly transport: FaultyTransport;
}

export async function startNode(
  name: string,
  timing: SwimTiming = testTiming(),
  extra: Partial<Omit<MembershipOptions, 'config' | 'transport'>> & { bindPort?: number; bindHost?: string } = {},
): Promise<TestNode> {
  const config: SwimConfig = { ...timing, name };
  const udp = await UdpTransport.bind({
    bindHost: extra.bindHost ?? '127.0.0.1',
    bindPort: extra.bindPort ?? 0,
    ...transportBounds(config),
  });
  const transport = new FaultyTransport(udp);
  const membership = Membership.start({ keyring: new KeyRing([sharedKey]), ...extra, config, transport });
  return { membership, transport };
}

/** Polls `check` every 20 ms; on timeout throws with `what` and the last diagnostic. */
export async function waitFor(what: string, timeoutMs: number, check: () => boolean | string): Promise<number> {
  const started = Date.now();
  let last: boolean | string = false;
  while (Date.now() - started < timeoutMs) {
    last = check();
    if (last === true) return Date.now() - started;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${typeof last === 'string' ? `: ${last}` : ''}`);
}

/** True when every node sees exactly `expected` as alive (itself included). */
export function allSeeAlive(nodes: readonly TestNode[], expected: readonly string[]): boolean | string {
  const want = [...expected].sort().join(',');
  for (const n of nodes) {
    const got = n.membership
      .members()
      .filter((m) => m.state === 'alive')
      .map((m) => m.name)
      .sort()
      .join(',');
    if (got !== want) return `${n.membership.name} sees alive [${got}]`;
  }
  return true;
}

export async function stopAll(nodes: Iterable<TestNode>): Promise<void> {
  await Promise.all([...nodes].map((n) => n.membership.shutdown()));
}
