// The grid_site_route filter in a real gateway (real sockets, in-process sims): its config as the loader checks it,
// the answers it gives instead of the upstream, the response headers, the provider hop, and failover on a connect
// failure. The decision rules themselves are in site-router.test.ts.
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stableId } from '../../../schemas/fnv1a.ts';
import { ConfigError, resolveConfig } from '../../../daemons/gateway/config.ts';
import { startGateway } from '../../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../../daemons/gateway/server.ts';
import { listen } from '../../../daemons/shared/listen.ts';
import { createLogger } from '../../../daemons/shared/log.ts';
import { startSim } from '../../../daemons/sim/server.ts';
import type { SimServer } from '../../../daemons/sim/server.ts';
import { closedPort } from '../../closed-port.ts';
import { call, tempDir } from '../helpers.ts';
import { MemorySiteView, entry } from './fixtures.ts';

const TOKEN = 'grid-site-route-token-5d1e';

function config(
  route: Record<string, unknown>,
  clusters: { name: string; endpoints: string[] }[],
  extra: Record<string, unknown>[] = [],
): Record<string, unknown> {
  return {
    listeners: [{ name: 'consumer', address: '127.0.0.1:0', filter_chains: ['main'] }],
    admin: { address: '127.0.0.1:0' },
    shutdown_timeout_secs: 2,
    filter_chains: [
      {
        name: 'main',
        filters: [...extra, { filter: 'grid_site_route', ...route }, { filter: 'load_balancer', clusters }],
      },
    ],
  };
}

describe('grid_site_route config', () => {
  const clusters = [{ name: 'c-a', endpoints: ['127.0.0.1:1'] }];
  it('is a consumer route filter with every availability and prefix_affinity field optional', () => {
    const resolved = resolveConfig(
      config({ availability: { shedding: true }, prefix_affinity: { enabled: false } }, clusters),
      'c.json',
    );
    expect(resolved.role).toBe('consumer');
    expect(resolveConfig(config({}, clusters), 'c.json').role).toBe('consumer');
  });
  it.each([
    [
      'both route filters in one pipeline',
      config({}, clusters, [{ filter: 'intelligent_route', overlay_file: 'o.json' }]),
      /intelligent_route and grid_site_route in one pipeline/,
    ],
    [
      'a provider hop cluster load_balancer does not define',
      config({ provider_hop_clusters: ['nope'] }, clusters),
      /grid_site_route\.provider_hop_clusters names "nope"/,
    ],
    ['an unknown availability key', config({ availability: { ceiling: 3 } }, clusters), /availability/],
    ['smoothing 0 (must move saturation at all)', config({ availability: { smoothing: 0 } }, clusters), /smoothing/],
    ['exploration over 1', config({ prefix_affinity: { exploration: 2 } }, clusters), /exploration/],
    [
      'a model_header in a namespace Praxis reserves',
      config({ model_header: 'x-praxis-model' }, clusters),
      /reserved internal header prefix/,
    ],
  ])('refuses %s, naming it', (_name, bad, reason) => {
    expect(() => resolveConfig(bad, 'c.json')).toThrow(ConfigError);
    expect(() => resolveConfig(bad, 'c.json')).toThrow(reason);
  });
});

