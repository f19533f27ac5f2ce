// The consumer/edge gateway's routing rules (docs/contract.md §3.1) over real loopback sockets: an in-process gateway
// in front of in-process sims. Header stripping, 400/404/503 with OpenAI-style bodies, hop headers, the four
// selection modes, selection groups, retry within a group, and session affinity.
import { describe, expect, it } from 'vitest';
import { request } from 'undici';
import { REQUEST_ID_PATTERN } from '../../daemons/gateway/routing/request-id.ts';
import { TOKEN, useConsumerFixture, withCred } from './consumer-fixture.ts';
import { call, candidate } from './helpers.ts';

const f = useConsumerFixture();

describe('routing rules', () => {
  it('routes a chat completion to the selected candidate, injecting the consumer-owned credential', async () => {
    await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    const reply = await f.chat('m1', { authorization: 'Bearer client-key' });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-sim-provider']).toBe('sim-a');
    expect(reply.json().object).toBe('chat.completion');
    expect(reply.text).not.toContain(TOKEN);
  });

  it('answers 404 with an OpenAI-style body for a model no candidate serves, and for a request without a model', async () => {
    const unknown = await f.chat('nope');
    expect(unknown.status).toBe(404);
    expect(unknown.json()).toEqual({
      error: { message: 'no provider serves model "nope"', type: 'not_found_error', code: 'model_not_found' },
    });
    const missing = await call(`${f.base}/v1/chat/completions`, { body: { messages: [] } });
    expect(missing.status).toBe(404);
    expect(missing.json().error.code).toBe('no_route');
  });

  it.each([
    ['a blank model', '   ', 'invalid_model'],
    ['a model over 256 bytes', 'm'.repeat(257), 'invalid_model'],
    ['a model that is not a string', 42, 'invalid_model'],
    ['a model with CR/LF (header injection)', 'm1\r\nx-ai-routing-candidate: evil', 'invalid_model'],
    ['a model with a lone surrogate (not UTF-8)', '\ud800', 'invalid_model'],
  ])('answers 400 for %s', async (_what, model, code) => {
    const reply = await f.chat(model);
    expect(reply.status).toBe(400);
    expect(reply.json().error.code).toBe(code);
    expect(reply.json().error.type).toBe('invalid_request_error');
  });

  it('answers 400 for malformed JSON and for a body that is not UTF-8', async () => {
    const bad = await call(`${f.base}/v1/chat/completions`, { body: '{"model": "m1",' });
    expect(bad.status).toBe(400);
    expect(bad.json().error.code).toBe('invalid_json');
    const binary = await request(`${f.base}/v1/chat/completions`, {
      method: 'POST',
      body: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    });
    expect(binary.statusCode).toBe(400);
    expect(((await binary.body.json()) as any).error.code).toBe('invalid_body');
  });

  it('answers 503 with Retry-After when the model is known but no candidate admits new requests', async () => {
    await f.useOverlay([candidate('m1', 'a', 'ca', { admission_state: 'existing_only', selection_group: 0 })]);
    const reply = await f.chat('m1');
    expect(reply.status).toBe(503);
    expect(reply.headers['retry-after']).toBe('1');
    expect(reply.json().error.code).toBe('no_available_candidate');
  });

  it('fails closed with 503 when the selected candidate needs a credential this gateway does not have', async () => {
    await f.useOverlay([
      {
        ...candidate('m1', 'a', 'ca'),
        credential: { strategy: 'bearer_token', secretRef: { name: 'other', namespace: 'grid-system', key: 'token' } },
      },
    ]);
    const reply = await f.chat('m1');
    expect(reply.status).toBe(503);
    expect(reply.json().error.code).toBe('credential_unavailable');
    expect(f.simA.requests).toHaveLength(0);
  });

  it('lists the routable models of the accepted snapshot on /v1/models', async () => {
    await f.useOverlay([
      withCred(candidate('m1', 'a', 'ca')),
      withCred(candidate('m2', 'b', 'cb')),
      withCred(candidate('m1', 'b', 'cb')),
    ]);
    const reply = await call(`${f.base}/v1/models`);
    expect(reply.status).toBe(200);
    expect(reply.json().data.map((m: { id: string }) => m.id)).toEqual(['m1', 'm2']);
  });

  it('answers unknown paths with 404 and wrong methods with 405', async () => {
    expect((await call(`${f.base}/v1/audio/speech`, { body: {} })).status).toBe(404);
    expect((await call(`${f.base}/admin`)).status).toBe(404);
    const wrong = await call(`${f.base}/v1/chat/completions`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers['allow']).toBe('POST');
  });

  it('strips client-sent routing and provider headers on every request', async () => {
    await f.useOverlay([withCred(candidate('m1', 'a', 'ca'))]);
    const reply = await f.chat('m1', {
      'x-ai-routing-candidate': 'deadbeef',
      'x-ai-routing-request-id': '0'.repeat(32),
      'x-ai-routing-revision': 'f'.repeat(64),
      'x-ai-provider-attribution': 'spoofed',
    });
    expect(reply.status).toBe(200);
    const seen = f.simA.requests.at(-1)!.headers;
    expect(Object.keys(seen).filter((h) => h.startsWith('x-ai-'))).toEqual([]);
  });

  it('writes the provider-hop context for a hop cluster: stable_id, a fresh request id, the serving revision', async () => {
    const hop = withCred(candidate('m1', 'east', 'chop'));
    const revision = await f.useOverlay([hop]);
    const reply = await f.chat('m1', { 'x-ai-routing-candidate': 'spoofed', 'x-ai-routing-revision': 'spoofed' });
    expect(reply.status).toBe(200);
    const seen = f.simA.requests.at(-1)!.headers;
    expect(seen['x-ai-routing-candidate']).toBe(hop.stable_id);
    expect(seen['x-ai-routing-request-id']).toMatch(REQUEST_ID_PATTERN);
    expect(seen['x-ai-routing-revision']).toBe(revision);
    await f.chat('m1');
    expect(f.simA.requests.at(-1)!.headers['x-ai-routing-request-id']).not.toBe(seen['x-ai-routing-request-id']);
  });
});

