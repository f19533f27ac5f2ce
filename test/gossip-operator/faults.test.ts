// Bad input never stops reconciliation: each broken resource gets its own phase, reason and a bounded message
// without secret bytes, while the good ones are reconciled and routed. A configured but bad SWIM key fails the
// GridNetwork reconcile and gossip never starts in plaintext; fixing the Secret recovers.
import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  configMap,
  grid,
  renderFixture,
  schemaProblems,
  startBackend,
  startLocalOperator,
  statePath,
  tempDir,
  testConfig,
  waitFor,
  type Backend,
  type LocalOperator,
} from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;
const TOKEN = 'tok-faults-s3cr3t';

describe('operator fault isolation', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function setup(): Promise<{ backend: Backend; op: LocalOperator; state: string; manifests: string }> {
    const backend = await startBackend();
    cleanups.push(() => backend.close());
    const dirs = await tempDir('operator-faults');
    cleanups.push(() => dirs.remove());
    const manifests = join(dirs.path, 'manifests');
    const state = join(dirs.path, 'state');
    const vars = { BACKEND_URL: backend.url, API_TOKEN: TOKEN };
    await renderFixture('single-site/grid.yaml', vars, manifests);
    await renderFixture('faults/providers.yaml', vars, manifests);
    const op = await startLocalOperator(
      testConfig({ site: 'site-a', store: { backend: 'local', stateDir: state } }),
      { stateDir: state, manifestsDir: manifests },
      {
        // The test's backend can only listen on loopback, which model discovery refuses by design.
        discoveryIsBlocked: () => false,
      },
    );
    cleanups.push(() => op.stop());
    return { backend, op, state, manifests };
  }

  it('gives each broken provider its own status and keeps routing the good ones', async () => {
    const { state, op } = await setup();
    const phaseOf = (name: string, phase: string) =>
      waitFor(`${name} ${phase}`, async () => {
        const p: Json = await grid(state, 'InferenceProvider', name);
        return p?.status?.phase === phase ? p : undefined;
      });
    const heavy: Json = await phaseOf('too-heavy', 'Unavailable');
    expect(heavy.status.reason).toBe('ProviderConfigInvalid');
    expect(heavy.status.message).toContain('spec.capacityWeight');
    const noSecret: Json = await phaseOf('no-secret', 'Unavailable');
    expect(noSecret.status.reason).toBe('CredentialKeyMissing');
    expect(noSecret.status.message).toBe('Secret grid-system/wrong-key-token has no key "token"');
    const orphan: Json = await phaseOf('orphan', 'Pending');
    expect(orphan.status.reason).toBe('GridNetworkNotFound');
    await phaseOf('llm-a', 'Available');

    const overlay: Json = await waitFor('an overlay without the broken providers', async () => {
      const cm: Json = await configMap(state, 'grid-system', 'grid-overlay-grid-edge');
      const o = cm === undefined ? undefined : JSON.parse(cm.data['routing-overlay.json']);
      const clusters = o?.overlay.candidates.map((c: Json) => c.cluster) ?? [];
      return clusters.includes('llm-a') && clusters.includes('discovering') && !clusters.includes('no-secret')
        ? o
        : undefined;
    });
    const clusters = overlay.overlay.candidates.map((c: Json) => c.cluster);
    expect(clusters).not.toContain('too-heavy');
    expect(clusters).not.toContain('orphan');
    for (const line of op.lines) expect(line).not.toContain(TOKEN);
    const problems = await schemaProblems(state);
    // Only the deliberately invalid spec fails, nothing the operator wrote into status.
    expect(problems.filter((p) => !p.startsWith('InferenceProvider/too-heavy.json spec.capacityWeight'))).toEqual([]);
  });

  it('runs model discovery in its own loop, keeping the held set when a poll fails', async () => {
    const { state, backend } = await setup();
    const discovered: Json = await waitFor('servedModels', async () => {
      const p: Json = await grid(state, 'InferenceProvider', 'discovering');
      return p?.status?.servedModels !== undefined ? p : undefined;
    });
    expect(discovered.status.servedModels).toEqual(['qwen3']);
    expect(discovered.status.modelDiscoveryUrl).toBe(`${backend.url}/v1/models`);
    expect(Date.parse(discovered.status.servedModelsExpiresAt)).toBeGreaterThan(Date.now());
    expect(discovered.status.modelDiscoveryError).toBeUndefined();
    backend.models = ['dup', 'dup'];
    const failed: Json = await waitFor('modelDiscoveryError', async () => {
      const p: Json = await grid(state, 'InferenceProvider', 'discovering');
      return p?.status?.modelDiscoveryError !== undefined ? p : undefined;
    });
    expect(failed.status.modelDiscoveryError).toBe('invalid_response');
    expect(failed.status.servedModels).toEqual(['qwen3']);
    expect(failed.status.servedModelsExpiresAt).toBe(discovered.status.servedModelsExpiresAt);
  });

  it('fails the GridNetwork reconcile on a bad configured SWIM key and never gossips in plaintext', async () => {
    const backend = await startBackend();
    cleanups.push(() => backend.close());
    const dirs = await tempDir('operator-swimkey');
    cleanups.push(() => dirs.remove());
    const manifests = join(dirs.path, 'manifests');
    const state = join(dirs.path, 'state');
    const badKey = randomBytes(31);
    await renderFixture('faults/swim-key.yaml', { KEY_BYTES: '31', SWIM_KEY: badKey.toString('base64') }, manifests);
    const op = await startLocalOperator(
      // An env key is configured too: a bad Secret must not fall back to it either.
      testConfig({ site: 'site-a', store: { backend: 'local', stateDir: state }, swimKey: randomBytes(32) }),
      { stateDir: state, manifestsDir: manifests },
    );
    cleanups.push(() => op.stop());
    const network: Json = await waitFor('GridNetwork Degraded', async () => {
      const n: Json = await grid(state, 'GridNetwork', 'grid');
      return n?.status?.phase === 'Degraded' ? n : undefined;
    });
    const ready = network.status.conditions.find((c: Json) => c.type === 'Ready');
    expect(ready).toMatchObject({ status: 'False', reason: 'SwimKeyInvalid' });
    expect(ready.message).toContain('exactly 32 bytes; got 31');
    expect(ready.message).not.toContain(badKey.toString('base64'));
    expect(op.operator.context.gossip).toBeUndefined();
    expect(await configMap(state, 'grid-system', 'grid-overlay-grid-edge')).toBeUndefined();

    const goodKey = randomBytes(32);
    await rm(join(manifests, 'faults_swim-key.yaml'));
    await renderFixture('faults/swim-key.yaml', { KEY_BYTES: '32', SWIM_KEY: goodKey.toString('base64') }, manifests);
    await waitFor('gossip to start with the Secret key', () => op.operator.context.gossip?.keyring);
    await waitFor('the overlay after recovery', () => configMap(state, 'grid-system', 'grid-overlay-grid-edge'));
  });

  it('keeps and reports the last distributed revision while the overlay cannot be applied', async () => {
    const { state, backend } = await setup();
    // Settled first: broken providers already excluded, llm-a admitted for new sessions.
    const settled: string = await waitFor('a settled overlay', async () => {
      const cm: Json = await configMap(state, 'grid-system', 'grid-overlay-grid-edge');
      const candidates = cm === undefined ? [] : JSON.parse(cm.data['routing-overlay.json']).overlay.candidates;
      const llm = candidates.find((c: Json) => c.cluster === 'llm-a');
      const settledOverlay =
        llm?.admission_state === 'new_and_existing' &&
        candidates.some((c: Json) => c.cluster === 'discovering') &&
        !candidates.some((c: Json) => c.cluster === 'no-secret');
      return settledOverlay ? (cm.metadata.annotations['grid.praxis.fast/overlay-revision'] as string) : undefined;
    });
    const distributed: Json = await waitFor('status to report the settled overlay distributed', async () => {
      const n: Json = await grid(state, 'GridNetwork', 'grid');
      const s = n?.status?.routingMapStatus?.[0];
      return s?.phase === 'Distributed' && s.distributedRevision === settled ? s : undefined;
    });
    // A real storage fault: the ConfigMap's file becomes a directory, so every read and write of it fails.
    const file = statePath(state, 'core', 'ConfigMap', 'grid-system', 'grid-overlay-grid-edge');
    await rm(file);
    await mkdir(file);
    backend.queueDepth = 0.95;
    const retained: Json = await waitFor('status Retained with a new rendered revision', async () => {
      const n: Json = await grid(state, 'GridNetwork', 'grid');
      const s = n?.status?.routingMapStatus?.[0];
      return s?.phase === 'Retained' && s.renderedRevision !== distributed.distributedRevision ? n : undefined;
    });
    const entry = retained.status.routingMapStatus[0];
    expect(entry).toMatchObject({
      reason: 'ApplyFailed',
      distributedRevision: distributed.distributedRevision,
      configMapResourceVersion: distributed.configMapResourceVersion,
    });
    expect(entry.message).toContain('grid-overlay-grid-edge');
    expect(retained.status.phase).toBe('Degraded');
    expect(retained.status.conditions.find((c: Json) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'OverlayNotDistributed',
    });

    await rm(file, { recursive: true });
    const recovered: Json = await waitFor('a new revision distributed', async () => {
      const n: Json = await grid(state, 'GridNetwork', 'grid');
      const s = n?.status?.routingMapStatus?.[0];
      return s?.phase === 'Distributed' && s.distributedRevision !== distributed.distributedRevision ? s : undefined;
    });
    const cm: Json = await configMap(state, 'grid-system', 'grid-overlay-grid-edge');
    expect(cm.metadata.annotations['grid.praxis.fast/overlay-revision']).toBe(recovered.distributedRevision);
    const llm = JSON.parse(cm.data['routing-overlay.json']).overlay.candidates.find((c: Json) => c.cluster === 'llm-a');
    expect(llm.admission_state).toBe('existing_only');
  });

  it('deletes the overlay ConfigMap of a gateway removed from the GridNetwork', async () => {
    const { state, manifests } = await setup();
    await waitFor('the edge overlay', () => configMap(state, 'grid-system', 'grid-overlay-grid-edge'));
    const file = join(manifests, 'single-site_grid.yaml');
    await writeFile(file, (await readFile(file, 'utf8')).replace('- name: edge\n', '- name: edge2\n'));
    await waitFor('the edge2 overlay', () => configMap(state, 'grid-system', 'grid-overlay-grid-edge2'));
    await waitFor('the edge overlay to be deleted', async () =>
      (await configMap(state, 'grid-system', 'grid-overlay-grid-edge')) === undefined ? true : undefined,
    );
    // The operator's own state ConfigMap (revision high-water mark) is not an overlay and stays.
    expect(await configMap(state, 'grid-system', 'grid-operator-state-site-a')).toBeDefined();
  });

  it("keeps an AgentToolProvider's discovered tools when tools/list fails, and stops routing to it", async () => {
    const { state, backend } = await setup();
    const toolCandidate = async () => {
      const cm: Json = await configMap(state, 'grid-system', 'grid-overlay-grid-edge');
      return cm === undefined
        ? undefined
        : JSON.parse(cm.data['routing-overlay.json']).overlay.candidates.find((c: Json) => c.kind === 'mcp_tool');
    };
    const candidate: Json = await waitFor('the mcp_tool candidate', toolCandidate);
    expect(candidate).toMatchObject({ name: 'database-query', cluster: 'tool/db-tools', site: 'site-a' });
    const first: Json = await grid(state, 'AgentToolProvider', 'db-tools');
    expect(first.status).toMatchObject({
      phase: 'Available',
      protocolVersion: '2025-06-18',
      session: false,
      tools: [{ name: 'database-query' }],
    });
    expect(first.status.toolsChangedAt).toBeUndefined();
    // The server's tool list changes: the next probe shows it, and when.
    backend.tools = ['database-query', 'search'];
    const changed: Json = await waitFor('the changed tool list in status', async () => {
      const t: Json = await grid(state, 'AgentToolProvider', 'db-tools');
      return t?.status?.discoveredTools?.length === 2 ? t : undefined;
    });
    expect(changed.status.toolsChangedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    backend.tools = ['database-query'];
    await waitFor('the tool list back to one', async () =>
      (await grid(state, 'AgentToolProvider', 'db-tools'))?.status?.discoveredTools?.length === 1 ? true : undefined,
    );
    backend.mcpStatus = 500;
    const failed: Json = await waitFor('db-tools Unavailable', async () => {
      const t: Json = await grid(state, 'AgentToolProvider', 'db-tools');
      return t?.status?.phase === 'Unavailable' ? t : undefined;
    });
    // The server answers, but HTTP 500 to the handshake: the probe names the step that failed.
    expect(failed.status.reason).toBe('McpInitializeFailed');
    expect(failed.status.discoveredTools).toEqual(['database-query']);
    expect(failed.status.tools).toEqual([{ name: 'database-query' }]);
    await waitFor('the tool candidate to leave the overlay', async () =>
      (await toolCandidate()) === undefined ? true : undefined,
    );
  });
});