describe('grid_site_route in a gateway', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let simA: SimServer;
  let simB: SimServer;
  let view: MemorySiteView;
  let gateway: GatewayInstance;
  let base: string;
  // The same routes with prefix affinity off: the body is parsed only when it may name stored state.
  let noPrefix: GatewayInstance;
  let noPrefixBase: string;
  // The provider gateway's place: records the headers the hop carries.
  let hop: Server;
  const hopHeaders: IncomingHttpHeaders[] = [];
  const auth = { authorization: `Bearer ${TOKEN}` };
  const chat = (body: Record<string, unknown>, headers: Record<string, string> = auth) =>
    call(`${base}/v1/chat/completions`, { body: { messages: [{ role: 'user', content: 'hi' }], ...body }, headers });
  const sample = (site: string, inFlight: number, waiting: number) =>
    view.publish({ site, atMs: Date.now(), inFlight, waiting, readyEndpoints: 1 });

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('grid-site-route'));
    simA = await startSim({ name: 'sim-a', models: ['m'], token: TOKEN });
    simB = await startSim({ name: 'sim-b', models: ['m', 'hop'], token: TOKEN });
    const dead = await closedPort();
    hop = createServer((req, res) => {
      hopHeaders.push(req.headers);
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    const hopPort = (await listen(hop, 0, '127.0.0.1')).port;
    view = new MemorySiteView([
      entry('site-a', { cluster: 'c-a', local: true }),
      entry('site-b', { cluster: 'c-b', models: ['m'] }),
      entry('site-d', { cluster: 'c-dead', models: ['dead'] }),
      entry('site-b', { cluster: 'c-hop', models: ['hop'] }),
    ]);
    view.rev = undefined;
    const cfg = config(
      { provider_hop_clusters: ['c-hop'] },
      [
        { name: 'c-a', endpoints: [`127.0.0.1:${simA.port}`] },
        { name: 'c-b', endpoints: [`127.0.0.1:${simB.port}`] },
        { name: 'c-hop', endpoints: [`127.0.0.1:${hopPort}`] },
        { name: 'c-dead', endpoints: [`127.0.0.1:${dead}`] },
      ],
      [{ filter: 'json_body_field', field: 'model', header: 'x-gateway-model-name' }],
    );
    const logger = createLogger({ name: 'gateway', level: 'warn', destination: { write: () => undefined } });
    gateway = await startGateway(resolveConfig(cfg, join(dir, 'c.json')), {
      configDir: dir,
      logger,
      processMetrics: false,
      siteView: view,
    });
    base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
    const cfgNoPrefix = config(
      { provider_hop_clusters: ['c-hop'], prefix_affinity: { enabled: false } },
      [
        { name: 'c-a', endpoints: [`127.0.0.1:${simA.port}`] },
        { name: 'c-b', endpoints: [`127.0.0.1:${simB.port}`] },
        { name: 'c-hop', endpoints: [`127.0.0.1:${hopPort}`] },
        { name: 'c-dead', endpoints: [`127.0.0.1:${dead}`] },
      ],
      [{ filter: 'json_body_field', field: 'model', header: 'x-gateway-model-name' }],
    );
    noPrefix = await startGateway(resolveConfig(cfgNoPrefix, join(dir, 'c-no-prefix.json')), {
      configDir: dir,
      logger,
      processMetrics: false,
      siteView: view,
    });
    noPrefixBase = `http://127.0.0.1:${noPrefix.listeners[0]!.port}`;
  });
  afterAll(async () => {
    await gateway?.close();
    await noPrefix?.close();
    await simA?.close();
    await simB?.close();
    hop?.close();
    await cleanup?.();
  });

  it('is not ready until the SiteView holds a serving config', () => {
    expect(gateway.isReady()).toBe(false);
    view.rev = 'r1';
    expect(gateway.isReady()).toBe(true);
  });

  it('answers every routed request with x-grid-site and x-grid-backend', async () => {
    sample('site-a', 1, 0);
    sample('site-b', 1, 0);
    const reply = await chat({ model: 'm' });
    expect(reply.status, reply.text).toBe(200);
    expect(['site-a', 'site-b']).toContain(reply.headers['x-grid-site']);
    expect(reply.headers['x-grid-backend']).toBe(reply.headers['x-grid-site'] === 'site-a' ? 'c-a' : 'c-b');
  });

  it.each([
    ['a request naming no model: 400', { messages: [] }, 400, 'model_required'],
    ['a model no site serves: 404', { model: 'other' }, 404, 'model_not_found'],
    [
      'stored state of two sites: 400',
      { model: 'm', previous_response_id: 'resp_site-a.1', conversation: 'conv_site-b.2' },
      400,
      'conflicting_stored_state',
    ],
  ])('%s, as an OpenAI-style error', async (_name, body, status, code) => {
    const reply = await call(`${base}/v1/chat/completions`, { body, headers: auth });
    expect(reply.status).toBe(status);
    expect(reply.json().error.code).toBe(code);
  });

  it.each([
    ['plain keys', '{"model":"m","previous_response_id":"resp_site-a.1","conversation":"conv_site-b.2","messages":[]}'],
    // A key spelled with \u escapes is the same key to JSON: pinning must see it although its bytes differ.
    [
      'a key spelled with \\u escapes',
      '{"model":"m","previous\\u005fresponse_id":"resp_site-a.1","conv\\u0065rsation":"conv_site-b.2","messages":[]}',
    ],
  ])(
    'with prefix affinity off, stored state in the body is still read (%s): two sites named is a 400',
    async (_name, raw) => {
      const reply = await call(`${noPrefixBase}/v1/chat/completions`, { body: raw, headers: auth });
      expect(reply.status, reply.text).toBe(400);
      expect(reply.json().error.code).toBe('conflicting_stored_state');
    },
  );

  it('with prefix affinity off, a chat completion naming no stored state is routed as usual', async () => {
    sample('site-a', 1, 0);
    sample('site-b', 1, 0);
    const reply = await call(`${noPrefixBase}/v1/chat/completions`, {
      body: { model: 'm', messages: [{ role: 'user', content: 'a conversation about "conversation"' }] },
      headers: auth,
    });
    expect(reply.status, reply.text).toBe(200);
    expect(['site-a', 'site-b']).toContain(reply.headers['x-grid-site']);
  });

  it("a provider-hop cluster gets the hop context (the candidate's stable_id, the request id) and only allowlisted headers", async () => {
    const reply = await chat({ model: 'hop' }, { ...auth, cookie: 'secret=1' });
    expect(reply.status, reply.text).toBe(200);
    const headers = hopHeaders.at(-1)!;
    expect(headers['x-ai-routing-candidate']).toBe(stableId('inference_model', 'hop', 'site-b', 'c-hop'));
    expect(headers['x-ai-routing-request-id']).toBe(reply.headers['x-request-id']);
    expect(headers['x-gateway-model-name']).toBe('hop');
    expect(headers['authorization']).toBeUndefined();
    expect(headers['cookie']).toBeUndefined();
  });

  it('a connect failure moves the request to another site (the failed cluster is demoted on the second decision)', async () => {
    view.entriesList.push(entry('site-d', { cluster: 'c-dead', models: ['m'] }));
    sample('site-d', 1, 0);
    // site-a and site-b are over their ceilings: site-d is the only site with room.
    for (let i = 0; i < 3; i++) {
      sample('site-a', 40, 30);
      sample('site-b', 40, 30);
    }
    const reply = await chat({ model: 'm' });
    expect(reply.status, reply.text).toBe(200);
    expect(['site-a', 'site-b']).toContain(reply.headers['x-grid-site']);
    const text = (await call(`http://127.0.0.1:${gateway.adminPort}/metrics`)).text;
    expect(text).toMatch(/grid_route_decisions_total\{site="site-d",cluster="c-dead",reason="routed"\} 1/);
    expect(text).toMatch(/grid_gateway_retries_total\{role="consumer",cluster="c-dead"\} 1/);
  });
});
