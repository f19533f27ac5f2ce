// The provider gateway over real mTLS with generated certificates: peer_identity_trust first and unconditional,
// provider_route's exact (candidate, model, path) authorization, credential_inject failing closed, and the
// credential reaching the backend while every client-supplied routing, provider and Authorization header is gone.
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request } from 'undici';
import { createLogger } from '../../daemons/shared/log.ts';
import { resolveConfig } from '../../daemons/gateway/config.ts';
import { hostHeaderOf } from '../../daemons/gateway/filters/load-balancer.ts';
import { peerMatches } from '../../daemons/gateway/filters/peer-identity-trust.ts';
import { startGateway } from '../../daemons/gateway/server.ts';
import type { GatewayInstance } from '../../daemons/gateway/server.ts';
import { startSim } from '../../daemons/sim/server.ts';
import type { SimServer } from '../../daemons/sim/server.ts';
import { stableId } from '../../schemas/fnv1a.ts';
import { EDGE_ORG, PROVIDER_SNI, call, chatBody, makePki, providerConfig, tempDir } from './helpers.ts';
import type { Pki } from './helpers.ts';

const TOKEN = 'backend-token-4d1e';
const CANDIDATE = stableId('inference_model', 'm1', 'east', 'prov-east');
const M2_CANDIDATE = stableId('inference_model', 'm2', 'east', 'prov-east');
const INFERENCE_PATHS = ['/v1/chat/completions', '/v1/responses'];
const CRED = (name: string) => ({
  strategy: 'bearer_token',
  secretRef: { name, namespace: 'grid-system', key: 'token' },
});
const NO_CRED_CANDIDATE = stableId('inference_model', 'm1', 'east', 'prov-missing');
const EMPTY_CRED_CANDIDATE = stableId('inference_model', 'm1', 'east', 'prov-empty');
const REQUEST_ID = '00061a2b3c4d5e6f9abc000000000001';
const REVISION = 'ab'.repeat(32);

let pki: Pki;
let sim: SimServer;
let gateway: GatewayInstance;
let cleanup: () => Promise<void>;
let url: string;
const logs: string[] = [];
const agents: Agent[] = [];

function agent(identity: { cert: string; key: string } | null): Agent {
  const a = new Agent({
    connect: {
      ca: pki.caPem,
      servername: PROVIDER_SNI,
      ...(identity === null ? {} : { cert: identity.cert, key: identity.key }),
    },
  });
  agents.push(a);
  return a;
}

const hop = (overrides: Record<string, string | undefined> = {}): Record<string, string> => {
  const headers: Record<string, string | undefined> = {
    'x-ai-routing-candidate': CANDIDATE,
    'x-ai-routing-request-id': REQUEST_ID,
    'x-ai-routing-revision': REVISION,
    ...overrides,
  };
  return Object.fromEntries(Object.entries(headers).filter((e): e is [string, string] => e[1] !== undefined));
};

let edge: Agent;
const send = (
  headers: Record<string, string>,
  body: unknown = chatBody('m1'),
  path = '/v1/chat/completions',
  dispatcher = edge,
) => call(`${url}${path}`, { body, headers, dispatcher });

beforeAll(async () => {
  let dir: string;
  ({ dir, cleanup } = await tempDir('provider'));
  pki = await makePki(dir);
  sim = await startSim({ name: 'backend-east', models: ['m1', 'm2'], token: TOKEN });
  await writeFile(join(dir, 'token'), `${TOKEN}\n`);
  await writeFile(join(dir, 'empty-token'), '  \n');
  const config = providerConfig({
    pki,
    routes: [
      {
        candidate_id: CANDIDATE,
        model: 'm1',
        cluster: 'backend',
        paths: INFERENCE_PATHS,
        credential: CRED('cred-east'),
      },
      {
        candidate_id: M2_CANDIDATE,
        model: 'm2',
        cluster: 'backend',
        paths: ['/v1/embeddings'],
        credential: CRED('cred-east'),
      },
      {
        candidate_id: NO_CRED_CANDIDATE,
        model: 'm1',
        cluster: 'backend',
        paths: INFERENCE_PATHS,
        credential: CRED('cred-missing'),
      },
      {
        candidate_id: EMPTY_CRED_CANDIDATE,
        model: 'm1',
        cluster: 'backend',
        paths: INFERENCE_PATHS,
        credential: CRED('cred-empty'),
      },
    ],
    credentials: [
      { strategy: 'bearer_token', name: 'cred-east', namespace: 'grid-system', key: 'token', file: join(dir, 'token') },
      {
        strategy: 'bearer_token',
        name: 'cred-empty',
        namespace: 'grid-system',
        key: 'token',
        file: join(dir, 'empty-token'),
      },
    ],
    clusters: [{ name: 'backend', endpoints: [`127.0.0.1:${sim.port}`] }],
  });
  const logger = createLogger({
    name: 'gateway',
    level: 'debug',
    destination: { write: (line: string) => void logs.push(line) },
  });
  gateway = await startGateway(resolveConfig(config, 'provider.json'), {
    configDir: dir,
    logger,
    processMetrics: false,
  });
  url = `https://127.0.0.1:${gateway.listeners[0]!.port}`;
  edge = agent(pki.edgePem);
});

