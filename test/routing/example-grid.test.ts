/**
 * The example grid compiled into dist/ (`npx cdk8s synth`), rendered from east's point of view once the grid is up:
 * east's own InferenceProviders and AgentToolProviders, west's providers as the CRDT records west gossips, west's
 * GridSite Active. The overlay is compared byte for byte with test/fixtures/routing/example-grid.*.overlay.json
 * (regenerate with UPDATE_GOLDEN=1), and cross-checked against the compiled gateway configs: every provider-hop
 * candidate's stable_id must be a candidate_id of the serving site's provider_route (computed at synth time), and
 * every inference cluster an upstream of the consumer gateway.
 *
 * The CRD-to-input mapping below is a test fixture kept minimal on purpose (the operator's own mapping lives in
 * daemons/gossip-operator/controllers/); metrics are fixed samples, since a compiled grid has no live scrape.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import type { GridNetworkSpec } from '../../schemas/generated/gridnetworks.ts';
import { canonicalize } from '../../schemas/canonical-json.ts';
import { serializeOverlay } from '../../schemas/overlay/envelope.ts';
import { renderNetwork } from '../../daemons/routing/index.ts';
import type {
  GatewayReference,
  GridSiteView,
  LocalInferenceProvider,
  LocalToolProvider,
  MetricSignal,
  RemoteProviderRecord,
} from '../../daemons/routing/model.ts';
import { resolveRoutingPolicy } from '../../daemons/routing/policy.ts';
import { gatewayReferences } from '../../daemons/gossip-operator/controllers/routing-input.ts';
import { expectGatewayAccepts, rendered } from './fixtures.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const run = promisify(execFile);
const DIST = join(ROOT, 'dist');
const GOLDEN = join(ROOT, 'test', 'fixtures', 'routing');
const SITE_FILES = { east: 'east.k8s.yaml', west: 'west.k8s.yaml' } as const;
const NOW = Date.parse('2026-07-29T12:00:00Z');
const SOURCE = { uid: 'example-grid-demo', generation: 1, producerVersion: '0.1.0' };
/** Fixed queue depths standing in for the metrics scrape (normalised, 0..1). */
const QUEUE: Readonly<Record<string, number>> = { 'east-llm-a': 0.2, 'east-llm-b': 0.6, 'west-llm': 0.1 };

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Manifest = {
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec: any;
  data?: Record<string, string>;
};

function manifests(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(join(DIST, file), 'utf8'))
    .map((doc) => doc.toJS() as Manifest)
    .filter((m) => m !== null);
}

function ofKind(all: readonly Manifest[], kind: string): Manifest[] {
  return all.filter((m) => m.kind === kind);
}

function siteId(all: readonly Manifest[]): string {
  const operator = ofKind(all, 'Deployment').find((d) => d.metadata.name === 'gossip-operator');
  const env = operator?.spec.template.spec.containers[0].env as { name: string; value?: string }[];
  const value = env.find((e) => e.name === 'GRID_SITE_NAME')?.value;
  if (value === undefined) throw new Error('gossip-operator has no GRID_SITE_NAME');
  return value;
}

function credential(spec: Manifest['spec']) {
  return spec.auth?.strategy === 'bearer_token' && spec.auth.secretRef !== undefined
    ? {
        credential: {
          name: spec.auth.secretRef.name,
          namespace: spec.auth.secretRef.namespace,
          key: spec.auth.secretRef.key ?? 'token',
        },
      }
    : {};
}

function configuredSignals(spec: Manifest['spec']): MetricSignal[] {
  const names = spec.metricsConfig?.signalNames ?? {};
  return (['queueDepth', 'kvCacheUtilization'] as const).filter((s) => typeof names[s] === 'string');
}

function sample(provider: string) {
  const queueDepth = QUEUE[provider];
  return { generation: 1, observedAtMs: NOW, healthy: true, ...(queueDepth === undefined ? {} : { queueDepth }) };
}

function localInference(m: Manifest): LocalInferenceProvider {
  const { spec } = m;
  return {
    name: m.metadata.name,
    network: spec.gridNetworkRef,
    phase: 'Available',
    backendKind: spec.backendKind,
    models: (spec.models ?? []).map((model: { name: string }) => model.name),
    ...(spec.routingClusterRef === undefined ? {} : { routingCluster: spec.routingClusterRef }),
    ...credential(spec),
    ...(spec.siteSelector?.matchLabels === undefined ? {} : { siteSelector: spec.siteSelector.matchLabels }),
    ...(spec.accessPolicy?.siteSelector?.matchLabels === undefined
      ? {}
      : { accessLabels: spec.accessPolicy.siteSelector.matchLabels }),
    ...(spec.capacityWeight === undefined ? {} : { capacityWeight: spec.capacityWeight }),
    ...(spec.metricsConfig === undefined
      ? {}
      : { metrics: { configuredSignals: configuredSignals(spec), sample: sample(m.metadata.name) } }),
  };
}

