// A2A through the grid, as a user's agent calls it: the official `@a2a-js/sdk` ClientFactory resolves the agent's
// card from a consumer gateway (a2a_route rewrites its URL to the gateway's), then streams a message and fetches
// the task; across the mTLS provider hop (agent_provider_route, which injects the agent's token and keeps each task
// with the replica that holds it) to two replicas of an agent built with the SDK, each with its own task store.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClientFactory } from '@a2a-js/sdk/client';
import { Role, TaskState } from '@a2a-js/sdk';
import {
  EDGE_ORG,
  PROVIDER_SNI,
  call,
  makePki,
  metricSample,
  payload,
  spawnDaemon,
  startConsumer,
  tempDir,
  waitForPort,
  writeOverlay,
} from './helpers.ts';
import type { Daemon } from './helpers.ts';
import { type A2aAgent, startA2aAgent } from '../gossip-operator/probes/a2a-sdk-agents.ts';

const TOKEN = 'a2a-backend-token-6c1f0e2a';

function userMessage(text: string, id: string) {
  return {
    tenant: '',
    message: {
      messageId: id,
      contextId: '',
      taskId: '',
      role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text' as const, value: text }, metadata: undefined, filename: '', mediaType: '' }],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
}

describe('a2a_route and agent_provider_route: A2A across the grid with the official SDK', { timeout: 60_000 }, () => {
  let cleanup: () => Promise<void>;
  let replicas: A2aAgent[];
  let consumer: { daemon: Daemon; base: string; admin: string };
  const agentUrl = (): string => `${consumer.base}/a2a/claims-agent`;
  const rpc = async (method: string, params: unknown, id = 1): Promise<{ status: number; body: any }> => {
    const reply = await call(agentUrl(), { method: 'POST', body: { jsonrpc: '2.0', id, method, params } });
    return { status: reply.status, body: reply.json() };
  };

  beforeAll(async () => {
    const temp = await tempDir('a2a-route');
    const dir = temp.dir;
    const pki = await makePki(dir);
    replicas = [
      await startA2aAgent({ name: 'claims-agent', requireToken: TOKEN, steps: 3, stepDelayMs: 150 }),
      await startA2aAgent({ name: 'claims-agent', requireToken: TOKEN, steps: 3, stepDelayMs: 150 }),
    ];
    const tokenFile = join(dir, 'agent-token');
    await writeFile(tokenFile, TOKEN, { mode: 0o600 });
    const providerPath = join(dir, 'provider.json');
    await writeFile(
      providerPath,
      JSON.stringify({
        listeners: [
          {
            name: 'provider',
            address: '127.0.0.1:0',
            filter_chains: ['p'],
            tls: {
              certificates: [{ cert_path: pki.providerCertPath, key_path: pki.providerKeyPath }],
              client_ca: { ca_path: pki.caPath },
              client_cert_mode: 'require',
            },
          },
        ],
        filter_chains: [
          {
            name: 'p',
            filters: [
              { filter: 'peer_identity_trust', trusted_peers: [{ organization: EDGE_ORG }] },
              {
                filter: 'agent_provider_route',
                servers: [
                  {
                    protocol: 'a2a',
                    name: 'claims-agent',
                    cluster: 'backend-claims',
                    path: '/',
                    credential: { secretRef: { name: 'agent-token', namespace: 'grid-system', key: 'token' } },
                  },
                ],
                max_body_bytes: 65536,
              },
              {
                filter: 'credential_inject',
                credentials: [
                  {
                    strategy: 'bearer_token',
                    name: 'agent-token',
                    namespace: 'grid-system',
                    key: 'token',
                    file: tokenFile,
                  },
                ],
              },
              {
                filter: 'load_balancer',
                clusters: [{ name: 'backend-claims', endpoints: replicas.map((r) => new URL(r.url).host) }],
              },
            ],
          },
        ],
        admin: { address: '127.0.0.1:0' },
        shutdown_timeout_secs: 2,
      }),
    );
    const provider = spawnDaemon('daemons/gateway/main.ts', ['--config', providerPath]);
    const providerPort = await waitForPort(provider, 'provider');
    const overlayPath = join(dir, 'overlay.json');
    await writeOverlay(overlayPath, payload([]));
    const tls = {
      ca: { ca_path: pki.caPath },
      client_cert: { cert_path: pki.edgeCertPath, key_path: pki.edgeKeyPath },
      sni: PROVIDER_SNI,
      verify: true,
    };
    const consumerPath = join(dir, 'consumer.json');
    await writeFile(
      consumerPath,
      JSON.stringify({
        listeners: [{ name: 'edge', address: '127.0.0.1:0', filter_chains: ['main'] }],
        filter_chains: [
          {
            name: 'main',
            filters: [
              { filter: 'intelligent_route', overlay_file: overlayPath },
              {
                filter: 'a2a_route',
                agents: [{ name: 'claims-agent', cluster: 'agent/claims-agent', site: 'west' }],
                max_body_bytes: 32768,
              },
              {
                filter: 'load_balancer',
                clusters: [{ name: 'agent/claims-agent', endpoints: [`127.0.0.1:${providerPort}`], tls }],
              },
            ],
          },
        ],
        admin: { address: '127.0.0.1:0' },
        shutdown_timeout_secs: 2,
      }),
    );
    consumer = await startConsumer(consumerPath);
    cleanup = async () => {
      await Promise.all([consumer.daemon.stop(), provider.stop()]);
      await Promise.all(replicas.map((r) => r.close()));
      await temp.cleanup();
    };
  });
  afterAll(async () => {
    await cleanup?.();
  });

  it("answers the agent's card with the gateway's URL in place of the agent's", async () => {
    const reply = await call(`${agentUrl()}/.well-known/agent-card.json`, { headers: { 'a2a-version': '1.0' } });
    expect(reply.status).toBe(200);
    const card = reply.json();
    expect(card.name).toBe('claims-agent');
    expect(card.supportedInterfaces.length).toBeGreaterThan(0);
    for (const i of card.supportedInterfaces) expect(i.url).toBe(agentUrl());
    for (const replica of replicas) expect(reply.text).not.toContain(new URL(replica.url).host);
    expect(reply.headers['x-agn-routed-site']).toBe('west');
  });

  it('streams a message through, events as they happen, and fetches every task from the replica that holds it', async () => {
    // With the slash: the SDK resolves the card's well-known path relative to the URL it is given.
    const client = await new ClientFactory().createFromUrl(`${agentUrl()}/`);
    const taskIds: string[] = [];
    for (let n = 0; n < 4; n++) {
      const started = Date.now();
      const at: { kind: string; ms: number }[] = [];
      let taskId = '';
      for await (const event of client.sendMessageStream(userMessage('three little words', `m-${n}`))) {
        at.push({ kind: event.payload?.$case ?? '', ms: Date.now() - started });
        if (event.payload?.$case === 'task') taskId = event.payload.value.id;
      }
      expect(at.map((e) => e.kind)).toEqual([
        'task',
        'statusUpdate',
        'artifactUpdate',
        'artifactUpdate',
        'artifactUpdate',
        'statusUpdate',
      ]);
      // Buffered, the task event would arrive with the last one, ~450 ms after the send.
      expect(at[0]!.ms).toBeLessThan(at[at.length - 1]!.ms - 250);
      taskIds.push(taskId);
    }
    // The provider's round robin spread the four tasks over both replicas, each with its own task store.
    expect(replicas.every((r) => r.tasks.length > 0)).toBe(true);
    // Each task twice in a row: a round robin would send one of the two to the replica that never saw it.
    for (const id of taskIds) {
      for (let twice = 0; twice < 2; twice++) {
        const task = await client.getTask({ tenant: '', id, historyLength: undefined });
        expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      }
    }
    // No request reached a replica without the token the provider gateway injects.
    expect(replicas.flatMap((r) => r.seen).every((s) => s.authorization === `Bearer ${TOKEN}`)).toBe(true);
  });

  it("routes v0.3 callers: message/send, tasks/cancel of a running task and tasks/get, each on its task's replica", async () => {
    const sent = await rpc('message/send', {
      message: { kind: 'message', messageId: 'legacy-1', role: 'user', parts: [{ kind: 'text', text: 'a b c' }] },
      configuration: { blocking: false },
    });
    expect(sent.status).toBe(200);
    const id = sent.body.result.id as string;
    expect((await rpc('tasks/cancel', { id }, 2)).body.result.status.state).toBe('canceled');
    expect((await rpc('tasks/get', { id }, 3)).body.result.status.state).toBe('canceled');
    const holder = replicas.find((r) => r.tasks.includes(id))!;
    expect(holder.seen.filter((s) => s.rpc === 'tasks/get' || s.rpc === 'tasks/cancel')).toHaveLength(2);
    // A task no replica ever answered for: the agent's own error, passed through.
    expect((await rpc('tasks/get', { id: 'no-such-task' }, 4)).body.error.code).toBe(-32001);
  });

  it('refuses bad requests with clear errors before any reaches the agent', async () => {
    const before = replicas.reduce((n, r) => n + r.seen.length, 0);
    const unknown = await call(`${consumer.base}/a2a/no-such-agent`, {
      method: 'POST',
      body: { jsonrpc: '2.0', id: 1, method: 'message/send', params: {} },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.json().error.message).toContain('no agent "no-such-agent"');
    const tooBig = await rpc('message/send', {
      message: { kind: 'message', messageId: 'big', role: 'user', parts: [{ kind: 'text', text: 'x'.repeat(40_000) }] },
    });
    expect(tooBig.status).toBe(413);
    const notJson = await call(agentUrl(), { method: 'POST', body: '{"jsonrpc": "2.0", "method":' });
    expect(notJson.status).toBe(400);
    expect(notJson.json().error.code).toBe(-32700);
    const get = await call(agentUrl());
    expect(get.status).toBe(405);
    expect(get.headers['allow']).toBe('POST');
    expect((await call(`${agentUrl()}/tasks`)).status).toBe(404);
    expect(replicas.reduce((n, r) => n + r.seen.length, 0)).toBe(before);
  });

  it('counts messages per agent, method, site and tenant, and never shows the token', async () => {
    const text = (await call(`${consumer.admin}/metrics`)).text;
    expect(
      metricSample(
        text,
        'grid_gateway_a2a_messages_total{agent="claims-agent",method="SendStreamingMessage",site="west",tenant="none"}',
      ),
    ).toBe(4);
    expect(
      metricSample(
        text,
        'grid_gateway_a2a_messages_total{agent="claims-agent",method="tasks/cancel",site="west",tenant="none"}',
      ),
    ).toBe(1);
    expect(text).not.toContain(TOKEN);
  });

  it('answers 502 once the agent is gone', async () => {
    await Promise.all(replicas.map((r) => r.close()));
    const gone = await rpc('tasks/get', { id: 'any' });
    expect(gone.status).toBe(502);
    expect(gone.body.error.code).toBe('upstream_unreachable');
  });
});
