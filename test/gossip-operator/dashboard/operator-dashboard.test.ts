// The dashboard as the assembled operator serves it: off by default on a public admin bind while the probes and the
// metrics stay reachable, and, with the kubernetes store, replica rows filled from the consumer gateway pods it
// discovers itself (here the pods live in a real local store and their "pod IPs" are loopback admin servers).
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../daemons/gossip-operator/config.ts';
import { GRID_NETWORK, POD } from '../../../daemons/gossip-operator/kinds.ts';
import { startOperator, type OperatorHandle } from '../../../daemons/gossip-operator/operator.ts';
import { listen } from '../../../daemons/shared/listen.ts';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { capturingLogger, tempDir, waitFor } from '../helpers.ts';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function store(): Promise<LocalStore> {
  const dir = await tempDir('operator-dashboard');
  const s = await openLocalStore({ stateDir: dir.path, coalesceMs: 5, rescanIntervalMs: 500 });
  cleanups.push(async () => {
    await s.close();
    await dir.remove();
  });
  return s;
}

/** The operator as main.ts starts it, from command-line flags, with its log lines. */
async function operator(argv: string[], s: LocalStore): Promise<OperatorHandle & { lines: string[] }> {
  const config = parseConfig(
    ['--site', 'east', '--gossip-bind', '127.0.0.1:0', '--leader-elect', 'false', ...argv],
    {},
  );
  const { logger, lines } = capturingLogger();
  const op = await startOperator({ config, logger, store: s });
  cleanups.push(() => op.stop());
  return Object.assign(op, { lines });
}

/** A gateway's or overlay-sync's admin endpoint: /status as the daemons answer it (no /metrics). */
async function adminEndpoint(status: () => Promise<unknown>): Promise<number> {
  const server: Server = createServer((req, res) => {
    if (req.url !== '/status') {
      res.writeHead(404);
      res.end();
      return;
    }
    void status().then((body) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  await listen(server, 0, '127.0.0.1');
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return (server.address() as AddressInfo).port;
}

function gatewayPod(name: string, gatewayPort: number, syncPort: number): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace: 'grid-system',
      labels: {
        'app.kubernetes.io/name': 'consumer-gateway',
        'app.kubernetes.io/instance': 'consumer-gateway',
        'app.kubernetes.io/part-of': 'agn',
      },
    },
    spec: {
      containers: [
        {
          name: 'gateway',
          ports: [
            { name: 'listener', containerPort: 8080 },
            { name: 'admin', containerPort: gatewayPort },
          ],
        },
        { name: 'overlay-sync', ports: [{ name: 'sync-health', containerPort: syncPort }] },
      ],
    },
  };
}