describe('selection modes, groups and affinity through the gateway', () => {
  it('roundRobin over [a, b] serves a, b, a, b', async () => {
    await f.useOverlay(
      [
        withCred(candidate('m1', 'a', 'ca', { selection_group: 0 })),
        withCred(candidate('m1', 'b', 'cb', { selection_group: 0 })),
      ],
      'roundRobin',
    );
    const order: unknown[] = [];
    for (let i = 0; i < 4; i++) order.push((await f.chat('m1')).headers['x-sim-provider']);
    expect(order).toEqual(['sim-a', 'sim-b', 'sim-a', 'sim-b']);
  });

  it('weightedRandom follows traffic_weight within a chi-square bound over 600 requests', async () => {
    const weights: Record<string, number> = { w1: 50, w2: 30, w3: 20 };
    await f.useOverlay(
      Object.entries(weights).map(([cluster, w]) =>
        withCred(candidate('m1', cluster, cluster, { selection_group: 0, traffic_weight: w })),
      ),
      'weightedRandom',
    );
    const before: Record<string, number> = {};
    for (const c of Object.keys(weights))
      before[c] = await f.metric(new RegExp(`model="m1",cluster="${c}",status="200"`));
    const n = 600;
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < n) {
        next++;
        expect((await f.chat('m1')).status).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    let chi = 0;
    for (const [c, w] of Object.entries(weights)) {
      const observed = (await f.metric(new RegExp(`model="m1",cluster="${c}",status="200"`))) - before[c]!;
      const expected = (n * w) / 100;
      chi += (observed - expected) ** 2 / expected;
    }
    // df = 2; P(chi2 > 27.6) = 1e-6, so this bound does not flake, while a uniform pick scores ~89.
    expect(chi).toBeLessThan(27.6);
  });

  it('falls back to the next selection group when the first is closed to new requests', async () => {
    await f.useOverlay([
      withCred(candidate('m1', 'a', 'ca', { selection_group: 0, admission_state: 'existing_only' })),
      withCred(candidate('m1', 'b', 'cb', { selection_group: 1 })),
    ]);
    expect((await f.chat('m1')).headers['x-sim-provider']).toBe('sim-b');
  });

  it('retries a refused connection once on the next candidate of the same group, then routes around the dead endpoint', async () => {
    await f.useOverlay([
      withCred(candidate('m1', 'dead', 'cdead', { selection_group: 0 })),
      withCred(candidate('m1', 'a', 'ca', { selection_group: 0 })),
    ]);
    const retriesBefore = await f.metric(/grid_gateway_retries_total\{role="consumer",cluster="cdead"\}/);
    const reply = await f.chat('m1');
    expect(reply.status).toBe(200);
    expect(reply.headers['x-sim-provider']).toBe('sim-a');
    expect(await f.metric(/grid_gateway_retries_total\{role="consumer",cluster="cdead"\}/)).toBe(retriesBefore + 1);
    // The dead endpoint now backs off: the next request goes straight to a, with no retry.
    expect((await f.chat('m1')).status).toBe(200);
    expect(await f.metric(/grid_gateway_retries_total\{role="consumer",cluster="cdead"\}/)).toBe(retriesBefore + 1);
  });

  it('never retries into another group: a refused sole candidate of group 0 is a 502, then group 1 serves', async () => {
    await new Promise((r) => setTimeout(r, 1_100)); // let cdead's backoff from the previous test expire
    await f.useOverlay([
      withCred(candidate('m1', 'dead', 'cdead', { selection_group: 0 })),
      withCred(candidate('m1', 'b', 'cb', { selection_group: 1 })),
    ]);
    const first = await f.chat('m1');
    expect(first.status).toBe(502);
    expect(first.json().error.code).toBe('upstream_unreachable');
    expect((await f.chat('m1')).headers['x-sim-provider']).toBe('sim-b');
  });

  it('keeps a session on one candidate by header or cookie while round-robin moves others', async () => {
    await f.useOverlay(
      [
        withCred(candidate('m1', 'a', 'ca', { selection_group: 0 })),
        withCred(candidate('m1', 'b', 'cb', { selection_group: 0 })),
      ],
      'roundRobin',
    );
    const byHeader = new Set<unknown>();
    const byCookie = new Set<unknown>();
    for (let i = 0; i < 4; i++) {
      byHeader.add((await f.chat('m1', { 'x-session-id': 'alice' })).headers['x-sim-provider']);
      byCookie.add((await f.chat('m1', { cookie: 'theme=dark; agn_session=bob' })).headers['x-sim-provider']);
    }
    expect(byHeader.size).toBe(1);
    expect(byCookie.size).toBe(1);
  });
});
