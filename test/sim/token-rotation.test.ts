// The sim's --token-file followed on disk, as the provider credential Secret rotates under it (laid out and updated the
// kubelet's way): the new token is accepted without a restart; the previous one still for the grace period (the
// provider gateway reading the same Secret is updated on its own schedule), then refused 401; an empty replacement
// keeps the token in force, logged naming the file and counted. The grace logic itself with an injected clock.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BearerTokens, DEFAULT_TOKEN_GRACE_MS } from '../../daemons/sim/bearer-tokens.ts';
import { KubeletVolume } from '../kubelet-volume.ts';
import { call, chatBody, metricSample, spawnDaemon, tempDir, waitFor, waitForPort } from '../gateway/helpers.ts';
import type { Daemon } from '../gateway/helpers.ts';

const GRACE_MS = 1_500;
const BOUND_MS = 3_000;

describe('BearerTokens', () => {
  it('accepts the previous token for the grace period after a rotation, then only the new one', () => {
    let now = 1_000;
    const tokens = new BearerTokens('one', { graceMs: 500, now: () => now });
    expect(tokens.accepts('Bearer one')).toBe(true);
    expect(tokens.rotate('one')).toBe(false);
    expect(tokens.rotate('two')).toBe(true);
    expect([tokens.accepts('Bearer two'), tokens.accepts('Bearer one')]).toEqual([true, true]);
    now = 1_499;
    expect(tokens.accepts('Bearer one')).toBe(true);
    now = 1_500;
    expect([tokens.accepts('Bearer two'), tokens.accepts('Bearer one')]).toEqual([true, false]);
    // A second rotation inside the grace keeps only the token it replaced.
    tokens.rotate('three');
    tokens.rotate('four');
    expect([tokens.accepts('Bearer four'), tokens.accepts('Bearer three'), tokens.accepts('Bearer two')]).toEqual([
      true,
      true,
      false,
    ]);
    for (const header of [undefined, '', 'one', 'Bearer ', 'bearer four', 'Bearer four ', 'Basic four'])
      expect(tokens.accepts(header)).toBe(false);
    expect(() => tokens.rotate('')).toThrow(/non-empty/);
    expect(DEFAULT_TOKEN_GRACE_MS).toBe(60_000);
  });
});

describe('sim --token-file followed on disk', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let volume: KubeletVolume;
  let sim: Daemon;
  let base: string;
  const status = async (token: string): Promise<number> =>
    (await call(`${base}/v1/chat/completions`, { body: chatBody('m1'), headers: { authorization: `Bearer ${token}` } }))
      .status;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('sim-token'));
    volume = await KubeletVolume.create(join(dir, 'credential'), { token: 'sim-token-one\n' });
    sim = spawnDaemon('daemons/sim/main.ts', [
      '--name',
      'sim-r',
      '--models',
      'm1',
      '--token-file',
      volume.path('token'),
      '--token-grace-ms',
      String(GRACE_MS),
    ]);
    base = `http://127.0.0.1:${await waitForPort(sim, 'sim')}`;
  });

  afterAll(async () => {
    expect(await sim.stop()).toBe(0);
    const output = sim.stdout() + sim.stderr();
    for (const token of ['sim-token-one', 'sim-token-two', 'sim-token-three']) expect(output).not.toContain(token);
    await cleanup();
  });

  it('accepts the rotated token without a restart, and the previous one only for the grace period', async () => {
    expect(await status('sim-token-one')).toBe(200);
    expect(await status('sim-token-two')).toBe(401);
    // The grace runs from when the sim read the new token, which is after this moment: until GRACE_MS past it the old
    // token is accepted (as the token in force, or as the previous one), and refused only after.
    const swappedAt = performance.now();
    await volume.update({ token: 'sim-token-two\n' });
    await waitFor(
      'the rotated token accepted',
      async () => ((await status('sim-token-two')) === 200 ? true : undefined),
      BOUND_MS,
    );
    // The provider gateway may still send the old token until its own kubelet sync: accepted within the grace.
    const checkedAt = performance.now();
    const old = await status('sim-token-one');
    if (checkedAt - swappedAt < GRACE_MS) expect(old).toBe(200);
    await waitFor(
      'the previous token refused after the grace',
      async () => ((await status('sim-token-one')) === 401 ? true : undefined),
      GRACE_MS + BOUND_MS,
    );
    expect(performance.now() - swappedAt).toBeGreaterThanOrEqual(GRACE_MS);
    expect(await status('sim-token-two')).toBe(200);
  });

  it('keeps the token in force when the file turns empty, logs and counts it, then takes the next one', async () => {
    await volume.update({ token: '\n' });
    const counted = async (): Promise<number | undefined> =>
      metricSample((await call(`${base}/metrics`)).text, 'sim_token_reloads_total{outcome="rejected"}');
    await waitFor('the empty token counted', async () => ((await counted()) === 1 ? true : undefined), BOUND_MS);
    expect(await status('sim-token-two')).toBe(200);
    const warning = sim.lines.find((l) => l['msg'] === 'token unusable; the previous one stays in force');
    expect(warning?.['problem']).toBe(`--token-file ${volume.path('token')}: the token is empty`);
    await volume.update({ token: 'sim-token-three' });
    await waitFor(
      'the next token accepted',
      async () => ((await status('sim-token-three')) === 200 ? true : undefined),
      BOUND_MS,
    );
  });
});
