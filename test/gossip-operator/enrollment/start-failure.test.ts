// An operator whose admin port is taken fails its start and leaves nothing bound behind it: the enrollment listener
// it had already opened is closed again (before, it kept serving redeems from a process that had failed to start).
import { createServer, type Server } from 'node:net';
import { afterEach, expect, it } from 'vitest';
import { listen } from '../../../daemons/shared/listen.ts';
import { tempDir } from '../helpers.ts';
import { startSigner, writeSignerFiles } from './helpers.ts';

const servers: Server[] = [];
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((resolve) => s.close(resolve))));
  for (const cleanup of cleanups.splice(0)) await cleanup();
});

async function freePort(): Promise<number> {
  const probe = createServer();
  const { port } = await listen(probe, 0, '127.0.0.1');
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

it('closes the enrollment listener when the admin server cannot bind', async () => {
  const taken = createServer();
  servers.push(taken);
  const { port: adminPort } = await listen(taken, 0, '127.0.0.1');
  const enrollmentPort = await freePort();
  const dir = await tempDir('start-fail-files');
  cleanups.push(dir.remove);
  const files = await writeSignerFiles(dir.path);
  await expect(
    startSigner('start-fail', {
      adminAddress: `127.0.0.1:${adminPort}`,
      enrollment: { address: `127.0.0.1:${enrollmentPort}`, ...files, certificateLifetimeMs: 3_600_000 },
    }),
  ).rejects.toThrow(/EADDRINUSE/);
  // The enrollment port is free again: this bind would fail with EADDRINUSE if the listener had leaked.
  const after = createServer();
  servers.push(after);
  await expect(listen(after, enrollmentPort, '127.0.0.1')).resolves.toMatchObject({ port: enrollmentPort });
});
