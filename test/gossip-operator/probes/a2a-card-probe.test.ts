// The AgentToAgentProvider probe against real A2A agents built with the official `@a2a-js/sdk` (a2a-sdk-agents.ts):
// the 1.0 card at agent-card.json, the v0.3 card at the older agent.json, bearer tokens and TLS; and every failure
// with the path it happened at and a clear reason: no card, a refused token, a card missing its name, bad JSON, an
// oversized card, an endpoint that is not there or never answers.
import { afterEach, describe, expect, it } from 'vitest';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import { createCertificateAuthority, createServerCertificate } from '../../../daemons/shared/tls.ts';
import { cardProbeReason } from '../../../daemons/gossip-operator/controllers/agent-to-agent-provider.ts';
import {
  type A2aCardProbeResult,
  compareVersions,
  MAX_CARD_BYTES,
  MAX_DESCRIPTION_CHARS,
  parseAgentCard,
  probeAgentCard,
} from '../../../daemons/gossip-operator/probes/a2a-card-probe.ts';
import { closedPort } from '../../closed-port.ts';
import { type A2aAgent, type A2aAgentOptions, STREAMING_SKILL, startA2aAgent } from './a2a-sdk-agents.ts';
import { startServer, type TestServer } from './servers.ts';

const closers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c.close()));
});
async function agent(options: A2aAgentOptions = {}): Promise<A2aAgent> {
  const started = await startA2aAgent(options);
  closers.push(started);
  return started;
}
async function server(handler: Parameters<typeof startServer>[0]): Promise<TestServer> {
  const started = await startServer(handler);
  closers.push(started);
  return started;
}
const failed = (result: A2aCardProbeResult) => {
  if (result.ok) throw new Error(`expected a failed probe, got ${JSON.stringify(result)}`);
  return result;
};

const SKILLS = [
  STREAMING_SKILL,
  {
    id: 'review-document',
    name: 'Review a document',
    description: 'Reads a document and lists its problems.',
    tags: ['documents'],
  },
];

