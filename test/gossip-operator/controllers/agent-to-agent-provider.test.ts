// AgentToAgentProvider reconcile on the real local store against real A2A agents built with `@a2a-js/sdk`: the card
// reaches status (and validates against the CRD schema), a changed card is logged and stamped, a failed probe keeps
// the previous card and says why, and each step before the probe (spec, GridNetwork, credential, TLS, sites) has its
// own reason. The last test runs the controller inside a whole operator, where operator.ts wires it.
import { join } from 'node:path';
import { writeFile, mkdir } from 'node:fs/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { openLocalStore, type LocalStore } from '../../../daemons/shared/resource-store/index.ts';
import { AGENT_TO_AGENT_PROVIDER, GRID_NETWORK, GRID_SITE, SECRET } from '../../../daemons/gossip-operator/kinds.ts';
import { AgentToAgentProviderController } from '../../../daemons/gossip-operator/controllers/agent-to-agent-provider.ts';
import type { OperatorContext } from '../../../daemons/gossip-operator/context.ts';
import { OperatorMetrics } from '../../../daemons/gossip-operator/metrics.ts';
import { createCertificateAuthority, createServerCertificate } from '../../../daemons/shared/tls.ts';
import { closedPort } from '../../closed-port.ts';
import { type A2aAgent, type A2aAgentOptions, STREAMING_SKILL, startA2aAgent } from '../probes/a2a-sdk-agents.ts';
import { capturingLogger, grid, schemaProblems, startLocalOperator, tempDir, testConfig, waitFor } from '../helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const USER = { fieldManager: 'test-user' };
const NOW = Date.parse('2026-03-01T12:00:00Z');
const TOKEN = 'a2a-s3cr3t-token-bytes';
const REVIEW = { id: 'review-document', name: 'Review a document', description: 'Lists the problems of a document.' };

