// The in-process transport runs the same protocol without sockets (used by the local grid runner).
import { afterEach, expect, test } from 'vitest';
import { seededRandom } from '../../daemons/gossip-operator/swim/clock.ts';
import { Membership } from '../../daemons/gossip-operator/swim/membership.ts';
import { MemoryNetwork } from '../../daemons/gossip-operator/swim/memory-transport.ts';
import { testTiming, waitFor } from './helpers.ts';

const members: Membership[] = [];
afterEach(async () => {
  await Promise.all(members.splice(0).map((m) => m.shutdown()));
});

test('8 members converge and detect a failure over MemoryNetwork (plaintext frames, no key)', async () => {
  const net = new MemoryNetwork();
  for (let i = 0; i < 8; i++) {
    members.push(
      Membership.start({
        config: { ...testTiming(), name: `m${i}` },
        transport: net.createTransport(),
        random: seededRandom(i + 1),
      }),
    );
  }
  await Promise.all(members.slice(1).map((m) => m.join([members[0]!.address])));
  await waitFor('8 members alive everywhere', 5_000, () =>
    members.every((m) => m.members().filter((x) => x.state === 'alive').length === 8),
  );
  const victim = members.pop()!;
  await victim.shutdown();
  await waitFor('m7 dead everywhere', 5_000, () => members.every((m) => m.member('m7')?.state === 'dead'));
  expect(members.every((m) => m.stats().drops.plaintext_rejected === 0)).toBe(true);
});
