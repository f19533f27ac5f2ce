// The sim as a backend under SIGTERM (its main calls close()): requests already running finish with their answer,
// new connections are refused, and it reports unhealthy from the moment close() starts.
import { describe, expect, it } from 'vitest';
import { startSim } from '../../daemons/sim/server.ts';
import { call, chatBody } from '../gateway/helpers.ts';

const TOKEN = 'sim-close-token-41aa';

describe('sim close', () => {
  it('lets running requests finish, refuses new connections and turns unhealthy at once', async () => {
    const sim = await startSim({ name: 'sim-close', models: ['m1'], token: TOKEN, latencyMs: 400 });
    const url = `http://127.0.0.1:${sim.port}/v1/chat/completions`;
    const running = Array.from({ length: 3 }, () =>
      call(url, { body: chatBody('m1'), headers: { authorization: `Bearer ${TOKEN}` } }),
    );
    await new Promise((r) => setTimeout(r, 100));
    const closed = sim.close();
    expect(sim.state.healthy).toBe(false);
    expect((await Promise.all(running)).map((r) => r.status)).toEqual([200, 200, 200]);
    await closed;
    await expect(call(url, { body: chatBody('m1'), headers: { authorization: `Bearer ${TOKEN}` } })).rejects.toThrow();
  });
});
