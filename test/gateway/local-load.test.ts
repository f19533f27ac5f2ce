// local_load on a real gateway: the count of its own in-flight requests per candidate, over real sockets, through every
// way a request ends (answered, broken off by the upstream before or after its head, abandoned by the caller before or
// during the answer, moved by a failover), and what steering by it does to a burst against a slow and a fast upstream.
import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { startGateway, type GatewayInstance } from '../../daemons/gateway/server.ts';
import type { OverlayCandidate } from '../../schemas/overlay/types.ts';
import { capturingLogger } from '../gossip-operator/helpers.ts';
import { closedPort } from '../closed-port.ts';
import {
  call,
  candidate,
  chatBody,
  consumerConfig,
  metricSample,
  payload,
  tempDir,
  waitFor,
  writeOverlay,
} from './helpers.ts';
import { MemorySiteView, entry } from './site-route/fixtures.ts';
import { seededRandom as seeded } from '../../daemons/shared/seeded-random.ts';

const COMPLETION = JSON.stringify({
  id: 'chatcmpl-1',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
});

async function listen(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ port: number; close: () => Promise<void>; server: ReturnType<typeof createServer> }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as { port: number }).port,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

interface Held {
  readonly res: ServerResponse;
  readonly mode: string;
}

/**
 * An upstream that holds every request until release(), shaped by the caller's x-hold header: `json` answers nothing
 * until released, `stream` sends its head and a first event at once, `break-mid` sends head and an event and then
 * drops the connection, `break-before` drops it before any byte.
 */
async function holdingUpstream() {
  const held: Held[] = [];
  const upstream = await listen((req, res) => {
    req.resume();
    req.on('end', () => {
      const mode = String(req.headers['x-hold'] ?? 'json');
      if (mode === 'break-before') {
        req.socket.destroy();
        return;
      }
      if (mode === 'stream' || mode === 'break-mid') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('data: {"choices":[{"delta":{"content":"a"}}]}\n\n');
        if (mode === 'break-mid') setTimeout(() => req.socket.destroy(), 20);
      }
      held.push({ res, mode });
    });
  });
  return {
    ...upstream,
    held,
    release() {
      for (const { res, mode } of held.splice(0)) {
        if (res.destroyed) continue;
        if (mode === 'json')
          res
            .writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(COMPLETION) })
            .end(COMPLETION);
        else res.end('data: [DONE]\n\n');
      }
    },
  };
}

