import { describe, expect, it } from 'vitest';
import { WorkQueue } from '../../../daemons/gossip-operator/manager/work-queue.ts';

describe('WorkQueue', () => {
  it('queues a key once however often it is added', async () => {
    const q = new WorkQueue();
    q.add('a');
    q.add('a');
    q.add('b');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    q.shutDown();
  });

  it('never hands a key in progress to a second worker, and runs it once more if it changed meanwhile', async () => {
    const q = new WorkQueue();
    q.add('a');
    const key = await q.get();
    q.add('a');
    q.add('a');
    expect(q.length).toBe(0);
    q.done(key as string);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe('a');
    q.done('a');
    expect(q.length).toBe(0);
    q.shutDown();
  });

  it('backs off per key exponentially with jitter and forgets on success', () => {
    const q = new WorkQueue({ baseBackoffMs: 100, maxBackoffMs: 1_000, random: () => 1 });
    expect(q.addRateLimited('a')).toBe(100);
    expect(q.addRateLimited('a')).toBe(200);
    expect(q.addRateLimited('a')).toBe(400);
    expect(q.addRateLimited('a')).toBe(800);
    expect(q.addRateLimited('a')).toBe(1_000);
    expect(q.addRateLimited('b')).toBe(100);
    q.forget('a');
    expect(q.failures('a')).toBe(0);
    const low = new WorkQueue({ baseBackoffMs: 100, random: () => 0 });
    expect(low.addRateLimited('a')).toBe(50);
    q.shutDown();
    low.shutDown();
  });

  it('delays a key, letting an earlier delay or an immediate add win', async () => {
    const q = new WorkQueue();
    q.addAfter('a', 40);
    q.addAfter('a', 10_000);
    const started = Date.now();
    expect(await q.get()).toBe('a');
    expect(Date.now() - started).toBeLessThan(5_000);
    q.done('a');
    q.addAfter('b', 10_000);
    q.add('b');
    expect(await q.get()).toBe('b');
    q.shutDown();
  });

  it('releases waiting workers on shutdown', async () => {
    const q = new WorkQueue();
    const waiting = q.get();
    q.shutDown();
    expect(await waiting).toBeUndefined();
    q.add('a');
    expect(await q.get()).toBeUndefined();
  });
});