function localTool(m: Manifest): LocalToolProvider {
  const { spec } = m;
  return {
    name: m.metadata.name,
    network: spec.gridNetworkRef,
    phase: 'Available',
    tools: (spec.tools ?? []).map((t: { name: string }) => t.name),
    ...credential(spec),
    ...(spec.siteSelector?.matchLabels === undefined ? {} : { siteSelector: spec.siteSelector.matchLabels }),
    ...(spec.accessPolicy?.siteSelector?.matchLabels === undefined
      ? {}
      : { accessLabels: spec.accessPolicy.siteSelector.matchLabels }),
  };
}

/**
 * What a remote site gossips for one of its InferenceProviders (docs/contract.md §5 state record), as received here.
 */
function remoteRecord(site: string, m: Manifest): RemoteProviderRecord {
  const { spec } = m;
  const queueDepth = QUEUE[m.metadata.name];
  return {
    network: spec.gridNetworkRef,
    site,
    provider: m.metadata.name,
    routingCluster: spec.routingClusterRef ?? m.metadata.name,
    backendKind: spec.backendKind,
    phase: 'Available',
    models: (spec.models ?? []).map((model: { name: string }) => model.name),
    metrics: { generation: 1, observedAtMs: NOW, healthy: true, ...(queueDepth === undefined ? {} : { queueDepth }) },
    accessLabels: spec.accessPolicy?.siteSelector?.matchLabels ?? {},
    capacityWeight: spec.capacityWeight ?? 1,
    memberState: 'alive',
    memberAgeSeconds: 0,
  };
}

function praxisFilters(all: readonly Manifest[], configMap: string): Record<string, unknown>[] {
  const cm = ofKind(all, 'ConfigMap').find((c) => c.metadata.name === configMap);
  if (cm?.data?.['praxis.yaml'] === undefined) throw new Error(`ConfigMap ${configMap} has no praxis.yaml`);
  const config = parseAllDocuments(cm.data['praxis.yaml'])[0]?.toJS() as {
    filter_chains: { filters: Record<string, unknown>[] }[];
  };
  return config.filter_chains.flatMap((chain) => chain.filters);
}

const available = Object.values(SITE_FILES).every((file) => existsSync(join(DIST, file)));