describe('local_load: own in-flight per candidate on a real gateway', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let overlayPath: string;
  let gateway: GatewayInstance;
  let hold: Awaited<ReturnType<typeof holdingUpstream>>;
  let base: string;
  const useOverlay = async (candidates: OverlayCandidate[], mode?: 'deterministic' | 'weightedRandom') => {
    const revision = await writeOverlay(overlayPath, payload(candidates, mode));
    await waitFor(`revision ${revision}`, () => gateway.overlay?.current()?.revision === revision);
  };
  const metrics = async () => (await call(`http://127.0.0.1:${gateway.adminPort}/metrics`)).text;
  const inFlight = async (cluster: string) =>
    metricSample(await metrics(), `grid_gateway_candidate_in_flight{cluster="${cluster}"}`);
  const settlesAt = (cluster: string, value: number) =>
    waitFor(`grid_gateway_candidate_in_flight{cluster="${cluster}"} = ${value}`, async () =>
      (await inFlight(cluster)) === value ? true : undefined,
    );
  const chat = (headers: Record<string, string> = {}) =>
    call(`${base}/v1/chat/completions`, { body: chatBody('m1'), headers });

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir('local-load'));
    overlayPath = join(dir, 'routing-overlay.json');
    hold = await holdingUpstream();
    const dead = await closedPort();
    await writeOverlay(overlayPath, payload([candidate('m1', 'west', 'hold')]));
    const config = consumerConfig({
      overlayPath,
      localLoad: true,
      clusters: [
        { name: 'hold', endpoints: [`127.0.0.1:${hold.port}`] },
        { name: 'dead', endpoints: [`127.0.0.1:${dead}`], connect_timeout_ms: 500 },
      ],
    });
    gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: dir,
      logger: capturingLogger().logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
    });
    base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
  });

  afterEach(() => hold.release());

  afterAll(async () => {
    await gateway?.close();
    await hold?.close();
    await cleanup();
  });

  it('counts requests the upstream holds and returns to 0 once they are answered', async () => {
    await useOverlay([candidate('m1', 'west', 'hold')]);
    const replies = Promise.all([1, 2, 3, 4].map(() => chat()));
    await waitFor('4 held requests', () => (hold.held.length === 4 ? true : undefined));
    expect(await inFlight('hold')).toBe(4);
    hold.release();
    expect((await replies).map((r) => r.status)).toEqual([200, 200, 200, 200]);
    await settlesAt('hold', 0);
  });

  it('returns to 0 when the caller goes away mid-stream, while the upstream still holds its answer', async () => {
    await useOverlay([candidate('m1', 'west', 'hold')]);
    const streaming = await new Promise<ReturnType<typeof httpRequest>>((resolve, reject) => {
      const body = JSON.stringify(chatBody('m1', { stream: true }));
      const req = httpRequest(
        `${base}/v1/chat/completions`,
        { method: 'POST', headers: { 'content-type': 'application/json', 'x-hold': 'stream' } },
        (res) => {
          res.once('data', () => resolve(req));
          res.once('error', () => undefined);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(await inFlight('hold')).toBe(1);
    // Gone after the first event, while the answer is still streaming.
    streaming.on('error', () => undefined);
    streaming.destroy();
    await settlesAt('hold', 0);
  });

  it('returns to 0 when the caller goes away before any answer', async () => {
    await useOverlay([candidate('m1', 'west', 'hold')]);
    const abort = new AbortController();
    const req = httpRequest(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      signal: abort.signal,
    });
    req.on('error', () => undefined);
    req.end(JSON.stringify(chatBody('m1')));
    await waitFor('the held request', () => (hold.held.length === 1 ? true : undefined));
    expect(await inFlight('hold')).toBe(1);
    abort.abort();
    await settlesAt('hold', 0);
  });

  it('returns to 0 when the upstream breaks off mid-stream or before its head (502)', async () => {
    await useOverlay([candidate('m1', 'west', 'hold')]);
    const broken = await chat({ 'x-hold': 'break-mid' }).catch((error: Error) => error);
    expect(broken).toBeInstanceOf(Error);
    await settlesAt('hold', 0);
    const refused = await chat({ 'x-hold': 'break-before' });
    expect(refused.status).toBe(502);
    await settlesAt('hold', 0);
  });

  it('moves the count on a failover: the unreachable candidate ends, the one retried on begins', async () => {
    await useOverlay(
      [
        candidate('m1', 'west', 'dead', { selection_group: 0 }),
        candidate('m1', 'east', 'hold', { selection_group: 0 }),
      ],
      'deterministic',
    );
    const reply = chat();
    await waitFor('the failed-over request held', () => (hold.held.length === 1 ? true : undefined));
    const text = await metrics();
    expect(metricSample(text, 'grid_gateway_candidate_in_flight{cluster="dead"}')).toBe(0);
    expect(metricSample(text, 'grid_gateway_candidate_in_flight{cluster="hold"}')).toBe(1);
    expect(metricSample(text, 'grid_gateway_retries_total{role="consumer",cluster="dead"}')).toBe(1);
    hold.release();
    expect((await reply).status).toBe(200);
    await settlesAt('hold', 0);
    expect(await inFlight('dead')).toBe(0);
  });
});

describe('local_load on grid_site_route in a real gateway', () => {
  it('counts the requests held at a site per cluster and returns to 0 when they are answered', async () => {
    const { dir, cleanup } = await tempDir('local-load-site');
    const hold = await holdingUpstream();
    const view = new MemorySiteView([entry('a')]);
    view.publish({ site: 'a', atMs: Date.now(), inFlight: 0, waiting: 0, readyEndpoints: 1 });
    const config = {
      listeners: [{ name: 'consumer', address: '127.0.0.1:0', filter_chains: ['main'] }],
      admin: { address: '127.0.0.1:0' },
      shutdown_timeout_secs: 2,
      filter_chains: [
        {
          name: 'main',
          filters: [
            { filter: 'grid_site_route', local_load: { mode: 'two_choices' }, prefix_affinity: { enabled: false } },
            { filter: 'load_balancer', clusters: [{ name: 'c-a', endpoints: [`127.0.0.1:${hold.port}`] }] },
          ],
        },
      ],
    };
    const gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: dir,
      logger: capturingLogger().logger,
      processMetrics: false,
      siteView: view,
    });
    try {
      const base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
      const series = async () =>
        metricSample(
          (await call(`http://127.0.0.1:${gateway.adminPort}/metrics`)).text,
          'grid_gateway_candidate_in_flight{cluster="c-a"}',
        );
      const replies = Promise.all(
        [1, 2, 3].map(() =>
          call(`${base}/v1/chat/completions`, { body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] } }),
        ),
      );
      await waitFor('3 held requests', () => (hold.held.length === 3 ? true : undefined));
      expect(await series()).toBe(3);
      hold.release();
      expect((await replies).map((r) => r.status)).toEqual([200, 200, 200]);
      await waitFor('the count back at 0', async () => ((await series()) === 0 ? true : undefined));
    } finally {
      await gateway.close();
      await hold.close();
      await cleanup();
    }
  });
});