describe("the operator's dashboard", () => {
  it('is off by default on a non-loopback admin bind, while /livez, /readyz and /metrics answer as before', async () => {
    const op = await operator(['--admin', '0.0.0.0:0'], await store());
    const base = `http://127.0.0.1:${op.admin.port}`;
    for (const path of [
      '/dashboard/',
      '/dashboard',
      '/dashboard/model.json',
      '/dashboard/events',
      '/dashboard/dashboard.js',
    ]) {
      const response = await fetch(`${base}${path}`, { redirect: 'manual' });
      expect(response.status, path).toBe(404);
    }
    expect((await fetch(`${base}/livez`)).status).toBe(200);
    await waitFor('the operator ready', async () =>
      (await fetch(`${base}/readyz`)).status === 200 ? true : undefined,
    );
    const metrics = await fetch(`${base}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('grid_operator');
  });

  it('with --dashboard token on a public bind, serves the page to the token only and never logs it', async () => {
    const dir = await tempDir('operator-dashboard-token');
    cleanups.push(() => dir.remove());
    const token = 'operator-dashboard-token-0123456789';
    await writeFile(join(dir.path, 'token'), `${token}\n`);
    const op = await operator(
      ['--admin', '0.0.0.0:0', '--dashboard', 'token', '--dashboard-token-file', join(dir.path, 'token')],
      await store(),
    );
    const base = `http://127.0.0.1:${op.admin.port}`;
    const denied = await fetch(`${base}/dashboard/model.json`);
    expect(denied.status).toBe(401);
    const allowed = await fetch(`${base}/dashboard/model.json`, { headers: { authorization: `Bearer ${token}` } });
    expect(allowed.status).toBe(200);
    expect(((await allowed.json()) as { site: string }).site).toBe('east');
    expect((await fetch(`${base}/metrics`)).status).toBe(200);
    await op.stop();
    expect(op.lines.some((l) => l.includes('dashboard token loaded'))).toBe(true);
    expect(op.lines.filter((l) => l.includes(token))).toEqual([]);
  });

  it('is open by default on a loopback admin bind (the local grid)', async () => {
    const op = await operator(['--admin', '127.0.0.1:0'], await store());
    expect((await fetch(`http://127.0.0.1:${op.admin.port}/dashboard/model.json`)).status).toBe(200);
  });

  it('with the kubernetes store, reads every consumer gateway pod it discovers, without --dashboard-targets', async () => {
    const s = await store();
    const consumerGateways = [{ name: 'consumer-gateway', namespace: 'grid-system', siteName: 'east' }];
    await s.apply(
      GRID_NETWORK,
      {
        apiVersion: GRID_NETWORK.apiVersion,
        kind: 'GridNetwork',
        metadata: { name: 'demo' },
        spec: { consumerGateways },
      },
      { fieldManager: 't' },
    );
    // The replicas accept what the operator publishes: its routingMapStatus revision, read when they are asked.
    const published = async (): Promise<string | undefined> => {
      const network = await s.get(GRID_NETWORK, { name: 'demo' });
      return (network?.['status'] as { routingMapStatus?: { distributedRevision?: string }[] } | undefined)
        ?.routingMapStatus?.[0]?.distributedRevision;
    };
    for (const name of ['consumer-gateway-abc12', 'consumer-gateway-def34']) {
      const gateway = await adminEndpoint(async () => ({
        ready: true,
        accepted_revision: (await published()) ?? null,
      }));
      const sync = await adminEndpoint(async () => ({
        state: 'ready',
        configmap: { namespace: 'grid-system', name: 'grid-overlay-demo-consumer-gateway' },
        written: { revision: (await published()) ?? null },
        observed: { outcome: 'written' },
        degraded_reason: null,
      }));
      await s.apply(POD, gatewayPod(name, gateway, sync) as never, { fieldManager: 't' });
      await s.patchStatus(
        POD,
        { namespace: 'grid-system', name },
        { phase: 'Running', podIP: '127.0.0.1' },
        { fieldManager: 't' },
      );
    }
    const op = await operator(['--admin', '127.0.0.1:0', '--store', 'kubernetes'], s);
    const model = await waitFor('both replicas on the dashboard, agreeing with the published revision', async () => {
      const view = (await (await fetch(`http://127.0.0.1:${op.admin.port}/dashboard/model.json`)).json()) as {
        gateways: {
          publishedRevision: string | null;
          replicas: { replica: string; acceptedRevision: string | null; agrees: boolean | null }[];
        }[];
        delivery: { replica: string; state: string }[];
      };
      const replicas = view.gateways[0]?.replicas ?? [];
      return replicas.length === 2 && replicas.every((r) => r.agrees === true) && view.delivery.length === 2
        ? view
        : undefined;
    });
    const revision = await published();
    expect(revision).toMatch(/^[0-9a-f]{64}$/);
    expect(model.gateways[0]?.publishedRevision).toBe(revision);
    expect(model.gateways[0]?.replicas.map((r) => [r.replica, r.acceptedRevision])).toEqual([
      ['consumer-gateway-abc12', revision],
      ['consumer-gateway-def34', revision],
    ]);
    expect(model.delivery.map((d) => [d.replica, d.state])).toEqual([
      ['consumer-gateway-abc12', 'ready'],
      ['consumer-gateway-def34', 'ready'],
    ]);
  });
});