describe('AgentToAgentProvider controller', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  interface Setup {
    store: LocalStore;
    stateDir: string;
    controller: AgentToAgentProviderController;
    metrics: OperatorMetrics;
    lines: string[];
    clock: { now: number };
  }

  async function setup(): Promise<Setup> {
    const dirs = await tempDir('a2a-controller');
    const store = await openLocalStore({ stateDir: dirs.path, coalesceMs: 5, rescanIntervalMs: 1_000 });
    cleanups.push(async () => {
      await store.close();
      await dirs.remove();
    });
    await store.apply(
      GRID_NETWORK,
      {
        apiVersion: GRID_NETWORK.apiVersion,
        kind: 'GridNetwork',
        metadata: { name: 'grid' },
        spec: { consumerGateways: [{ name: 'edge', namespace: 'grid-system', siteName: 'site-a' }] },
      },
      USER,
    );
    const { logger, lines } = capturingLogger();
    const metrics = new OperatorMetrics();
    const clock = { now: NOW };
    const ctx = {
      store,
      logger,
      metrics,
      config: testConfig({ site: 'site-a', store: { backend: 'local', stateDir: dirs.path } }),
      now: () => clock.now,
    } as unknown as OperatorContext;
    return { store, stateDir: dirs.path, controller: new AgentToAgentProviderController(ctx), metrics, lines, clock };
  }

  async function agent(options: A2aAgentOptions = {}): Promise<A2aAgent> {
    const started = await startA2aAgent(options);
    cleanups.push(() => started.close());
    return started;
  }

  async function declare(s: Setup, spec: Record<string, unknown>, name = 'claims-agent'): Promise<void> {
    await s.store.apply(
      AGENT_TO_AGENT_PROVIDER,
      {
        apiVersion: AGENT_TO_AGENT_PROVIDER.apiVersion,
        kind: 'AgentToAgentProvider',
        metadata: { name },
        spec: { gridNetworkRef: 'grid', protocol: 'a2a', ...spec },
      },
      USER,
    );
  }

  async function reconciled(s: Setup, name = 'claims-agent'): Promise<Json> {
    expect(await s.controller.reconcile(name)).toEqual({ requeueAfterMs: 1_000 });
    return (await s.store.get(AGENT_TO_AGENT_PROVIDER, { name }))!['status'];
  }

  async function probes(s: Setup, outcome: string): Promise<number | undefined> {
    const metric = await s.metrics.registry.getSingleMetric('grid_a2a_probe_total')?.get();
    return metric?.values.find((v) => v.labels['provider'] === 'claims-agent' && v.labels['outcome'] === outcome)
      ?.value;
  }

  it('writes the card of an SDK agent to status: name, skills, capabilities, revision, interfaces, card path', async () => {
    const s = await setup();
    const a = await agent({ name: 'claims-agent', skills: [STREAMING_SKILL, REVIEW] });
    await declare(s, { endpoint: a.url });
    const status = await reconciled(s);
    expect(status).toEqual({
      phase: 'Available',
      reason: '',
      message: '',
      agentName: 'claims-agent',
      skills: [
        { id: STREAMING_SKILL.id, name: STREAMING_SKILL.name, description: STREAMING_SKILL.description },
        REVIEW,
      ],
      capabilities: { streaming: true, pushNotifications: false },
      protocolVersion: '1.0',
      interfaces: [
        { url: a.url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
        { url: a.url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
      ],
      cardPath: '/.well-known/agent-card.json',
      observedGeneration: 1,
    });
    expect(await probes(s, 'SitesMatched')).toBe(1);
    // What the controller wrote is what an API server would accept.
    expect(await schemaProblems(s.stateDir)).toEqual([]);
  });

  it('reads an older agent at /.well-known/agent.json with its v0.3 card', async () => {
    const s = await setup();
    const a = await agent({ cardPath: 'agent.json' });
    await declare(s, { endpoint: a.url });
    expect(await reconciled(s)).toMatchObject({
      phase: 'Available',
      cardPath: '/.well-known/agent.json',
      protocolVersion: '0.3',
      interfaces: [{ url: a.url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' }],
    });
    expect(await schemaProblems(s.stateDir)).toEqual([]);
  });

  it('logs a changed card and stamps cardChangedAt; an unchanged card writes nothing', async () => {
    const s = await setup();
    const a = await agent({ skills: [STREAMING_SKILL] });
    await declare(s, { endpoint: a.url });
    const first = await reconciled(s);
    expect(first.cardChangedAt).toBeUndefined();
    const version = (await s.store.get(AGENT_TO_AGENT_PROVIDER, { name: 'claims-agent' }))!.metadata.resourceVersion;
    await reconciled(s);
    expect((await s.store.get(AGENT_TO_AGENT_PROVIDER, { name: 'claims-agent' }))!.metadata.resourceVersion).toBe(
      version,
    );
    expect(s.lines.join('')).not.toContain('A2A agent card changed');
    // An API server hands status back with its keys sorted: the same card in another key order is no change.
    const sorted = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(sorted)
        : typeof value === 'object' && value !== null
          ? Object.fromEntries(
              Object.entries(value)
                .sort(([x], [y]) => x.localeCompare(y))
                .map(([k, v]) => [k, sorted(v)]),
            )
          : value;
    // (The local store keeps a merge patch's existing key order, so the card is taken out and put back sorted.)
    await s.store.patchStatus(
      AGENT_TO_AGENT_PROVIDER,
      { name: 'claims-agent' },
      { skills: null, capabilities: null, interfaces: null },
      USER,
    );
    await s.store.patchStatus(
      AGENT_TO_AGENT_PROVIDER,
      { name: 'claims-agent' },
      sorted({ skills: first.skills, capabilities: first.capabilities, interfaces: first.interfaces }) as Record<
        string,
        unknown
      >,
      USER,
    );
    expect(
      Object.keys(
        ((await s.store.get(AGENT_TO_AGENT_PROVIDER, { name: 'claims-agent' }))!['status'] as Json).skills[0],
      ),
    ).toEqual(['description', 'id', 'name']);
    expect((await reconciled(s)).cardChangedAt).toBeUndefined();

    a.setSkills([REVIEW]);
    s.clock.now = NOW + 60_000;
    const changed = await reconciled(s);
    expect(changed.skills).toEqual([REVIEW]);
    expect(changed.cardChangedAt).toBe('2026-03-01T12:01:00Z');
    const logged = s.lines.map((l) => JSON.parse(l) as Json).find((l) => l.msg === 'A2A agent card changed');
    expect(logged).toMatchObject({ provider: 'claims-agent', added: ['review-document'], removed: ['count-words'] });
  });

  it('keeps the previous card when the agent goes away, and says why', async () => {
    const s = await setup();
    const a = await agent({ skills: [STREAMING_SKILL, REVIEW] });
    await declare(s, { endpoint: a.url });
    const good = await reconciled(s);
    await a.close();
    const gone = await reconciled(s);
    expect(gone).toMatchObject({
      phase: 'Unavailable',
      reason: 'A2aEndpointUnreachable',
      message: 'GET /.well-known/agent-card.json: connection failed (ECONNREFUSED)',
    });
    expect(gone.skills).toEqual(good.skills);
    expect(gone.agentName).toBe(good.agentName);
    expect(await probes(s, 'A2aEndpointUnreachable')).toBe(1);
    const logged = s.lines
      .map((l) => JSON.parse(l) as Json)
      .find((l) => l.msg?.startsWith('A2A agent card probe failed'));
    expect(logged).toMatchObject({
      provider: 'claims-agent',
      reason: 'A2aEndpointUnreachable',
      cardPath: '/.well-known/agent-card.json',
    });
  });

  it("sends the Secret's bearer token, reports a refused one as A2aAuthRejected, and never writes or logs it", async () => {
    const s = await setup();
    const a = await agent({ requireToken: TOKEN });
    await s.store.apply(
      SECRET,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'agent-token', namespace: 'grid-system' },
        stringData: { token: TOKEN },
      },
      USER,
    );
    await declare(s, {
      endpoint: a.url,
      auth: { strategy: 'bearer_token', secretRef: { name: 'agent-token', namespace: 'grid-system', key: 'token' } },
    });
    expect(await reconciled(s)).toMatchObject({ phase: 'Available' });
    expect(a.seen[0]?.authorization).toBe(`Bearer ${TOKEN}`);
    await s.store.apply(
      SECRET,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'agent-token', namespace: 'grid-system' },
        stringData: { token: 'not-the-token' },
      },
      USER,
    );
    expect(await reconciled(s)).toMatchObject({
      phase: 'Unavailable',
      reason: 'A2aAuthRejected',
      message: 'GET /.well-known/agent-card.json answered HTTP 401',
    });
    const metrics = await s.metrics.registry.metrics();
    for (const text of [
      JSON.stringify(await s.store.get(AGENT_TO_AGENT_PROVIDER, { name: 'claims-agent' })),
      s.lines.join(''),
      metrics,
    ]) {
      expect(text).not.toContain(TOKEN);
      expect(text).not.toContain('not-the-token');
    }
  });

  it('refuses a credential reference it cannot read before probing: A2aAuthTokenInvalid', async () => {
    const s = await setup();
    const a = await agent();
    await declare(s, {
      endpoint: a.url,
      auth: { strategy: 'bearer_token', secretRef: { name: 'absent', namespace: 'grid-system' } },
    });
    expect(await reconciled(s)).toMatchObject({
      phase: 'Unavailable',
      reason: 'A2aAuthTokenInvalid',
      message: 'spec.auth: Secret grid-system/absent does not exist',
    });
    expect(a.seen).toEqual([]);
  });

  it('reads the card over TLS with the CA Secret spec.tls names; a missing Secret is EndpointTlsSecretMissing', async () => {
    const s = await setup();
    const ca = await createCertificateAuthority();
    const leaf = await createServerCertificate(ca, { commonName: 'agent', sans: ['127.0.0.1'] });
    const a = await agent({ tls: { cert: leaf.certPem, key: leaf.keyPem } });
    await declare(s, { endpoint: a.url, tls: { caSecretRef: { name: 'agent-ca', namespace: 'grid-system' } } });
    expect(await reconciled(s)).toMatchObject({
      phase: 'Unavailable',
      reason: 'EndpointTlsSecretMissing',
      message: expect.stringMatching(/^spec\.tls: Secret grid-system\/agent-ca/),
    });
    expect(a.seen).toEqual([]);
    await s.store.apply(
      SECRET,
      {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'agent-ca', namespace: 'grid-system' },
        stringData: { 'ca.crt': ca.certPem },
      },
      USER,
    );
    expect(await reconciled(s)).toMatchObject({ phase: 'Available', reason: '', message: '' });
  });

  it('is Pending while no site matches spec.siteSelector, Available once one does', async () => {
    const s = await setup();
    const a = await agent();
    await declare(s, { endpoint: a.url, siteSelector: { matchLabels: { 'grid.praxis.fast/site': 'site-a' } } });
    expect(await reconciled(s)).toMatchObject({
      phase: 'Pending',
      reason: '',
      matchingSites: [],
      skills: [{ id: STREAMING_SKILL.id }],
    });
    expect(await probes(s, 'AwaitingSiteMatch')).toBe(1);
    await s.store.apply(
      GRID_SITE,
      {
        apiVersion: GRID_SITE.apiVersion,
        kind: 'GridSite',
        metadata: { name: 'site-a', labels: { 'grid.praxis.fast/site': 'site-a' } },
        spec: { gridNetworkRef: 'grid' },
      },
      USER,
    );
    expect(await reconciled(s)).toMatchObject({ phase: 'Available', matchingSites: ['site-a'] });
  });

  it('is Degraded when the card lacks a skill spec.agentCard.skills declares', async () => {
    const s = await setup();
    const a = await agent({ skills: [STREAMING_SKILL] });
    await declare(s, { endpoint: a.url, agentCard: { skills: ['count-words', 'claims-processing'] } });
    expect(await reconciled(s)).toMatchObject({
      phase: 'Degraded',
      reason: 'A2aDeclaredSkillsMissing',
      message:
        'spec.agentCard.skills declares claims-processing, which the agent card at /.well-known/agent-card.json does not list',
    });
    a.setSkills([STREAMING_SKILL, { id: 'claims-processing', name: 'Process a claim' }]);
    expect(await reconciled(s)).toMatchObject({ phase: 'Available', reason: '', message: '' });
  });

  it('is Unavailable for a card the grid cannot route to: no JSONRPC interface', async () => {
    const s = await setup();
    const card = {
      name: 'grpc-only',
      skills: [],
      capabilities: {},
      supportedInterfaces: [{ url: 'http://127.0.0.1:1', protocolBinding: 'GRPC', protocolVersion: '1.0' }],
    };
    const a = await agent({ cardBody: JSON.stringify(card) });
    await declare(s, { endpoint: a.url });
    expect(await reconciled(s)).toMatchObject({
      phase: 'Unavailable',
      reason: 'A2aJsonRpcInterfaceMissing',
      message:
        'the agent card at /.well-known/agent-card.json offers GRPC but no JSONRPC interface, the binding the grid routes A2A over',
      agentName: 'grpc-only',
    });
  });

  it('reports an invalid card with what is wrong and where', async () => {
    const s = await setup();
    const a = await agent({ cardBody: JSON.stringify({ name: 'x', skills: [{ id: 'a', name: 'A' }, { name: 'B' }] }) });
    await declare(s, { endpoint: a.url });
    expect(await reconciled(s)).toMatchObject({
      phase: 'Unavailable',
      reason: 'A2aAgentCardInvalid',
      message:
        'the card at /.well-known/agent-card.json: skills[1].id is missing, blank, longer than 128 characters or has control characters',
    });
  });

  it('waits for its GridNetwork, and refuses an invalid spec without probing', async () => {
    const s = await setup();
    const endpoint = `http://127.0.0.1:${await closedPort()}`;
    await declare(s, { endpoint, gridNetworkRef: 'elsewhere' });
    expect(await reconciled(s)).toMatchObject({
      phase: 'Pending',
      reason: 'GridNetworkNotFound',
      message: 'spec.gridNetworkRef names GridNetwork elsewhere, which does not exist',
    });
    await declare(s, { endpoint: 'ftp://agent.example' }, 'bad-endpoint');
    expect(await s.controller.reconcile('bad-endpoint')).toEqual({});
    const bad = (await s.store.get(AGENT_TO_AGENT_PROVIDER, { name: 'bad-endpoint' }))!['status'] as Json;
    expect(bad).toMatchObject({
      phase: 'Unavailable',
      reason: 'ProviderConfigInvalid',
      message: expect.stringContaining('spec.endpoint'),
    });
  });

  it('runs in the operator: a declared agent becomes Available', async () => {
    const a = await agent({ name: 'claims-agent' });
    const dirs = await tempDir('a2a-operator');
    cleanups.push(() => dirs.remove());
    const manifests = join(dirs.path, 'manifests');
    const state = join(dirs.path, 'state');
    await mkdir(manifests, { recursive: true });
    await writeFile(
      join(manifests, 'grid.yaml'),
      [
        'apiVersion: grid.praxis.fast/v1alpha1\nkind: GridNetwork\nmetadata:\n  name: grid\nspec:\n  consumerGateways:\n    - name: edge\n      namespace: grid-system\n      siteName: site-a\n',
        `apiVersion: grid.praxis.fast/v1alpha1\nkind: AgentToAgentProvider\nmetadata:\n  name: claims-agent\nspec:\n  gridNetworkRef: grid\n  protocol: a2a\n  endpoint: ${a.url}\n`,
      ].join('---\n'),
    );
    const op = await startLocalOperator(testConfig({ site: 'site-a', store: { backend: 'local', stateDir: state } }), {
      stateDir: state,
      manifestsDir: manifests,
    });
    cleanups.push(() => op.stop());
    const provider: Json = await waitFor('claims-agent Available', async () => {
      const p: Json = await grid(state, 'AgentToAgentProvider', 'claims-agent');
      return p?.status?.phase === 'Available' ? p : undefined;
    });
    expect(provider.status).toMatchObject({
      agentName: 'claims-agent',
      skills: [{ id: STREAMING_SKILL.id }],
      cardPath: '/.well-known/agent-card.json',
    });
    const text = await op.operator.metrics.registry.metrics();
    expect(text).toMatch(/grid_a2a_probe_total\{provider="claims-agent",outcome="SitesMatched"\} \d+/);
    expect(text).toMatch(/grid_operator_reconcile_total\{controller="agenttoagentprovider",result="success"\} \d+/);
  });
});
