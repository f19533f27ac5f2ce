// The probe round and its Lifeguard local-health inputs, driven by a manual clock: what a prober decides when its
// own event loop stalls, and what missed nacks charge to its health score.
import { createSocket } from 'node:dgram';
import { describe, expect, test } from 'vitest';
import { seededRandom, systemClock } from '../../daemons/gossip-operator/swim/clock.ts';
import { loopbackProfile, wanProfile } from '../../daemons/gossip-operator/swim/config.ts';
import { MemberTable, type Member } from '../../daemons/gossip-operator/swim/member-table.ts';
import {
  AckTable,
  nackTimeoutMs,
  probeMember,
  ProbeTargets,
  type ProbeHost,
} from '../../daemons/gossip-operator/swim/probe.ts';
import { FakeClock } from './fake-clock.ts';
import { testTiming } from './helpers.ts';

const TIMEOUT_MS = 60;
const INTERVAL_MS = 100;

function member(name: string): Member {
  return { name, addr: `127.0.0.1:${name.charCodeAt(0)}`, incarnation: 0, state: 'alive', stateChangedAtMs: 0 };
}

interface Harness {
  readonly clock: FakeClock;
  readonly host: ProbeHost;
  readonly pingReqs: string[];
  readonly suspected: string[];
  awareness: number;
  lastSeq: number;
}

/** A prober "self" with the given live helpers; relays answer through `onPingReq` (default: silence). */
function harness(
  helpers: readonly string[],
  onPingReq: (h: Harness, via: string, seq: number) => void = () => {},
): Harness {
  const clock = new FakeClock();
  const acks = new AckTable(clock);
  let seq = 0;
  const live = ['self', 'target', ...helpers].map(member);
  const h: Harness = {
    clock,
    pingReqs: [],
    suspected: [],
    awareness: 0,
    lastSeq: 0,
    host: {
      clock,
      random: () => 0.5,
      selfName: 'self',
      acks,
      nextSeq: () => ++seq,
      probeTimeoutMs: () => TIMEOUT_MS,
      probeIntervalMs: () => INTERVAL_MS,
      indirectChecks: () => 3,
      sampleMembers: (count, eligible) => live.filter(eligible).slice(0, count),
      pingTo: (_target, s) => {
        h.lastSeq = s;
      },
      pingReqTo: (via, _target, s) => {
        h.pingReqs.push(via.name);
        onPingReq(h, via.name, s);
      },
      awarenessDelta: (d) => {
        h.awareness += d;
      },
      suspect: (target) => {
        h.suspected.push(target.name);
      },
    },
  };
  return h;
}

