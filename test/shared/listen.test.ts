// The shared bind step of every daemon listener: a taken port must reject (so the daemon reports it and carries on
// or exits with a clear error), never surface as an unhandled 'error' event.
import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { listen } from '../../daemons/shared/listen.ts';

describe('listen', () => {
  const servers: ReturnType<typeof createServer>[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) await new Promise((resolve) => server.close(resolve));
  });

  it('resolves with the bound address, and rejects with EADDRINUSE for a taken port', async () => {
    const first = createServer();
    servers.push(first);
    const bound = await listen(first, 0, '127.0.0.1');
    expect(bound.address).toBe('127.0.0.1');
    expect(bound.port).toBeGreaterThan(0);
    const second = createServer();
    await expect(listen(second, bound.port, '127.0.0.1')).rejects.toMatchObject({ code: 'EADDRINUSE' });
    // The one-shot listener is gone once bound: a later error goes to the server's own handlers only.
    expect(first.listenerCount('error')).toBe(0);
  });
});
