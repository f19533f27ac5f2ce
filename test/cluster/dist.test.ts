// The compiled manifests in dist/ on a real API server, applied the way a user would (`kubectl apply
// --server-side`): raw bodies, one field manager, strict field validation, CRDs first. East goes onto the shared
// control plane (the RBAC suite runs the daemons against it); west is a second cluster in the example grid and
// reuses object names (namespace grid-system, GridNetwork demo), so it gets a control plane of its own.
// Deployments are accepted but never run: these control planes have no nodes and no scheduler.
import { isDeepStrictEqual } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { crdManifest, KINDS } from '../../schemas/crds/definitions.ts';
import type { GridKind, SchemaNode } from '../../schemas/crds/definitions.ts';
import { resolveBinDir, startControlPlane } from './control-plane.ts';
import type { ControlPlane } from './control-plane.ts';
import { adminKubeConfig } from './kube.ts';
import { APPLY_FIELD_MANAGER, applyManifests, describeManifest, readManifests, RawClient } from './manifests.ts';
import type { Manifest } from './manifests.ts';

// A default as the API server stores it: defaults nested inside it are filled in too (`pressure: {}` becomes the
// object with each threshold's own default).
function defaulted(schema: SchemaNode | undefined, value: unknown): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  const out: Record<string, unknown> = { ...(value as Record<string, unknown>) };
  for (const [k, child] of Object.entries((schema?.['properties'] ?? {}) as Record<string, SchemaNode>)) {
    if (out[k] === undefined && child['default'] !== undefined) out[k] = child['default'];
    if (out[k] !== undefined) out[k] = defaulted(child, out[k]);
  }
  return out;
}

interface Stored {
  metadata: { resourceVersion: string; uid: string; managedFields?: { manager: string; operation: string }[] };
  [key: string]: unknown;
}

function count(node: unknown, key: string): number {
  if (Array.isArray(node)) return node.reduce((n: number, v) => n + count(v, key), 0);
  if (node === null || typeof node !== 'object') return 0;
  return Object.entries(node).reduce((n, [k, v]) => n + (k === key ? 1 : 0) + count(v, key), 0);
}

async function readBack(client: RawClient, manifests: readonly Manifest[]): Promise<Map<string, Stored>> {
  const stored = new Map<string, Stored>();
  await Promise.all(
    manifests.map(async (m) => {
      const res = await client.request('GET', await client.objectPath(m.object));
      if (res.status !== 200) throw new Error(`reading back ${describeManifest(m)}: HTTP ${res.status}`);
      stored.set(describeManifest(m), res.body as Stored);
    }),
  );
  return stored;
}

