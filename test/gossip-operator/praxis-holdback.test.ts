// The projected-credential two-step through the whole operator on the local store (GatewayRef.praxisConfig:
// "Until readiness is attested, credential-bearing overlay revisions are retained"), then generation turned off:
// the generated ConfigMaps the operator created are deleted and their status entries dropped.
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mountRequirementsConfigMapName } from '../../schemas/object-names.ts';
import {
  configMap,
  grid,
  renderFixture,
  schemaProblems,
  startBackend,
  startLocalOperator,
  tempDir,
  testConfig,
  waitFor,
  type Backend,
  type LocalOperator,
} from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const TOKEN = 'tok-holdback-s3cr3t-bytes';
const REVISION = 'grid.praxis.fast/overlay-revision';

describe('operator: projected-credential hold-back and cleanup of generated configs', () => {
  let backend: Backend;
  let dirs: { path: string; remove: () => Promise<void> };
  let op: LocalOperator | undefined;
  const stateDir = () => join(dirs.path, 'state');
  const manifests = () => join(dirs.path, 'manifests');
  let vars: Record<string, string>;
  const network = (generate: boolean, supports: boolean) =>
    renderFixture(
      'praxis-holdback/grid.yaml',
      { ...vars, GENERATE: String(generate), SUPPORTS: String(supports) },
      manifests(),
    );
  const routing = (n: Json, gateway: string) =>
    n?.status?.routingMapStatus?.find((s: Json) => s.gatewayName === gateway);
  const praxisStatus = (n: Json) => n?.status?.praxisConfigStatus?.find((s: Json) => s.gatewayName === 'edge');
  const overlay = (gateway: string) => configMap(stateDir(), 'grid-system', `grid-overlay-grid-${gateway}`);
  const requirements = async (n: Json): Promise<Json> => {
    const revision = n.status.mountReconciliationStatus.find((s: Json) => s.gatewayName === 'edge')
      .requirementsRevision as string;
    return JSON.parse(
      (await configMap(stateDir(), 'grid-system', mountRequirementsConfigMapName(revision)))?.data?.[
        'mount-requirements.json'
      ] ?? '{}',
    );
  };
  const withCredential = (cm: Json) =>
    JSON.parse(cm?.data?.['routing-config.json'] ?? '{"candidates":[]}').candidates.some(
      (c: Json) => c.credential !== undefined,
    );

  beforeAll(async () => {
    backend = await startBackend();
    dirs = await tempDir('operator-holdback');
    vars = { BACKEND_URL: backend.url, BACKEND_ADDRESS: backend.url.replace(/^http:\/\//, ''), API_TOKEN: TOKEN };
    await network(true, false);
    op = await startLocalOperator(testConfig({ site: 'site-a', store: { backend: 'local', stateDir: stateDir() } }), {
      stateDir: stateDir(),
      manifestsDir: manifests(),
    });
  });

  afterAll(async () => {
    await op?.stop();
    await backend?.close();
    await dirs?.remove();
  });

  it('retains the last overlay while credential references wait for attestation, then publishes; ungenerated gateways never wait', async () => {
    const first: Json = await waitFor('edge overlay distributed', async () => {
      const n: Json = await grid(stateDir(), 'GridNetwork', 'grid');
      return routing(n, 'edge')?.phase === 'Distributed' && praxisStatus(n)?.phase === 'Rendered' ? n : undefined;
    });
    const published = routing(first, 'edge').distributedRevision as string;
    expect(praxisStatus(first).reason).toBe('');

    // A provider with a credential reference joins: edge (projected mode, not attested) keeps its revision.
    await renderFixture('praxis-holdback/api.yaml', vars, manifests());
    const held: Json = await waitFor(
      'edge overlay held back',
      async () => {
        const n: Json = await grid(stateDir(), 'GridNetwork', 'grid');
        return routing(n, 'edge')?.reason === 'ProjectedCredentialsNotAttested' ? n : undefined;
      },
      30_000,
    );
    expect(routing(held, 'edge')).toMatchObject({ phase: 'Retained', distributedRevision: published });
    expect(routing(held, 'edge').renderedRevision).not.toBe(published);
    expect(routing(held, 'edge').message).toContain('grid-system/api-token');
    expect(praxisStatus(held)).toMatchObject({ phase: 'Rendered', reason: 'ProjectedCredentialsNotAttested' });
    // A requested wait, not a failure: the network is not Degraded by it.
    expect(held.status.phase).not.toBe('Degraded');
    expect(praxisStatus(held).message).toContain('supportsProjectedCredentials');
    expect((await overlay('edge'))?.metadata.annotations[REVISION]).toBe(published);
    expect(withCredential(await overlay('edge'))).toBe(false);
    // The gateway without a generated config is not part of the two-step: its credential overlay publishes.
    expect(routing(held, 'plain').phase).toBe('Distributed');
    expect(withCredential(await overlay('plain'))).toBe(true);
    // Step one mounts the credential root only: the held revision's Secret is not yet a mount requirement.
    const heldDoc = await requirements(held);
    expect(heldDoc.secrets.map((s: Json) => s.name)).not.toContain('api-token');
    expect(heldDoc.volumes.find((v: Json) => v.name === 'grid-credentials')?.projected.sources).toEqual([]);

    // Attestation releases it.
    await network(true, true);
    const released: Json = await waitFor(
      'edge overlay released',
      async () => {
        const n: Json = await grid(stateDir(), 'GridNetwork', 'grid');
        return routing(n, 'edge')?.phase === 'Distributed' && routing(n, 'edge').distributedRevision !== published
          ? n
          : undefined;
      },
      30_000,
    );
    expect(praxisStatus(released).reason).toBe('');
    expect(withCredential(await overlay('edge'))).toBe(true);
    const mount = released.status.mountReconciliationStatus.find((s: Json) => s.gatewayName === 'edge');
    expect(mount).toMatchObject({ phase: 'RequirementsRendered' });
    // Step two: attested, the referenced Secret is mounted.
    expect((await requirements(released)).secrets.map((s: Json) => s.name)).toContain('api-token');
    expect(
      await configMap(stateDir(), 'grid-system', mountRequirementsConfigMapName(mount.requirementsRevision)),
    ).toBeDefined();
    expect(JSON.stringify(released.status)).not.toContain(TOKEN);
    expect(op?.lines.join('')).not.toContain(TOKEN);
    expect(await schemaProblems(stateDir())).toEqual([]);
  });

  it('deletes the generated ConfigMap and mount requirements when generate turns false, keeping the overlay', async () => {
    const before: Json = await grid(stateDir(), 'GridNetwork', 'grid');
    const revision = before.status.mountReconciliationStatus.find((s: Json) => s.gatewayName === 'edge')
      .requirementsRevision as string;
    expect(await configMap(stateDir(), 'grid-system', 'praxis-edge')).toBeDefined();
    await network(false, true);
    const after: Json = await waitFor(
      'generated status entries dropped',
      async () => {
        const n: Json = await grid(stateDir(), 'GridNetwork', 'grid');
        return (n?.status?.praxisConfigStatus ?? []).length === 0 &&
          (n?.status?.mountReconciliationStatus ?? []).length === 0
          ? n
          : undefined;
      },
      30_000,
    );
    expect(await configMap(stateDir(), 'grid-system', 'praxis-edge')).toBeUndefined();
    expect(await configMap(stateDir(), 'grid-system', mountRequirementsConfigMapName(revision))).toBeUndefined();
    // The routing overlay stays active (seed: "The routing overlay remains active").
    expect(routing(after, 'edge').phase).toBe('Distributed');
    expect(await overlay('edge')).toBeDefined();
    expect(await schemaProblems(stateDir())).toEqual([]);
  });
});
