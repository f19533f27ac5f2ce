import { describe, expect, test } from 'vitest';
import { MemberTable } from '../../daemons/gossip-operator/swim/member-table.ts';

const now = 1_000;
function table(): MemberTable {
  const t = new MemberTable('self', '127.0.0.1:1', 0, 0, 4);
  t.applyAlive({ k: 'alive', name: 'b', addr: '127.0.0.1:2', inc: 5 }, 0);
  return t;
}

describe('MemberTable rules', () => {
  test.each([
    ['new member', { name: 'c', addr: '127.0.0.1:3', inc: 0 }, 'added'],
    ['same incarnation', { name: 'b', addr: '127.0.0.1:2', inc: 5 }, 'ignored'],
    ['older incarnation', { name: 'b', addr: '127.0.0.1:2', inc: 4 }, 'ignored'],
    ['newer incarnation', { name: 'b', addr: '127.0.0.1:2', inc: 6 }, 'updated'],
    ['live member on another address', { name: 'b', addr: '127.0.0.1:9', inc: 9 }, 'address_conflict'],
    ['about us, newer incarnation (our previous life)', { name: 'self', addr: '127.0.0.1:1', inc: 3 }, 'refute'],
    ['about us, other address', { name: 'self', addr: '127.0.0.1:7', inc: 0 }, 'refute'],
    ['about us, same', { name: 'self', addr: '127.0.0.1:1', inc: 0 }, 'ignored'],
  ])('alive: %s -> %s', (_n, a, want) => {
    expect(table().applyAlive({ k: 'alive', ...a }, now)).toBe(want);
  });

  test('alive beyond maxMembers is refused', () => {
    const t = table();
    t.applyAlive({ k: 'alive', name: 'c', addr: 'h:3', inc: 0 }, now);
    t.applyAlive({ k: 'alive', name: 'd', addr: 'h:4', inc: 0 }, now);
    expect(t.applyAlive({ k: 'alive', name: 'e', addr: 'h:5', inc: 0 }, now)).toBe('members_full');
    expect(t.size).toBe(4);
  });

  test.each([
    ['unknown member', { name: 'zz', inc: 9 }, 'ignored'],
    ['older incarnation', { name: 'b', inc: 4 }, 'ignored'],
    ['current incarnation', { name: 'b', inc: 5 }, 'suspected'],
    ['about us, current incarnation', { name: 'self', inc: 0 }, 'refute'],
  ])('suspect: %s -> %s', (_n, s, want) => {
    expect(table().applySuspect({ k: 'suspect', by: 'x', ...s }, now)).toBe(want);
  });

  test('a second accusation at the same incarnation is a confirmation; alive with a higher one clears it', () => {
    const t = table();
    expect(t.applySuspect({ k: 'suspect', name: 'b', inc: 5, by: 'x' }, now)).toBe('suspected');
    expect(t.get('b')?.state).toBe('suspect');
    expect(t.applySuspect({ k: 'suspect', name: 'b', inc: 5, by: 'y' }, now)).toBe('confirm');
    expect(t.applyAlive({ k: 'alive', name: 'b', addr: '127.0.0.1:2', inc: 5 }, now)).toBe('ignored');
    expect(t.applyAlive({ k: 'alive', name: 'b', addr: '127.0.0.1:2', inc: 6 }, now + 5)).toBe('updated');
    expect(t.get('b')).toMatchObject({ state: 'alive', incarnation: 6, stateChangedAtMs: now + 5 });
  });

  test('dead and left; a dead member only returns with a higher incarnation or on a new address', () => {
    const t = table();
    expect(t.applyDead({ k: 'dead', name: 'b', inc: 5, by: 'x' }, now)).toBe('dead');
    expect(t.applyDead({ k: 'dead', name: 'b', inc: 5, by: 'x' }, now)).toBe('ignored');
    expect(t.applySuspect({ k: 'suspect', name: 'b', inc: 9, by: 'x' }, now)).toBe('ignored');
    expect(t.applyAlive({ k: 'alive', name: 'b', addr: '127.0.0.1:2', inc: 5 }, now)).toBe('ignored');
    expect(t.applyAlive({ k: 'alive', name: 'b', addr: '127.0.0.1:2', inc: 6 }, now)).toBe('updated');
    expect(t.applyDead({ k: 'dead', name: 'b', inc: 6, by: 'b' }, now)).toBe('left');
    expect(t.applyAlive({ k: 'alive', name: 'b', addr: '127.0.0.1:8', inc: 0 }, now)).toBe('updated');
    expect(t.get('b')).toMatchObject({ addr: '127.0.0.1:8', state: 'alive' });
  });

  test('dead about us is refuted unless we are leaving', () => {
    const t = table();
    expect(t.applyDead({ k: 'dead', name: 'self', inc: 0, by: 'x' }, now)).toBe('refute');
    expect(t.refute(0)).toBe(1);
    t.leaving = true;
    expect(t.applyDead({ k: 'dead', name: 'self', inc: 1, by: 'x' }, now)).toBe('ignored');
  });

  test('refutation saturates at the largest incarnation peers accept (2^53 - 1)', () => {
    const t = table();
    expect(t.refute(Number.MAX_SAFE_INTEGER)).toBe(Number.MAX_SAFE_INTEGER);
    expect(t.refute(Number.MAX_SAFE_INTEGER)).toBe(Number.MAX_SAFE_INTEGER);
  });
});

