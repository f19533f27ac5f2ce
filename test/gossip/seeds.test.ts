import { expect, test } from 'vitest';
import { formatAddress, parseAddress } from '../../daemons/gossip-operator/swim/address.ts';
import { parseSeeds, resolveSeeds, SeedProblemMemory } from '../../daemons/gossip-operator/swim/seeds.ts';

test.each([
  ['10.0.0.5:7946', { host: '10.0.0.5', port: 7946 }],
  ['[::1]:7946', { host: '::1', port: 7946 }],
  ['[fd00::2]:1', { host: 'fd00::2', port: 1 }],
  ['site-b.grid.example:7946', { host: 'site-b.grid.example', port: 7946 }],
  ['::1:7946', undefined],
  ['10.0.0.5', undefined],
  ['10.0.0.5:0', undefined],
  ['10.0.0.5:70000', undefined],
  ['[10.0.0.5]:7946', undefined],
  ['bad_host!:7946', undefined],
  ['', undefined],
])('parseAddress(%j)', (text, want) => {
  expect(parseAddress(text)).toEqual(want);
});

test('formatAddress brackets IPv6 only', () => {
  expect(formatAddress('::1', 5)).toBe('[::1]:5');
  expect(formatAddress('127.0.0.1', 5)).toBe('127.0.0.1:5');
});

test('parseSeeds reports each bad entry with what was expected', () => {
  const r = parseSeeds(['10.0.0.5:7946', 'nope']);
  expect(r.seeds).toHaveLength(1);
  expect(r.problems).toEqual([{ seed: 'nope', problem: expect.stringContaining('bracketed IPv6') }]);
});

test('resolveSeeds resolves names, deduplicates and filters our own address', async () => {
  const lookup = async (host: string) => (host === 'peers.example' ? ['127.0.0.1', '127.0.0.2'] : []);
  const r = await resolveSeeds(
    ['peers.example:7000', '127.0.0.2:7000', '[::1]:7000', '127.0.0.1:7000'],
    ['127.0.0.1:7000'],
    500,
    lookup,
  );
  expect(r.addresses).toEqual(['127.0.0.2:7000', '[::1]:7000']);
  expect(r.problems).toEqual([]);
});

test('a lookup that hangs is abandoned after the bound and named in the problems', async () => {
  const hang = () => new Promise<string[]>(() => {});
  const started = Date.now();
  const r = await resolveSeeds(['slow.example:7000', '127.0.0.3:1'], [], 100, hang);
  expect(Date.now() - started).toBeLessThan(2_000);
  expect(r.addresses).toEqual(['127.0.0.3:1']);
  expect(r.problems).toEqual([
    { seed: 'slow.example:7000', problem: 'DNS lookup of slow.example timed out after 100 ms' },
  ]);
});

test('the real resolver resolves localhost', async () => {
  const r = await resolveSeeds(['localhost:7001'], [], 2_000);
  expect(r.addresses.some((a) => a === '127.0.0.1:7001' || a === '[::1]:7001')).toBe(true);
});

test('an unresolvable seed is reported once per distinct problem, and again after it resolved and fails anew', () => {
  const memory = new SeedProblemMemory();
  const dns = { seed: 'east.example:7946', problem: 'getaddrinfo ENOTFOUND east.example' };
  const bad = { seed: 'nope', problem: 'expected host:port' };
  expect(memory.changed([dns, bad])).toEqual([dns, bad]);
  // Every reconcile re-announces the seeds: the same problems are not reported again.
  for (let i = 0; i < 5; i += 1) expect(memory.changed([dns, bad])).toEqual([]);
  const timeout = { seed: 'east.example:7946', problem: 'DNS lookup of east.example timed out after 2000 ms' };
  expect(memory.changed([timeout, bad])).toEqual([timeout]);
  expect(memory.changed([bad])).toEqual([]);
  expect(memory.changed([timeout, bad])).toEqual([timeout]);
});
