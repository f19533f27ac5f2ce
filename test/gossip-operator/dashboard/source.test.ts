// The dashboard's I/O shell against a real local store and real HTTP admin endpoints: a store read that fails is
// named and leaves the rest of the view intact; an unreachable replica shows as unknown; requests/s comes from
// the gateways' request counters between two reads.
import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DashboardSource } from '../../../daemons/gossip-operator/dashboard/source.ts';
import { ProviderSignals } from '../../../daemons/gossip-operator/controllers/provider-signals.ts';
import { CONFIG_MAP, GRID_NETWORK, GRID_SITE } from '../../../daemons/gossip-operator/kinds.ts';
import { listen } from '../../../daemons/shared/listen.ts';
import { openLocalStore } from '../../../daemons/shared/resource-store/index.ts';
import type { ResourceStore } from '../../../daemons/shared/resource-store/types.ts';
import { testConfig } from '../helpers.ts';

const REV = 'c'.repeat(64);
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function admin(handler: (path: string) => { status: number; body: string }): Promise<string> {
  const server: Server = createServer((req, res) => {
    const { status, body } = handler(req.url ?? '/');
    res.writeHead(status);
    res.end(body);
  });
  await listen(server, 0, '127.0.0.1');
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  const address = server.address();
  return `127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`;
}

async function seededStore(): Promise<ResourceStore> {
  const dir = mkdtempSync(join(tmpdir(), 'agn-dashboard-source-'));
  const store = await openLocalStore({ stateDir: dir });
  cleanups.push(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  await store.apply(
    GRID_NETWORK,
    { apiVersion: GRID_NETWORK.apiVersion, kind: 'GridNetwork', metadata: { name: 'demo' }, spec: {} },
    { fieldManager: 't' },
  );
  await store.patchStatus(
    GRID_NETWORK,
    { name: 'demo' },
    {
      phase: 'Active',
      routingMapStatus: [
        {
          gatewayName: 'consumer',
          namespace: 'grid-system',
          configMapName: 'grid-overlay-demo-consumer',
          distributedRevision: REV,
          phase: 'Distributed',
        },
      ],
    },
    { fieldManager: 't' },
  );
  const envelope = {
    revision: { value: REV },
    overlay: {
      candidates: [
        {
          kind: 'inference_model',
          name: 'm',
          site: 'east',
          cluster: 'east-llm',
          fresh: true,
          admission_state: 'new_and_existing',
          rank: 0,
          score: 1,
        },
      ],
    },
  };
  await store.apply(
    CONFIG_MAP,
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'grid-overlay-demo-consumer', namespace: 'grid-system' },
      data: { 'routing-overlay.json': JSON.stringify(envelope) },
    } as never,
    { fieldManager: 't' },
  );
  return store;
}

function source(store: ResourceStore, targets: string): DashboardSource {
  const config = testConfig({ site: 'east', store: { backend: 'local', stateDir: '/unused' } });
  const replicas =
    targets === ''
      ? []
      : targets.split(',').map((entry) => {
          const [left = '', address = ''] = entry.split('=');
          const [replica = '', kind = ''] = left.split('/');
          return { replica, kind: kind as 'gateway' | 'overlay-sync', address };
        });
  return new DashboardSource(
    { store, signals: new ProviderSignals(), config, now: Date.now, gossip: undefined, siteProbeRtt: new Map() },
    () => replicas,
  );
}

describe('dashboard source', () => {
  it('reads revisions and delivery from the admin endpoints, and requests/s from the gateway counters', async () => {
    const store = await seededStore();
    const requests = 10;
    const gateway = await admin((path) =>
      path === '/status'
        ? { status: 200, body: JSON.stringify({ ready: true, accepted_revision: REV }) }
        : {
            status: 200,
            body: `grid_gateway_overlay_serving_revision_info{revision="${REV}"} 1\ngrid_gateway_requests_total{role="consumer",model="m",cluster="east-llm",status="200"} ${requests}\n`,
          },
    );
    const sync = await admin(() => ({
      status: 200,
      body: JSON.stringify({
        state: 'ready',
        configmap: { namespace: 'grid-system', name: 'grid-overlay-demo-consumer' },
        written: { revision: REV },
        observed: { outcome: 'written' },
        degraded_reason: null,
        watch: { reconnects: 1 },
      }),
    }));
    const dashboard = source(
      store,
      `c-0/gateway=${gateway},c-0/overlay-sync=${sync},c-1/gateway=127.0.0.1:9,c-1/overlay-sync=127.0.0.1:9`,
    );
    const first = await dashboard.view();
    expect(first.unreadable).toEqual([]);
    expect(first.gateways[0]?.replicas).toEqual([
      { replica: 'c-0', ready: true, acceptedRevision: REV, servingRevision: REV, agrees: true },
    ]);
    expect(first.delivery.map((d) => [d.replica, d.state, d.writtenRevision, d.reconnects])).toEqual([
      ['c-0', 'ready', REV, 1],
      ['c-1', 'unreachable', null, null],
    ]);
    // c-1 never answers, so no rate can be formed from every gateway.
    expect(first.providers[0]?.requestsPerSecond).toBeNull();
  });

  it('forms requests/s once every gateway answered twice a second apart', async () => {
    const store = await seededStore();
    let requests = 10;
    const gateway = await admin((path) =>
      path === '/status'
        ? { status: 200, body: JSON.stringify({ ready: true, accepted_revision: REV }) }
        : {
            status: 200,
            body: `grid_gateway_requests_total{role="consumer",model="m",cluster="east-llm",status="200"} ${requests}\n`,
          },
    );
    const dashboard = source(store, `c-0/gateway=${gateway}`);
    expect((await dashboard.view()).providers[0]?.requestsPerSecond).toBeNull();
    requests = 30;
    await new Promise((r) => setTimeout(r, 1_100));
    const rate = (await dashboard.view()).providers[0]?.requestsPerSecond ?? 0;
    // 20 requests over a little more than one second (more on a loaded machine, so only bounded loosely below).
    expect(rate).toBeGreaterThan(5);
    expect(rate).toBeLessThanOrEqual(20);
  });

  it('names a store read that failed and still renders the rest', async () => {
    const real = await seededStore();
    const failing = new Proxy(real, {
      get(target, prop) {
        if (prop === 'list') {
          return (kind: { kind: string }, options?: unknown) =>
            kind.kind === GRID_SITE.kind
              ? Promise.reject(new Error('forbidden'))
              : target.list(kind as never, options as never);
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    const view = await source(failing, '').view();
    expect(view.unreadable).toEqual(['GridSites']);
    expect(view.sites.map((s) => s.name)).toEqual(['east']);
    expect(view.providers.map((p) => p.cluster)).toEqual(['east-llm']);
    expect(view.gateways[0]?.publishedRevision).toBe(REV);
  });
});
