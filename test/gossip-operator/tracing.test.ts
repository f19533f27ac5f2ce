// The operator's spans, read by a real OTLP/HTTP receiver (test/shared/otlp-receiver.ts): the operator as a process on
// a grid's manifests with only the standard OTEL_* environment set exports one span per reconcile, and inside each
// GridNetwork reconcile a `grid.overlay.render` child with the render's size; SIGTERM flushes the last ones; no
// token byte is in any export; a tracing environment it cannot honour stops it at start naming the variable.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../fixtures-path.ts';
import { renderFixture, startBackend, tempDir, waitFor, type Backend } from './helpers.ts';
import { type OtlpReceiver, startOtlpReceiver } from '../shared/otlp-receiver.ts';

const TOKEN = 'tok-trace-s3cr3t-bytes';

function operator(
  manifests: string,
  state: string,
  env: Record<string, string>,
): { child: ChildProcess; output: () => string } {
  let output = '';
  const child = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'daemons/gossip-operator/main.ts'),
      '--store',
      'local',
      '--manifests',
      manifests,
      '--state',
      state,
      '--site',
      'site-a',
      '--gossip-bind',
      '127.0.0.1:0',
      '--admin',
      '127.0.0.1:0',
      '--swim-profile',
      'loopback',
      '--lease-duration',
      '3s',
      '--provider-poll-interval',
      '1s',
      '--site-poll-interval',
      '1s',
    ],
    { env: { ...process.env, LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return { child, output: () => output };
}

describe('gossip-operator traces', { timeout: 60_000 }, () => {
  let backend: Backend;
  let dirs: { path: string; remove: () => Promise<void> };
  let receiver: OtlpReceiver;
  let running: ReturnType<typeof operator>;

  beforeAll(async () => {
    backend = await startBackend();
    receiver = await startOtlpReceiver();
    dirs = await tempDir('operator-tracing');
    await renderFixture(
      'single-site/grid.yaml',
      { BACKEND_URL: backend.url, API_TOKEN: TOKEN },
      join(dirs.path, 'manifests'),
    );
    running = operator(join(dirs.path, 'manifests'), join(dirs.path, 'state'), {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_RESOURCE_ATTRIBUTES: 'grid.site=site-a',
    });
  });

  afterAll(async () => {
    if (running?.child.exitCode === null) {
      running.child.kill('SIGKILL');
      await new Promise((resolve) => running.child.once('exit', resolve));
    }
    await Promise.all([backend?.close(), receiver?.close()]);
    await dirs?.remove();
  });

  it('exports a span per reconcile and the render inside the GridNetwork reconcile', async () => {
    const renders = await receiver.waitForSpans((spans) => spans.some((s) => s.name === 'grid.overlay.render'), 30_000);
    const render = renders.find((s) => s.name === 'grid.overlay.render')!;
    const parent = renders.find((s) => s.spanId === render.parentSpanId);
    expect(parent?.name).toBe('reconcile gridnetwork');
    expect(parent?.attributes['grid.controller']).toBe('gridnetwork');
    expect(render.traceId).toBe(parent?.traceId);
    expect(render.attributes['grid.render.gateways']).toBeGreaterThanOrEqual(1);
    expect(render.serviceName).toBe('gossip-operator');
    expect(render.resource['grid.site']).toBe('site-a');
    expect(new Set(receiver.spans.filter((s) => s.name.startsWith('reconcile ')).map((s) => s.name))).toContain(
      'reconcile inferenceprovider',
    );
    running.child.kill('SIGTERM');
    expect(await new Promise<number | null>((resolve) => running.child.once('exit', resolve))).toBe(0);
    for (const body of receiver.rawBodies) expect(body.includes(TOKEN)).toBe(false);
  });

  it('sends the spans it still holds when SIGTERM stops it', async () => {
    // A batch delay longer than the test: a span of this process can only arrive through the flush at shutdown.
    const held = operator(join(dirs.path, 'manifests'), join(dirs.path, 'state-flush'), {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      OTEL_RESOURCE_ATTRIBUTES: 'grid.site=flush',
    });
    await waitFor('its controllers to run', () => (held.output().includes('controllers started') ? true : undefined));
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const mine = () => receiver.spans.filter((s) => s.resource['grid.site'] === 'flush');
    expect(mine()).toEqual([]);
    held.child.kill('SIGTERM');
    expect(await new Promise<number | null>((resolve) => held.child.once('exit', resolve))).toBe(0);
    expect(mine().some((s) => s.name === 'reconcile gridnetwork')).toBe(true);
  });

  it('refuses a tracing environment it cannot honour, naming the variable (exit 1)', async () => {
    const bad = operator(join(dirs.path, 'manifests'), join(dirs.path, 'state-bad'), {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_TRACES_SAMPLER_ARG: '7',
      OTEL_TRACES_SAMPLER: 'traceidratio',
    });
    const code = await new Promise<number | null>((resolve) => bad.child.once('exit', resolve));
    expect(code).toBe(1);
    expect(bad.output()).toContain('OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got "7"');
  });
});