// The live count, the dead/left set and random picks are kept on every transition instead of scanned.
describe('MemberTable counts and picks', () => {
  const scan = (t: MemberTable) => [...t.all()].filter((m) => m.state === 'alive' || m.state === 'suspect').length;
  const goneScan = (t: MemberTable) =>
    [...t.all()]
      .filter((m) => m.state === 'dead' || m.state === 'left')
      .map((m) => m.name)
      .sort();

  test('live count, dead and left members and arrivals follow every transition and forget', () => {
    const t = new MemberTable('self', 's:1', 0, 0, 100);
    const check = () => {
      expect(t.liveCount()).toBe(scan(t));
      expect([...t.gone()].map((m) => m.name).sort()).toEqual(goneScan(t));
    };
    for (const n of ['a', 'b', 'c', 'd']) t.applyAlive({ k: 'alive', name: n, addr: `${n}:1`, inc: 0 }, 0);
    check();
    expect(t.arrivals).toBe(5);
    t.applySuspect({ k: 'suspect', name: 'a', inc: 0, by: 'b' }, 1);
    check();
    t.applyDead({ k: 'dead', name: 'a', inc: 0, by: 'b' }, 2);
    t.applyDead({ k: 'dead', name: 'b', inc: 0, by: 'b' }, 2);
    check();
    expect(t.liveCount()).toBe(3);
    const before = t.arrivals;
    t.applyAlive({ k: 'alive', name: 'a', addr: 'a:1', inc: 1 }, 3); // back to life: an arrival
    check();
    expect(t.arrivals).toBe(before + 1);
    t.applyAlive({ k: 'alive', name: 'b', addr: 'b:2', inc: 0 }, 3); // a departed site back on a new address
    check();
    t.applyDead({ k: 'dead', name: 'c', inc: 0, by: 'a' }, 4);
    expect(t.forget('c')).toBe(true);
    expect(t.forget('c')).toBe(false);
    expect(t.forget('self')).toBe(false);
    check();
    expect(t.get('c')).toBeUndefined();
    expect([...t.all()].map((m) => m.name).sort()).toEqual(['a', 'b', 'd', 'self']);
  });

  test('sample gives distinct eligible members, all of them when fewer exist, uniformly over many draws', () => {
    let seed = 1;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const t = new MemberTable('self', 's:1', 0, 0, 1_000);
    for (let i = 0; i < 200; i++) t.applyAlive({ k: 'alive', name: `m${i}`, addr: `m${i}:1`, inc: 0 }, 0);
    for (let i = 0; i < 100; i++) t.applyDead({ k: 'dead', name: `m${i}`, inc: 0, by: 'self' }, 1);
    const alive = (m: { state: string; name: string }) => m.state === 'alive' && m.name !== 'self';
    const hits = new Map<string, number>();
    for (let draw = 0; draw < 5_000; draw++) {
      const picked = t.sample(4, random, alive);
      expect(new Set(picked).size).toBe(4);
      for (const m of picked) {
        expect(alive(m)).toBe(true);
        hits.set(m.name, (hits.get(m.name) ?? 0) + 1);
      }
    }
    // 100 eligible members, 20,000 picks: 200 each on average; every one is picked, none more than twice as often.
    expect(hits.size).toBe(100);
    expect(Math.max(...hits.values())).toBeLessThan(2 * Math.min(...hits.values()));
    expect(
      t
        .sample(4, random, (m) => m.name === 'm150' || m.name === 'm151')
        .map((m) => m.name)
        .sort(),
    ).toEqual(['m150', 'm151']);
    expect(t.sample(4, random, () => false)).toEqual([]);
  });
});