describe.runIf(available)('example grid from dist/', () => {
  const bySite = Object.fromEntries(
    Object.values(SITE_FILES).map((file) => {
      const all = manifests(file);
      return [siteId(all), all] as const;
    }),
  );

  /** East's overlays for every consumer entry of its compiled GridNetwork, as the operator renders them. */
  function renderEast() {
    const east = bySite['east'] as Manifest[];
    const network = ofKind(east, 'GridNetwork')[0] as Manifest;
    const spec = network.spec as GridNetworkSpec;
    const policy = resolveRoutingPolicy(network.metadata.name, spec);
    if (!policy.ok) throw new Error(policy.error.message);
    const sites: GridSiteView[] = ofKind(east, 'GridSite').map((s) => ({
      name: s.metadata.name,
      network: s.spec.gridNetworkRef,
      // A compiled grid has no status: the own site as a lone operator sees it, peers as once the grid is up.
      phase: s.metadata.name === 'east' ? 'Pending' : 'Active',
      ...(s.spec.region === undefined ? {} : { region: s.spec.region }),
      ...(s.spec.zone === undefined ? {} : { zone: s.spec.zone }),
      labels: s.metadata.labels ?? {},
    }));
    const remoteRecords = Object.entries(bySite)
      .filter(([site]) => site !== 'east')
      .flatMap(([site, all]) => ofKind(all, 'InferenceProvider').map((m) => remoteRecord(site, m)));
    // The operator's own mapping, so the consumer entries' dialects reach the render as they would on a cluster.
    const gateways = gatewayReferences({
      apiVersion: 'grid.praxis.fast/v1alpha1',
      kind: 'GridNetwork',
      metadata: { name: network.metadata.name },
      spec,
    });
    expect(gateways.map((g) => `${g.name}:${g.dialect ?? 'agn'}`)).toEqual([
      'consumer-gateway:agn',
      'praxis-ai:praxis-main',
    ]);

    const result = renderNetwork(
      {
        network: network.metadata.name,
        ownSite: 'east',
        ownGeography: {
          ...(spec.region === undefined ? {} : { region: spec.region }),
          ...(spec.zone === undefined ? {} : { zone: spec.zone }),
        },
        policy: policy.value,
        sites,
        inferenceProviders: ofKind(east, 'InferenceProvider').map(localInference),
        toolProviders: ofKind(east, 'AgentToolProvider').map(localTool),
        remoteRecords,
      },
      gateways,
      SOURCE,
      NOW,
      new Map(),
    );
    return { east, gateways, result };
  }

  it('renders east consumer gateway overlay to the committed golden file, consistent with the compiled gateways', () => {
    const { east, gateways, result } = renderEast();
    expect(result.excluded).toEqual([]);
    const gateway = gateways[0] as GatewayReference;
    const overlay = rendered(result.gateways[0]!.result);
    expectGatewayAccepts(overlay, gateway);

    const text = serializeOverlay(overlay.envelope);
    const golden = join(GOLDEN, `example-grid.${gateway.name}.overlay.json`);
    if (process.env['UPDATE_GOLDEN'] === '1') writeFileSync(golden, text);
    expect(text).toBe(readFileSync(golden, 'utf8'));

    // The consumer gateway routes the overlay's clusters and hops to the provider gateways with its stable_id.
    const intelligentRoute = praxisFilters(east, 'consumer-gateway-config').find(
      (f) => f['filter'] === 'intelligent_route',
    ) as { provider_hop_clusters: string[] };
    const balancer = praxisFilters(east, 'consumer-gateway-config').find((f) => f['filter'] === 'load_balancer') as {
      clusters: { name: string }[];
    };
    const upstreams = new Set(balancer.clusters.map((c) => c.name));
    for (const candidate of overlay.payload.candidates.filter((c) => c.kind === 'inference_model')) {
      expect(upstreams.has(candidate.cluster), `${candidate.cluster} is an upstream of consumer-gateway`).toBe(true);
      expect(intelligentRoute.provider_hop_clusters).toContain(candidate.cluster);
      const route = praxisFilters(bySite[candidate.site] as Manifest[], 'provider-gateway-config').find(
        (f) => f['filter'] === 'provider_route',
      ) as { routes: { candidate_id: string; model: string }[] };
      expect(route.routes).toContainEqual(
        expect.objectContaining({ candidate_id: candidate.stable_id, model: candidate.name }),
      );
    }
    // geographyFirst: east (same_site) before west (cross_region), then score (1 - queue; neutral 0.5 without metrics).
    expect(overlay.payload.candidates.map((c) => `${c.name}@${c.site}/${c.cluster}:${c.selection_group}`)).toEqual([
      'sim-model-v1@east/east-llm-a:0',
      'database-query@east/tool/east-db-tools:0',
      'sim-model-v1@east/east-llm-b:0',
      'sim-model-v2@east/east-llm-b:0',
      'sim-model-v1@west/west-llm:1',
      'gpt-4o-mini@west/openai-west:0',
    ]);
  });

  // Praxis AI main (praxis-proxy/ai@aa2b3feb filters/src/routing/overlay.rs): OverlayDocument has no selection_policy
  // (lines 208-222) and compute_semantic_digest hashes only candidates, local_site and network (lines 606-617), so an
  // overlay carrying selection_policy fails with "envelope digest mismatch" (lines 428-431), at startup too.
  it('gives the Praxis AI main consumer an overlay without selection_policy whose revision is the digest Praxis computes', async () => {
    const { gateways, result } = renderEast();
    const index = gateways.findIndex((g) => g.dialect === 'praxis-main');
    const gateway = gateways[index] as GatewayReference;
    const overlay = rendered(result.gateways[index]!.result);
    expectGatewayAccepts(overlay, gateway);
    const text = serializeOverlay(overlay.envelope);
    const golden = join(GOLDEN, `example-grid.${gateway.name}.overlay.json`);
    if (process.env['UPDATE_GOLDEN'] === '1') writeFileSync(golden, text);
    expect(text).toBe(readFileSync(golden, 'utf8'));

    const published = JSON.parse(text) as {
      overlay: Record<string, unknown>;
      revision: { value: string };
      content_digest: { value: string };
    };
    expect(Object.keys(published.overlay)).not.toContain('selection_policy');
    expect(text).not.toContain('traffic_weight');
    expect(overlay.payload.candidates.length).toBeGreaterThan(0);
    // What Praxis computes, from the raw published JSON as its loader does: SHA-256 of the JCS bytes of exactly
    // {candidates, local_site, network}.
    const { candidates, local_site, network } = published.overlay;
    const praxisDigest = createHash('sha256')
      .update(canonicalize({ candidates, local_site, network }), 'utf8')
      .digest('hex');
    expect(published.content_digest.value).toBe(praxisDigest);
    expect(published.revision.value).toBe(praxisDigest);
    // ...and `agn overlay revision`, the reference, prints it for the published file.
    const dir = mkdtempSync(join(tmpdir(), 'agn-praxis-main-'));
    try {
      const file = join(dir, 'routing-overlay.json');
      writeFileSync(file, text);
      const { stdout } = await run(process.execPath, [
        join(ROOT, 'daemons', 'cli', 'agn.ts'),
        'overlay',
        'revision',
        file,
      ]);
      expect(stdout).toBe(`${praxisDigest}\n`);
      const verify = await run(process.execPath, [
        join(ROOT, 'daemons', 'cli', 'agn.ts'),
        'overlay',
        'verify',
        '--consumer',
        'praxis-main',
        file,
      ]);
      expect(verify.stdout).toBe(`accept ${praxisDigest}\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    // The weightedRandom split of the example's policy is what Praxis main will not honour.
    expect(overlay.unhonoured.map((u) => u.feature)).toEqual(['weighted_split_collapsed']);
    // The same grid's own gateway keeps weightedRandom and its weights.
    const ours = rendered(result.gateways[gateways.findIndex((g) => g.dialect === undefined)]!.result);
    expect(ours.payload.selection_policy).toEqual({ mode: 'weightedRandom' });
    expect(ours.unhonoured).toEqual([]);
  });
});