describe('A2A card probe against agents built with @a2a-js/sdk', () => {
  it('reads the 1.0 card at /.well-known/agent-card.json, asking for A2A-Version 1.0', async () => {
    const a = await agent({ name: 'claims-agent', skills: SKILLS });
    const result = await probeAgentCard({ endpoint: a.url, timeoutMs: 3000 });
    expect(result).toEqual({
      ok: true,
      cardPath: '/.well-known/agent-card.json',
      card: {
        name: 'claims-agent',
        skills: SKILLS.map(({ id, name, description }) => ({ id, name, description })),
        capabilities: { streaming: true, pushNotifications: false },
        interfaces: [
          { url: a.url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
          { url: a.url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
        ],
        protocolVersion: '1.0',
        shape: '1.0',
      },
    });
    expect(a.seen).toEqual([{ http: 'GET', path: '/.well-known/agent-card.json', a2aVersion: '1.0' }]);
  });

  it('falls back to /.well-known/agent.json on a 404 and reads the v0.3 card the SDK translates', async () => {
    const a = await agent({ cardPath: 'agent.json', skills: SKILLS, pushNotifications: true });
    const result = await probeAgentCard({ endpoint: a.url, timeoutMs: 3000 });
    expect(result).toMatchObject({
      ok: true,
      cardPath: '/.well-known/agent.json',
      card: {
        skills: SKILLS.map(({ id, name, description }) => ({ id, name, description })),
        capabilities: { streaming: true, pushNotifications: true },
        // v0.3: one url with its preferredTransport and the card's own protocolVersion.
        interfaces: [{ url: a.url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' }],
        protocolVersion: '0.3',
        shape: '0.3',
      },
    });
    expect(a.seen.map((s) => s.path)).toEqual(['/.well-known/agent-card.json', '/.well-known/agent.json']);
  });

  it('reads the card below an endpoint with a path', async () => {
    const a = await agent({ basePath: '/agents/claims' });
    expect(await probeAgentCard({ endpoint: a.url, timeoutMs: 3000 })).toMatchObject({
      ok: true,
      card: { skills: [{ id: STREAMING_SKILL.id }] },
    });
    expect(a.seen[0]?.path).toBe('/agents/claims/.well-known/agent-card.json');
  });

  it('sends the bearer token, and reports a refused one as A2aAuthRejected without trying the older path', async () => {
    const a = await agent({ requireToken: 'agent-tok-1' });
    expect(await probeAgentCard({ endpoint: a.url, bearerToken: 'agent-tok-1', timeoutMs: 3000 })).toMatchObject({
      ok: true,
    });
    expect(a.seen[0]?.authorization).toBe('Bearer agent-tok-1');
    const refused = failed(await probeAgentCard({ endpoint: a.url, bearerToken: 'wrong-tok', timeoutMs: 3000 }));
    expect(refused).toEqual({
      ok: false,
      reason: 'http_status',
      status: 401,
      cardPath: '/.well-known/agent-card.json',
      detail: 'GET /.well-known/agent-card.json answered HTTP 401',
    });
    expect(cardProbeReason(refused)).toBe('A2aAuthRejected');
    expect(a.seen).toHaveLength(2);
    // No token at all is refused the same way; neither token appears in what the probe reports.
    expect(failed(await probeAgentCard({ endpoint: a.url, timeoutMs: 3000 })).status).toBe(401);
    expect(JSON.stringify(refused)).not.toMatch(/tok/);
  });

  it('reads the card over TLS with the CA it is given, and fails closed without it', async () => {
    const ca = await createCertificateAuthority();
    const leaf = await createServerCertificate(ca, { commonName: 'agent', sans: ['127.0.0.1'] });
    const a = await agent({ tls: { cert: leaf.certPem, key: leaf.keyPem } });
    expect(a.url).toMatch(/^https:/);
    expect(await probeAgentCard({ endpoint: a.url, tls: { ca: ca.certPem }, timeoutMs: 3000 })).toMatchObject({
      ok: true,
    });
    const untrusted = failed(await probeAgentCard({ endpoint: a.url, timeoutMs: 3000 }));
    expect(untrusted).toMatchObject({ reason: 'tls', cardPath: '/.well-known/agent-card.json' });
    expect(cardProbeReason(untrusted)).toBe('A2aEndpointUnreachable');
  });

  it('serves an agent the SDK client can stream from: several events over time, a task that completes and can be fetched', async () => {
    const a = await agent({ steps: 3, stepDelayMs: 20 });
    const client = await new ClientFactory().createFromUrl(a.url);
    const cases: string[] = [];
    let taskId = '';
    for await (const event of client.sendMessageStream({
      tenant: '',
      message: {
        messageId: 'm-1',
        contextId: '',
        taskId: '',
        role: Role.ROLE_USER,
        parts: [
          { content: { $case: 'text', value: 'three little words' }, metadata: undefined, filename: '', mediaType: '' },
        ],
        metadata: undefined,
        extensions: [],
        referenceTaskIds: [],
      },
      configuration: undefined,
      metadata: undefined,
    })) {
      cases.push(event.payload?.$case ?? '');
      if (event.payload?.$case === 'task') taskId = event.payload.value.id;
    }
    expect(cases).toEqual([
      'task',
      'statusUpdate',
      'artifactUpdate',
      'artifactUpdate',
      'artifactUpdate',
      'statusUpdate',
    ]);
    const task = await client.getTask({ tenant: '', id: taskId, historyLength: undefined });
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(task.artifacts[0]?.parts.map((p) => (p.content?.$case === 'text' ? p.content.value : ''))).toEqual([
      'chunk 1/3: 3 words',
      'chunk 2/3: 3 words',
      'chunk 3/3: 3 words',
    ]);
    expect(a.tasks).toEqual([taskId]);
  });

  it('answers v0.3 callers too: message/send, tasks/cancel of a running task, tasks/get, and an unknown task', async () => {
    const a = await agent({ steps: 20, stepDelayMs: 50 });
    const call = async (id: number, method: string, params: unknown) =>
      (await (
        await fetch(a.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id, method, params }),
        })
      ).json()) as { result?: { id: string; status: { state: string } }; error?: { code: number } };
    const sent = await call(1, 'message/send', {
      message: { kind: 'message', messageId: 'm-1', role: 'user', parts: [{ kind: 'text', text: 'a b' }] },
      configuration: { blocking: false },
    });
    const id = sent.result!.id;
    expect(sent.result?.status.state).toBe('submitted');
    expect((await call(2, 'tasks/cancel', { id })).result?.status.state).toBe('canceled');
    expect((await call(3, 'tasks/get', { id })).result?.status.state).toBe('canceled');
    expect((await call(4, 'tasks/get', { id: 'no-such-task' })).error?.code).toBe(-32001);
    expect(a.seen.map((s) => s.rpc)).toEqual(['message/send', 'tasks/cancel', 'tasks/get', 'tasks/get']);
  });
});

describe('A2A card probe failures, each with its path and a clear reason', () => {
  it('reports no card at either path as A2aAgentCardNotFound', async () => {
    // A real agent, probed at the wrong endpoint: its card is below /agents/claims.
    const a = await agent({ basePath: '/agents/claims' });
    const result = failed(await probeAgentCard({ endpoint: a.url.replace('/agents/claims', ''), timeoutMs: 3000 }));
    expect(result).toEqual({
      ok: false,
      reason: 'not_found',
      status: 404,
      cardPath: '/.well-known/agent.json',
      detail: 'no agent card: GET /.well-known/agent-card.json and GET /.well-known/agent.json both answered HTTP 404',
    });
    expect(cardProbeReason(result)).toBe('A2aAgentCardNotFound');
  });

  it('reports a card missing its name as A2aAgentCardInvalid, naming the field', async () => {
    const { name: _name, ...nameless } = (await (
      await fetch(`${(await agent()).url}/.well-known/agent-card.json`)
    ).json()) as Record<string, unknown>;
    const a = await agent({ cardBody: JSON.stringify(nameless) });
    const result = failed(await probeAgentCard({ endpoint: a.url, timeoutMs: 3000 }));
    expect(result).toEqual({
      ok: false,
      reason: 'invalid_card',
      cardPath: '/.well-known/agent-card.json',
      detail: 'the card at /.well-known/agent-card.json: name is missing or not a non-blank string',
    });
    expect(cardProbeReason(result)).toBe('A2aAgentCardInvalid');
  });

  it('reports a card that is not JSON as A2aAgentCardInvalid', async () => {
    const a = await agent({ cardBody: '{"name": "claims-agent", "skills": [' });
    expect(failed(await probeAgentCard({ endpoint: a.url, timeoutMs: 3000 }))).toMatchObject({
      reason: 'invalid_card',
      detail: 'the card at /.well-known/agent-card.json is not JSON',
    });
  });

  it(`abandons a card over ${MAX_CARD_BYTES} bytes as A2aAgentCardInvalid`, async () => {
    const huge = JSON.stringify({ name: 'big', skills: [], description: 'x'.repeat(MAX_CARD_BYTES) });
    const a = await agent({ cardBody: huge });
    const result = failed(await probeAgentCard({ endpoint: a.url, timeoutMs: 3000 }));
    expect(result).toMatchObject({
      reason: 'too_large',
      cardPath: '/.well-known/agent-card.json',
      detail: `GET /.well-known/agent-card.json: response exceeds ${MAX_CARD_BYTES} bytes`,
    });
    expect(cardProbeReason(result)).toBe('A2aAgentCardInvalid');
  });

  it('does not fall back on an error other than 404: a 500 is A2aAgentCardHttpError', async () => {
    const s = await server((_req, res) => void res.writeHead(500).end());
    const result = failed(await probeAgentCard({ endpoint: s.url, timeoutMs: 3000 }));
    expect(result).toMatchObject({
      reason: 'http_status',
      status: 500,
      detail: 'GET /.well-known/agent-card.json answered HTTP 500',
    });
    expect(cardProbeReason(result)).toBe('A2aAgentCardHttpError');
    expect(s.requests).toHaveLength(1);
  });

  it('does not follow a redirect (it could carry the token elsewhere)', async () => {
    const s = await server((_req, res) => void res.writeHead(302, { location: 'http://elsewhere.example/card' }).end());
    expect(failed(await probeAgentCard({ endpoint: s.url, bearerToken: 't', timeoutMs: 3000 }))).toMatchObject({
      reason: 'http_status',
      status: 302,
    });
  });

  it('reports an endpoint that is not there as A2aEndpointUnreachable', async () => {
    const result = failed(
      await probeAgentCard({ endpoint: `http://127.0.0.1:${await closedPort()}`, timeoutMs: 3000 }),
    );
    expect(result).toMatchObject({ reason: 'unreachable', cardPath: '/.well-known/agent-card.json' });
    expect(cardProbeReason(result)).toBe('A2aEndpointUnreachable');
  });

  it('gives up on an agent that never answers within the timeout, both paths sharing it', async () => {
    const s = await server(() => undefined);
    const started = Date.now();
    expect(failed(await probeAgentCard({ endpoint: s.url, timeoutMs: 300 }))).toMatchObject({ reason: 'timeout' });
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe('agent card checks', () => {
  const card = (extra: Record<string, unknown>) => ({
    name: 'a',
    skills: [{ id: 's1', name: 'S1' }],
    capabilities: {},
    supportedInterfaces: [{ url: 'http://a', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    ...extra,
  });

  it.each([
    ['an array', [], 'is not a JSON object'],
    ['a blank name', card({ name: '  ' }), 'name is missing or not a non-blank string'],
    ['no skills', card({ skills: undefined }), 'skills is missing or not an array'],
    ['a skill without an id', card({ skills: [{ name: 'x' }] }), 'skills[0].id is missing'],
    [
      'a skill id over 128 characters',
      card({ skills: [{ id: 'x'.repeat(129), name: 'x' }] }),
      'skills[0].id is missing, blank, longer than 128',
    ],
    [
      'a repeated skill id',
      card({
        skills: [
          { id: 'a', name: 'x' },
          { id: 'b', name: 'y' },
          { id: 'a', name: 'z' },
        ],
      }),
      'skills[2].id repeats the id of skills[0]',
    ],
    ['a skill without a name', card({ skills: [{ id: 'a' }] }), 'skills[0].name is missing'],
    [
      'a description that is a number',
      card({ skills: [{ id: 'a', name: 'x', description: 3 }] }),
      'skills[0].description is not a string',
    ],
    [
      'tags that are not strings',
      card({ skills: [{ id: 'a', name: 'x', tags: [1] }] }),
      'skills[0].tags is not an array',
    ],
    ['capabilities that are a list', card({ capabilities: [] }), 'capabilities is not an object'],
    ['streaming as a string', card({ capabilities: { streaming: 'yes' } }), 'capabilities.streaming is not a boolean'],
    ['no interface at all', card({ supportedInterfaces: undefined }), 'the card names no interface'],
    ['an empty supportedInterfaces', card({ supportedInterfaces: [] }), 'supportedInterfaces is not a non-empty array'],
    [
      'an interface without a binding',
      card({ supportedInterfaces: [{ url: 'http://a', protocolVersion: '1.0' }] }),
      'supportedInterfaces[0].protocolBinding is missing',
    ],
    [
      'an interface without a version',
      card({ supportedInterfaces: [{ url: 'http://a', protocolBinding: 'JSONRPC' }] }),
      'supportedInterfaces[0].protocolVersion is missing',
    ],
    [
      'a version that is not one',
      card({ supportedInterfaces: [{ url: 'http://a', protocolBinding: 'JSONRPC', protocolVersion: 'latest' }] }),
      'supportedInterfaces[0].protocolVersion "latest" is not a version',
    ],
    ['a 0.3 url with a space', card({ supportedInterfaces: undefined, url: 'http://a b' }), 'url is missing, blank'],
    [
      'a 0.3 additional interface without a transport',
      card({ supportedInterfaces: undefined, url: 'http://a', additionalInterfaces: [{ url: 'http://b' }] }),
      'additionalInterfaces[0].transport is missing',
    ],
  ])('refuses %s', (_what, document, problem) => {
    const result = parseAgentCard(document);
    expect(typeof result).toBe('string');
    expect(result).toContain(problem);
  });

  it('reads a 0.3 card: preferredTransport defaults to JSONRPC, additional interfaces share the card version', () => {
    expect(
      parseAgentCard(
        card({
          supportedInterfaces: undefined,
          url: 'http://a/rpc',
          protocolVersion: '0.3.0',
          additionalInterfaces: [{ url: 'http://a/rest', transport: 'HTTP+JSON' }],
        }),
      ),
    ).toMatchObject({
      shape: '0.3',
      protocolVersion: '0.3.0',
      interfaces: [
        { url: 'http://a/rpc', protocolBinding: 'JSONRPC', protocolVersion: '0.3.0' },
        { url: 'http://a/rest', protocolBinding: 'HTTP+JSON', protocolVersion: '0.3.0' },
      ],
    });
  });

  it('keeps descriptions cut to 512 characters, drops empty ones, and reports the newest interface version', () => {
    const parsed = parseAgentCard(
      card({
        skills: [
          { id: 'a', name: 'x', description: 'd'.repeat(600) },
          { id: 'b', name: 'y', description: '' },
        ],
        supportedInterfaces: [
          { url: 'http://a', protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
          { url: 'http://a', protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        ],
      }),
    );
    expect(parsed).toMatchObject({
      skills: [
        { id: 'a', name: 'x', description: 'd'.repeat(MAX_DESCRIPTION_CHARS) },
        { id: 'b', name: 'y' },
      ],
      protocolVersion: '1.0',
      capabilities: { streaming: false, pushNotifications: false },
    });
  });

  it('orders versions by number, not text', () => {
    expect(['1.0', '0.10', '0.3.0', '0.3'].sort(compareVersions)).toEqual(['0.3.0', '0.3', '0.10', '1.0']);
  });
});