function settledState(p: Promise<string>): { value: string | undefined } {
  const out: { value: string | undefined } = { value: undefined };
  void p.then((v) => {
    out.value = v;
  });
  return out;
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('probeMember', () => {
  test('an ack in time settles the probe and improves local health', async () => {
    const h = harness(['x', 'y', 'z']);
    const r = settledState(probeMember(h.host, member('target')));
    h.clock.advance(TIMEOUT_MS - 1);
    h.host.acks.ack(h.lastSeq, 'target', h.clock.now());
    await flush();
    expect(r.value).toBe('acked');
    expect(h.pingReqs).toEqual([]);
    expect(h.awareness).toBe(-1);
  });

  test('an ack or nack from a member that was not asked does not count', async () => {
    const h = harness(['x', 'y', 'z']);
    const r = settledState(probeMember(h.host, member('target')));
    expect(h.host.acks.ack(h.lastSeq, 'mallory', h.clock.now())).toBe('unexpected');
    expect(h.host.acks.ack(h.lastSeq, 'x', h.clock.now())).toBe('unexpected'); // x is no helper before the ping-reqs
    expect(h.host.acks.nack(h.lastSeq, 'mallory')).toBe('unexpected');
    await flush();
    expect(r.value).toBeUndefined();
    h.clock.advance(INTERVAL_MS);
    await flush();
    expect(r.value).toBe('suspected');
  });

  test('a prober that stalls past both deadlines still gives its ping-reqs their whole window', async () => {
    const h = harness(['x', 'y', 'z']);
    const r = settledState(probeMember(h.host, member('target')));
    h.clock.stall(3 * INTERVAL_MS); // our own loop was frozen: both the probe timeout and the interval passed
    await flush();
    expect(h.pingReqs).toHaveLength(3); // sent on waking ...
    expect(r.value).toBeUndefined(); // ... and not judged in the same instant
    expect(h.suspected).toEqual([]);
    h.clock.advance(INTERVAL_MS - TIMEOUT_MS - 1);
    h.host.acks.ack(h.lastSeq, 'x', h.clock.now()); // a relay's forwarded ack, inside the window
    await flush();
    expect(r.value).toBe('acked');
    expect(h.suspected).toEqual([]);
  });

  test('without any answer the target is suspected once the indirect window closes', async () => {
    const h = harness(['x', 'y', 'z']);
    const r = settledState(probeMember(h.host, member('target')));
    h.clock.advance(INTERVAL_MS - 1);
    await flush();
    expect(r.value).toBeUndefined();
    h.clock.advance(1);
    await flush();
    expect(r.value).toBe('suspected');
    expect(h.suspected).toEqual(['target']);
    expect(h.host.acks.size).toBe(0); // the entry is dropped with the verdict: the table stays bounded
  });

  test('healthy relays nack inside the window, so a dead target costs the prober no local health', async () => {
    // Each relay nacks after its nack timeout plus a 5 ms round trip, as receive.ts does.
    const nackAfter = nackTimeoutMs(TIMEOUT_MS, INTERVAL_MS) + 5;
    const h = harness(['x', 'y', 'z'], (hh, via, s) => hh.clock.schedule(nackAfter, () => hh.host.acks.nack(s, via)));
    const r = settledState(probeMember(h.host, member('target')));
    h.clock.advance(INTERVAL_MS);
    await flush();
    expect(r.value).toBe('suspected');
    expect(h.awareness).toBe(0);
  });

  test('each missing nack raises the local health score by one', async () => {
    const h = harness(['x', 'y', 'z'], (hh, via, s) => {
      if (via === 'x') hh.clock.schedule(1, () => hh.host.acks.nack(s, via));
    });
    const r = settledState(probeMember(h.host, member('target')));
    h.clock.advance(INTERVAL_MS);
    await flush();
    expect(r.value).toBe('suspected');
    expect(h.awareness).toBe(2);
  });

  test('with nobody to nack, the failed probe itself raises the score by one', async () => {
    const h = harness([]);
    const r = settledState(probeMember(h.host, member('target')));
    h.clock.advance(INTERVAL_MS);
    await flush();
    expect(r.value).toBe('suspected');
    expect(h.pingReqs).toEqual([]);
    expect(h.awareness).toBe(1);
  });

  test('a probe cut short by shutdown reaches no verdict', async () => {
    const h = harness(['x', 'y', 'z']);
    const r = settledState(probeMember(h.host, member('target')));
    h.clock.advance(TIMEOUT_MS);
    h.host.acks.clear();
    h.clock.advance(INTERVAL_MS);
    await flush();
    expect(r.value).toBe('stopped');
    expect(h.suspected).toEqual([]);
    expect(h.awareness).toBe(0);
  });
});

describe('nackTimeoutMs', () => {
  test.each([
    { name: 'WAN profile', t: wanProfile() },
    { name: 'loopback profile', t: loopbackProfile() },
    { name: 'test timing', t: testTiming() },
    { name: 'timeout close to the interval', t: { probeTimeoutMs: 950, probeIntervalMs: 1_000 } },
  ])('$name: the nack lands inside the requester indirect window', ({ t }) => {
    const nack = nackTimeoutMs(t.probeTimeoutMs, t.probeIntervalMs);
    expect(nack).toBeGreaterThan(0);
    expect(nack).toBeLessThan(t.probeIntervalMs - t.probeTimeoutMs);
  });

  test('WAN profile: 80 % of the 2 s indirect window', () => {
    expect(nackTimeoutMs(3_000, 5_000)).toBe(1_600);
  });
});

describe('systemClock', () => {
  test('a deadline that expires during a stall sees the datagrams that arrived before it', async () => {
    const socket = createSocket('udp4');
    try {
      await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
      let received = 0;
      socket.on('message', () => received++);
      const port = socket.address().port;
      await new Promise<void>((r, j) => socket.send('ack', port, '127.0.0.1', (err) => (err ? j(err) : r())));
      // The datagram is in the kernel buffer now; freeze the loop past the deadline before Node can read it.
      const seen = new Promise<number>((r) => systemClock.schedule(20, () => r(received)));
      const until = Date.now() + 120;
      while (Date.now() < until) {
        // busy: an event-loop stall
      }
      expect(await seen).toBe(1);
    } finally {
      socket.close();
    }
  });
});

describe('probe order', () => {
  test('every member is probed once per round, and one learned mid-round is probed in that same round', () => {
    for (let seed = 1; seed <= 50; seed++) {
      const targets = new ProbeTargets(seededRandom(seed));
      const members = new MemberTable('self', 'self:1', 0, 0, 100);
      const add = (name: string) => members.applyAlive({ k: 'alive', name, addr: `${name}:1`, inc: 0 }, 0);
      for (let i = 0; i < 20; i++) add(`m${i}`);
      const first = [targets.next(members, 'self')!.name];
      add('late');
      // The round had 20 members; with the late one it has 21 probes before anyone is probed twice.
      for (let i = 1; i < 21; i++) first.push(targets.next(members, 'self')!.name);
      expect(new Set(first).size, `seed ${seed}: ${first.join(',')}`).toBe(21);
      expect(first).toContain('late');
    }
  });
});
