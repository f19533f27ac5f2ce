// The committed dist/ is what `npx cdk8s synth` produces, and every manifest in it is valid.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { synthGrid } from '../../constructs/grid.ts';
import { GridSynthError } from '../../constructs/synth-error.ts';
import { validateCustomResource } from '../../schemas/crds/validate.ts';
import { parseConfigText, resolveConfig } from '../../daemons/gateway/config.ts';
import { isBuiltInKind, validateKubernetesObject } from './k8s-schema.ts';
import { podSpec, site, twoSiteGrid, type Manifest } from './helpers.ts';

const root = join(import.meta.dirname, '..', '..');
const distDir = join(root, 'dist');
const work = mkdtempSync(join(tmpdir(), 'agn-dist-'));

function manifests(dir: string): Map<string, Manifest[]> {
  const files = new Map<string, Manifest[]>();
  for (const file of readdirSync(dir).sort()) {
    files.set(
      file,
      YAML.parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((doc) => doc.toJS() as Manifest),
    );
  }
  return files;
}

const dist = manifests(distDir);
const all = [...dist.values()].flat();

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('dist/', () => {
  let synthesized: string;

  beforeAll(async () => {
    // What `npx cdk8s synth` runs: cdk8s.yaml's app (constructs/main.ts) with the output directory in
    // CDK8S_OUTDIR. The module is imported in-process rather than spawned: same code, a second less per run.
    const app = /^app:\s*(.+)$/mu.exec(readFileSync(join(root, 'cdk8s.yaml'), 'utf8'))?.[1]?.trim();
    expect(app).toBe('node constructs/main.ts');
    synthesized = join(work, 'synth');
    const previous = process.env['CDK8S_OUTDIR'];
    process.env['CDK8S_OUTDIR'] = synthesized;
    try {
      await import('../../constructs/main.ts');
    } finally {
      if (previous === undefined) delete process.env['CDK8S_OUTDIR'];
      else process.env['CDK8S_OUTDIR'] = previous;
    }
    expect(process.exitCode ?? 0).toBe(0);
  }, 60_000);

  it('is reproduced byte for byte by the example app', () => {
    expect(readdirSync(synthesized).sort()).toEqual(['crds.k8s.yaml', 'east.k8s.yaml', 'west.k8s.yaml']);
    for (const file of readdirSync(distDir)) {
      expect(readFileSync(join(synthesized, file), 'utf8'), file).toBe(readFileSync(join(distDir, file), 'utf8'));
    }
  });

  it('validates every built-in object against the Kubernetes 1.28 schemas', () => {
    const builtIn = all.filter(isBuiltInKind);
    expect(builtIn.length).toBeGreaterThan(30);
    expect(builtIn.flatMap(validateKubernetesObject)).toEqual([]);
  });

  it('validates every custom resource against its own CRD schema', () => {
    const custom = all.filter((o) => !isBuiltInKind(o));
    const kinds = [...new Set(custom.map((o) => o.kind))].sort();
    expect(kinds).toEqual([
      'AgentToAgentProvider',
      'AgentToolProvider',
      'GridNetwork',
      'GridSite',
      'InferenceProvider',
      'SiteInvite',
    ]);
    expect(custom).toHaveLength(13);
    expect(
      custom.flatMap((o) =>
        validateCustomResource(o).map((issue) => `${o.kind}/${o.metadata.name} ${issue.path}: ${issue.message}`),
      ),
    ).toEqual([]);
  });

  it('renders gateway configs the gateway itself loads, in the role each gateway plays', () => {
    const roles = all
      .filter(
        (o) =>
          o.kind === 'ConfigMap' &&
          (o as unknown as { data?: Record<string, string> }).data?.['praxis.yaml'] !== undefined,
      )
      .map((o) => {
        const text = (o as unknown as { data: Record<string, string> }).data['praxis.yaml'] ?? '';
        return `${o.metadata.name}: ${resolveConfig(parseConfigText(text, `${o.metadata.name}/praxis.yaml`), o.metadata.name).role}`;
      });
    expect(roles).toEqual([
      'provider-gateway-config: provider',
      'consumer-gateway-config: consumer',
      'provider-gateway-config: provider',
    ]);
  });

  it('holds no Secret values: no Secret objects, no inline key material, secrets only by name', () => {
    // The CRD descriptions talk about keys and PEM markers; the objects we generate must never contain them.
    const generated = [...dist.entries()]
      .filter(([file]) => file !== 'crds.k8s.yaml')
      .flatMap(([, objects]) => objects);
    const text = JSON.stringify(generated);
    expect(all.filter((o) => o.kind === 'Secret')).toEqual([]);
    expect(text).not.toMatch(/-----BEGIN|PRIVATE KEY|stringData|"token":|Bearer [A-Za-z0-9]/u);
    expect(JSON.stringify(dist.get('crds.k8s.yaml'))).not.toMatch(/-----BEGIN [A-Z ]+-----[A-Za-z0-9+/=\s]{20}/u);
    for (const deployment of all.filter((o) => o.kind === 'Deployment')) {
      const spec = podSpec(deployment);
      for (const container of [...(spec.initContainers ?? []), ...spec.containers]) {
        // A *_FILE variable may name where a mounted Secret's file is (GRID_DASHBOARD_TOKEN_FILE), nothing else.
        const mounts = (container.volumeMounts ?? []).map((m) => `${m.mountPath}/`);
        const pointsIntoMount = (env: { name: string; value?: string }): boolean =>
          env.name.endsWith('_FILE') && mounts.some((m) => env.value?.startsWith(m) === true);
        const literal = (container.env ?? []).filter(
          (env) =>
            env.value !== undefined &&
            /TOKEN|PASSWORD|SECRET|ENCRYPT_KEY|API_KEY/u.test(env.name) &&
            !pointsIntoMount(env),
        );
        expect(literal, `${deployment.metadata.name}/${container.name}`).toEqual([]);
      }
    }
  });

  it('keeps credentials and tokens out of consumer manifests', () => {
    const east = dist.get('east.k8s.yaml') ?? [];
    const consumer = east.filter((o) => o.metadata.name.startsWith('consumer-gateway'));
    expect(consumer.map((o) => o.kind).sort()).toEqual([
      'ConfigMap',
      'Deployment',
      'NetworkPolicy',
      'Role',
      'RoleBinding',
      'Service',
      'ServiceAccount',
    ]);
    const text = JSON.stringify(consumer);
    for (const secret of ['east-llm-a-credential', 'east-llm-b-credential', 'west-llm-credential', 'openai-credential'])
      expect(text).not.toContain(secret);
    expect(text).not.toContain('/etc/praxis/credentials');
    const pod = podSpec(consumer.find((o) => o.kind === 'Deployment') as Manifest);
    expect(
      pod.containers.find((c) => c.name === 'gateway')?.volumeMounts?.some((m) => m.name === 'overlay-sync-token'),
    ).toBe(false);
  });

  it('scopes every overlay-sync Role by resourceNames and has no wildcard RBAC anywhere', () => {
    const roles = all.filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole') as unknown as {
      metadata: { name: string };
      rules: {
        verbs: string[];
        resources?: string[];
        apiGroups?: string[];
        resourceNames?: string[];
        nonResourceURLs?: string[];
      }[];
    }[];
    for (const role of roles) {
      for (const rule of role.rules) {
        expect([
          ...rule.verbs,
          ...(rule.resources ?? []),
          ...(rule.apiGroups ?? []),
          ...(rule.nonResourceURLs ?? []),
        ]).not.toContain('*');
      }
    }
    const sync = roles.filter((r) => r.metadata.name.endsWith('-overlay-sync'));
    expect(sync.map((r) => r.rules)).toEqual([
      [
        {
          apiGroups: [''],
          resources: ['configmaps'],
          verbs: ['get', 'list', 'watch'],
          resourceNames: ['grid-overlay-demo-consumer-gateway'],
        },
      ],
    ]);
  });

  it("routes the external API provider only through west's provider gateway, which alone mounts its credential", () => {
    const mounts = all
      .filter((o) => o.kind === 'Deployment' && JSON.stringify(podSpec(o).volumes ?? []).includes('openai-credential'))
      .map((o) => `${o.metadata.name}`);
    expect(mounts).toEqual(['provider-gateway']);
    expect(JSON.stringify(dist.get('west.k8s.yaml'))).toContain('/etc/praxis/credentials/openai-credential/token');
  });
});

describe('a failing synth', () => {
  it('writes nothing when a construct fails while the grid is built', () => {
    const out = join(work, 'bad-build');
    const bad = twoSiteGrid({ b: { gatewayEndpoint: { address: 'gateway.b.example.com:8443' } } });
    expect(() => synthGrid(bad, out)).toThrow(GridSynthError);
    expect(existsSync(out)).toBe(false);
  });

  it('writes nothing when a synth-time validation fails', () => {
    const out = join(work, 'bad-validate');
    // A provider gateway with nothing behind it: its config fails the gateway-config schema (no routes).
    const bad = { network: { name: 'net' }, sites: [site('lonely')] };
    expect(() => synthGrid(bad, out)).toThrow(
      /lonely\/provider-gateway\/Workload: praxis\.yaml\/filter_chains\/0\/filters\/3\/routes: must NOT have fewer than 1 items/u,
    );
    expect(existsSync(out)).toBe(false);
  });
});