afterAll(async () => {
  await Promise.all(agents.map((a) => a.close()));
  await gateway?.close();
  await sim?.close();
  expect(logs.join('')).not.toContain(TOKEN);
  await cleanup();
});

describe('peer_identity_trust', () => {
  it('lets a trusted edge through and injects exactly one backend credential', async () => {
    const reply = await send({ ...hop(), authorization: 'Bearer client-supplied-key' });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-sim-provider']).toBe('backend-east');
    expect(reply.text).not.toContain(TOKEN);
  });

  it('answers 403 to a certificate from the right CA that no trusted_peers entry matches', async () => {
    const reply = await send(hop(), chatBody('m1'), '/v1/chat/completions', agent(pki.strangerPem));
    expect(reply.status).toBe(403);
    expect(reply.json().error.code).toBe('peer_not_trusted');
  });

  it('refuses the TLS handshake without a client certificate or with one from another CA', async () => {
    const before = sim.requests.length;
    await expect(send(hop(), chatBody('m1'), '/v1/chat/completions', agent(null))).rejects.toThrow();
    await expect(send(hop(), chatBody('m1'), '/v1/chat/completions', agent(pki.roguePem))).rejects.toThrow();
    expect(sim.requests.length).toBe(before);
    expect((await send(hop())).status).toBe(200);
  });

  it('guards /v1/models too: trusted peers see the routed models, others get 403', async () => {
    const trusted = await call(`${url}/v1/models`, { dispatcher: edge });
    expect(trusted.json().data.map((m: { id: string }) => m.id)).toEqual(['m1', 'm2']);
    expect((await call(`${url}/v1/models`, { dispatcher: agent(pki.strangerPem) })).status).toBe(403);
  });

  it('matches an entry only when every field it sets matches', () => {
    const peer = { certDigest: 'a'.repeat(64), organizations: [EDGE_ORG], serialNumber: '0a1b' };
    expect(peerMatches(peer, { cert_digest: 'a'.repeat(64), organization: EDGE_ORG })).toBe(true);
    expect(peerMatches(peer, { cert_digest: 'b'.repeat(64), organization: EDGE_ORG })).toBe(false);
    expect(peerMatches(peer, { organization: 'other' })).toBe(false);
    expect(peerMatches(peer, { serial_number: '0A:1B' })).toBe(true);
    expect(peerMatches(peer, {})).toBe(false);
  });
});