describe('local_load: two equal candidates, one slow', () => {
  const REQUESTS = 120;
  const CLIENTS = 8;
  const SLOW_MS = 500;

  /**
   * REQUESTS chat completions from CLIENTS closed-loop clients through a gateway over two candidates of equal
   * traffic_weight (weightedRandom), one answering at once, one after SLOW_MS; returns how many each upstream served.
   */
  async function run(localLoad: boolean): Promise<{ fast: number; slow: number; selections: string }> {
    const { dir, cleanup } = await tempDir('local-load-share');
    const served = { fast: 0, slow: 0 };
    const answer = (which: 'fast' | 'slow') => (req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      req.on('end', () => {
        served[which]++;
        const send = () =>
          res
            .writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(COMPLETION) })
            .end(COMPLETION);
        if (which === 'slow') setTimeout(send, SLOW_MS);
        else send();
      });
    };
    const fast = await listen(answer('fast'));
    const slow = await listen(answer('slow'));
    const overlayPath = join(dir, 'routing-overlay.json');
    await writeOverlay(
      overlayPath,
      payload(
        [
          candidate('m1', 'west', 'fast', { selection_group: 0, traffic_weight: 1 }),
          candidate('m1', 'east', 'slow', { selection_group: 0, traffic_weight: 1 }),
        ],
        'weightedRandom',
      ),
    );
    const config = consumerConfig({
      overlayPath,
      localLoad,
      clusters: [
        { name: 'fast', endpoints: [`127.0.0.1:${fast.port}`] },
        { name: 'slow', endpoints: [`127.0.0.1:${slow.port}`] },
      ],
    });
    const gateway = await startGateway(resolveConfig(config, 'consumer.json'), {
      configDir: dir,
      logger: capturingLogger().logger,
      processMetrics: false,
      overlayPollIntervalMs: 0,
      random: seeded(11),
    });
    try {
      const base = `http://127.0.0.1:${gateway.listeners[0]!.port}`;
      let left = REQUESTS;
      const client = async (): Promise<void> => {
        while (left-- > 0)
          expect((await call(`${base}/v1/chat/completions`, { body: chatBody('m1') })).status).toBe(200);
      };
      await Promise.all(Array.from({ length: CLIENTS }, client));
      const text = (await call(`http://127.0.0.1:${gateway.adminPort}/metrics`)).text;
      const selections = text
        .split('\n')
        .filter((l) => l.startsWith('grid_gateway_selections_total{'))
        .join(' ');
      // Every request has ended: nothing is left counted against either candidate.
      if (localLoad) {
        expect(metricSample(text, 'grid_gateway_candidate_in_flight{cluster="fast"}')).toBe(0);
        expect(metricSample(text, 'grid_gateway_candidate_in_flight{cluster="slow"}')).toBe(0);
      } else {
        expect(text).not.toContain('grid_gateway_candidate_in_flight{');
      }
      return { ...served, selections };
    } finally {
      await gateway.close();
      await Promise.all([fast.close(), slow.close()]);
      await cleanup();
    }
  }

  it('sends measurably more of the burst to the fast candidate with local_load than without', async () => {
    const off = await run(false);
    const on = await run(true);
    expect(off.fast + off.slow).toBe(REQUESTS);
    expect(on.fast + on.slow).toBe(REQUESTS);
    const shareOff = off.fast / REQUESTS;
    const shareOn = on.fast / REQUESTS;
    const summary = `fast served ${off.fast}/${REQUESTS} off, ${on.fast}/${REQUESTS} on (${on.selections})`;
    // Off, one seeded draw per request over equal weights: about half, whatever the timing.
    expect(shareOff, summary).toBeGreaterThan(0.35);
    expect(shareOff, summary).toBeLessThan(0.65);
    // On, the slow candidate carries the clients waiting on it, so a pair of draws leaves it unless both land there
    // (one pair in four): about three quarters. Shares of counts, not latencies: a loaded machine slows both alike.
    expect(shareOn, summary).toBeGreaterThan(0.65);
    expect(shareOn - shareOff, summary).toBeGreaterThan(0.15);
  }, 60_000);
});