describe('dist/crds.k8s.yaml + dist/east.k8s.yaml (shared control plane)', () => {
  let client: RawClient;
  const files = ['crds.k8s.yaml', 'east.k8s.yaml'];
  const manifests = files.flatMap(readManifests);
  let results: Awaited<ReturnType<typeof applyManifests>>;

  beforeAll(async () => {
    client = new RawClient(adminKubeConfig());
    results = await applyManifests(client, files);
  });

  it('accepts every document with server-side apply, under one field manager', async () => {
    expect(manifests.filter((m) => m.object.kind === 'CustomResourceDefinition')).toHaveLength(KINDS.length);
    expect(results.map((r) => describeManifest(r.manifest)).sort()).toEqual(manifests.map(describeManifest).sort());
    const stored = await readBack(client, manifests);
    for (const m of manifests) {
      const managers = (stored.get(describeManifest(m))?.metadata.managedFields ?? []).map(
        (f) => `${f.manager}/${f.operation}`,
      );
      expect(managers, describeManifest(m)).toContain(`${APPLY_FIELD_MANAGER}/Apply`);
    }
  });

  it('stores the CRDs Established with every CEL rule and default they were compiled with', async () => {
    for (const kind of KINDS) {
      const name = crdManifest(kind).metadata.name;
      const res = await client.request('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}`);
      const crd = res.body as {
        spec: { versions: { schema: unknown }[] };
        status: { conditions: { type: string; status: string }[] };
      };
      expect(
        crd.status.conditions.filter((c) => c.status === 'True').map((c) => c.type),
        name,
      ).toEqual(expect.arrayContaining(['Established', 'NamesAccepted']));
      const compiled = readManifests('crds.k8s.yaml').find((m) => m.object.metadata.name === name)?.object as
        | { spec: { versions: { schema: unknown }[] } }
        | undefined;
      for (const key of ['x-kubernetes-validations', 'default']) {
        expect(count(crd.spec.versions[0]?.schema, key), `${name} ${key}`).toBe(
          count(compiled?.spec.versions[0]?.schema, key),
        );
      }
    }
  });

  it('re-applying the same manifests changes nothing (no new resourceVersion anywhere)', async () => {
    const before = await readBack(client, manifests);
    await applyManifests(client, files);
    const after = await readBack(client, manifests);
    for (const m of manifests) {
      const key = describeManifest(m);
      expect(after.get(key)?.metadata.resourceVersion, key).toBe(before.get(key)?.metadata.resourceVersion);
    }
  });

  it('stores every grid object as written, adding nothing but the defaults its CRD schema declares', async () => {
    const gridObjects = manifests.filter((m) => m.object.apiVersion.startsWith('grid.praxis.fast/'));
    expect(gridObjects.length).toBeGreaterThan(0);
    const stored = await readBack(client, gridObjects);
    const problems: string[] = [];
    const added: string[] = [];
    // Walks the manifest, the stored object and the CRD schema together.
    const walk = (written: unknown, kept: unknown, schema: SchemaNode | undefined, at: string): void => {
      if (Array.isArray(written)) {
        if (!Array.isArray(kept) || kept.length !== written.length) return void problems.push(`${at}: list changed`);
        for (const [i, w] of written.entries())
          walk(w, kept[i], schema?.['items'] as SchemaNode | undefined, `${at}[${i}]`);
      } else if (written !== null && typeof written === 'object') {
        if (kept === null || typeof kept !== 'object') return void problems.push(`${at}: object dropped`);
        const properties = (schema?.['properties'] ?? {}) as Record<string, SchemaNode>;
        for (const [k, w] of Object.entries(written))
          walk(w, (kept as Record<string, unknown>)[k], properties[k], `${at}.${k}`);
        for (const [k, v] of Object.entries(kept as Record<string, unknown>)) {
          if (k in (written as object)) continue;
          const declared = properties[k]?.['default'];
          if (declared === undefined || !isDeepStrictEqual(defaulted(properties[k], declared), v))
            problems.push(`${at}.${k}: added ${JSON.stringify(v)}, not a schema default`);
          else added.push(`${at}.${k}`);
        }
      } else if (written !== kept) {
        problems.push(`${at}: ${JSON.stringify(written)} stored as ${JSON.stringify(kept)}`);
      }
    };
    for (const m of gridObjects) {
      const kind = m.object.kind as GridKind;
      const schema = crdManifest(kind).spec.versions[0]?.schema.openAPIV3Schema as SchemaNode;
      const spec = ((schema['properties'] ?? {}) as Record<string, SchemaNode>)['spec'];
      const kept = stored.get(describeManifest(m)) as unknown as { spec: unknown };
      walk(m.object['spec'], kept.spec, spec, `${kind} ${m.object.metadata.name} spec`);
    }
    expect(problems).toEqual([]);
    console.log(`defaults the API server filled in dist/east.k8s.yaml's grid objects: ${added.join(', ') || '(none)'}`);
  });
});

describe('dist/crds.k8s.yaml + dist/west.k8s.yaml (a second cluster of its own)', () => {
  let plane: ControlPlane | undefined;
  let client: RawClient;

  beforeAll(async () => {
    plane = await startControlPlane({ binDir: resolveBinDir() });
    const kc = new KubeConfig();
    kc.loadFromFile(plane.kubeconfigPath);
    client = new RawClient(kc);
  });

  afterAll(async () => {
    await plane?.stop();
  });

  it('accepts every document with server-side apply', async () => {
    const files = ['crds.k8s.yaml', 'west.k8s.yaml'];
    const results = await applyManifests(client, files);
    const manifests = files.flatMap(readManifests);
    expect(results).toHaveLength(manifests.length);
    expect(results.every((r) => r.response.status === 201)).toBe(true);
    const stored = await readBack(client, manifests);
    expect(stored.size).toBe(manifests.length);
  });
});