describe('provider_route', () => {
  it('strips routing, provider and client auth headers and writes provider attribution', async () => {
    sim.requests.length = 0;
    const reply = await send({
      ...hop(),
      'x-ai-provider-attribution': 'spoofed',
      'x-ai-routing-extra': 'x',
      authorization: 'Bearer nope',
    });
    expect(reply.status).toBe(200);
    const seen = sim.requests.at(-1)!.headers;
    expect(seen).toEqual({
      'x-gateway-model-name': 'm1',
      'x-ai-provider-request-id': REQUEST_ID,
      'x-ai-provider-attribution': 'east1',
      'x-ai-provider-routing-revision': REVISION,
    });
  });

  it.each([
    ['a missing candidate', { 'x-ai-routing-candidate': undefined }, 403, 'invalid_routing_candidate'],
    ['a missing request id', { 'x-ai-routing-request-id': undefined }, 403, 'invalid_routing_request_id'],
    ['a malformed request id', { 'x-ai-routing-request-id': 'ABC' }, 403, 'invalid_routing_request_id'],
    ['a malformed revision', { 'x-ai-routing-revision': 'not-a-digest' }, 403, 'invalid_routing_revision'],
    ['an unknown candidate', { 'x-ai-routing-candidate': 'ffffffff' }, 403, 'unknown_candidate'],
  ])('answers %s with %i', async (_what, overrides, status, code) => {
    const reply = await send(hop(overrides));
    expect(reply.status).toBe(status);
    expect(reply.json().error.code).toBe(code);
  });

  it('accepts a hop without a revision header (legacy overlay mode)', async () => {
    expect((await send(hop({ 'x-ai-routing-revision': undefined }))).status).toBe(200);
  });

  it('checks the hop context before the body: a bad hop with malformed JSON is still 403', async () => {
    const reply = await send(hop({ 'x-ai-routing-candidate': undefined }), '{"model":');
    expect(reply.status).toBe(403);
  });

  it('answers 400 without a model, 404 for a model or path outside the route', async () => {
    expect((await send(hop(), { messages: [] })).status).toBe(400);
    const otherModel = await send(hop(), chatBody('m2'));
    expect(otherModel.status).toBe(404);
    expect(otherModel.json().error.code).toBe('model_not_routed');
    const m2 = { 'x-ai-routing-candidate': M2_CANDIDATE };
    const wrongPath = await send(hop(m2), chatBody('m2'));
    expect(wrongPath.status).toBe(404);
    expect(wrongPath.json().error.code).toBe('path_not_routed');
    expect((await send(hop(m2), { model: 'm2', input: 'x' }, '/v1/embeddings')).status).toBe(200);
  });

  it('matches paths exactly, as Praxis AI: a listed path allows neither a sub-path nor a trailing slash', async () => {
    expect((await send(hop(), { model: 'm1', input: 'x' }, '/v1/responses')).status).toBe(200);
    const before = sim.requests.length;
    for (const path of ['/v1/chat/completions/', '/v1/chat/completions/x']) {
      expect((await send(hop(), chatBody('m1'), path)).status, path).toBe(404);
    }
    // An embeddings route of m1's candidate is not listed: exact paths, not a shared default.
    const notListed = await send(hop(), { model: 'm1', input: 'x' }, '/v1/embeddings');
    expect(notListed.status).toBe(404);
    expect(notListed.json().error.code).toBe('path_not_routed');
    // The query string is not part of the path.
    expect((await send(hop(), chatBody('m1'), '/v1/chat/completions?trace=1')).status).toBe(200);
    // A stored-response call (/v1/responses/{id}) is not a listed path: 400 without a model, 404 with one named.
    const read = await send(hop(), { model: 'm1', input: 'x' }, '/v1/responses/resp_123');
    expect(read.status).toBe(400);
    const named = await send(
      { ...hop(), 'x-gateway-model-name': 'm1' },
      { model: 'm1', input: 'x' },
      '/v1/responses/resp_123',
    );
    expect(named.status).toBe(404);
    expect(named.json().error.code).toBe('path_not_routed');
    expect(sim.requests.length).toBe(before + 1);
  });
});

describe('upstream Host without a cluster authority', () => {
  it("is the endpoint's host, with the port unless it is the scheme's default", () => {
    expect(hostHeaderOf('api.openai.com:443', true)).toBe('api.openai.com');
    expect(hostHeaderOf('api.openai.com:8443', true)).toBe('api.openai.com:8443');
    expect(hostHeaderOf('sim-west-llm.grid-system.svc.cluster.local:80', false)).toBe(
      'sim-west-llm.grid-system.svc.cluster.local',
    );
    expect(hostHeaderOf('backend:443', false)).toBe('backend:443');
    expect(hostHeaderOf('[2001:db8::1]:443', true)).toBe('[2001:db8::1]');
  });
});

describe('credential_inject', () => {
  it.each([
    ['is not configured', NO_CRED_CANDIDATE],
    ['has an empty file', EMPTY_CRED_CANDIDATE],
  ])('fails closed with 503 when the route credential %s', async (_what, candidate) => {
    const before = sim.requests.length;
    const reply = await send(hop({ 'x-ai-routing-candidate': candidate }));
    expect(reply.status).toBe(503);
    expect(reply.json().error.code).toBe('credential_unavailable');
    expect(sim.requests.length).toBe(before);
  });
});

describe('streaming through the provider', () => {
  it('streams SSE from the backend to the edge', async () => {
    const res = await request(`${url}/v1/chat/completions`, {
      method: 'POST',
      dispatcher: edge,
      headers: { ...hop(), 'content-type': 'application/json' },
      body: JSON.stringify(chatBody('m1', { stream: true })),
    });
    expect(res.statusCode).toBe(200);
    const text = await res.body.text();
    expect(text.match(/^data: /gm)?.length).toBeGreaterThan(10);
    expect(text).toContain('data: [DONE]');
  });
});
