// A container's env as the local grid hands it to the process, the way the kubelet would: the downward API's pod and
// node names, $(VAR) expanded with Kubernetes' rules, and the OpenTelemetry variables of a grid compiled with
// `observability` passed exactly as compiled while the grid's own addresses are still rewritten for loopback.
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Testing } from 'cdk8s';
import { afterAll, describe, expect, it } from 'vitest';
import { exampleGrid } from '../../constructs/example-grid.ts';
import { buildGrid } from '../../constructs/grid.ts';
import { buildAddressTable } from '../../daemons/local-grid/address-table.ts';
import { compileSite, type ContainerSpec, type PodPlan } from '../../daemons/local-grid/compiled-grid.ts';
import { containerEnv, expandReferences } from '../../daemons/local-grid/container-env.ts';
import { materializePod } from '../../daemons/local-grid/pods.ts';
import type { KubeObject } from '../../daemons/shared/resource-store/types.ts';
import { REPO_ROOT } from '../fixtures-path.ts';

const dir = mkdtempSync(join(tmpdir(), 'agn-container-env-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function counter(): { tcp: () => Promise<number>; gossip: () => Promise<number> } {
  let next = 21000;
  return { tcp: async () => next++, gossip: async () => next++ };
}

describe('$(VAR) expansion', () => {
  const defined = { A: 'alpha', EMPTY: '' };

  it('follows Kubernetes: defined names expand, undefined ones and stray dollars stay, $$ escapes', () => {
    expect(expandReferences('x=$(A),y=$(A)', defined)).toBe('x=alpha,y=alpha');
    expect(expandReferences('$(EMPTY)-', defined)).toBe('-');
    expect(expandReferences('$(B)', defined)).toBe('$(B)');
    expect(expandReferences('$$(A)', defined)).toBe('$(A)');
    expect(expandReferences('cost: $$5', defined)).toBe('cost: $5');
    expect(expandReferences('a$b $ $', defined)).toBe('a$b $ $');
    expect(expandReferences('open $(A', defined)).toBe('open $(A');
    expect(expandReferences('', defined)).toBe('');
  });
});

describe('a container env', () => {
  it('rewrites a grid address but passes OTEL_ variables as compiled, expanding references in both', async () => {
    const built = buildGrid(Testing.app(), exampleGrid);
    const sites = built.sites.map((stack) =>
      compileSite(stack.siteName, `${stack.siteName}.k8s.yaml`, Testing.synth(stack) as KubeObject[]),
    );
    const table = await buildAddressTable(sites, counter());
    const east = sites.find((s) => s.site === 'east')!;
    const pod: PodPlan = east.pods.find((p) => p.id === 'consumer-gateway-0')!;
    const grid = 'http://gossip-operator.grid-system.svc.cluster.local:9090';
    const container: ContainerSpec = {
      name: 'probe',
      env: [
        { name: 'K8S_POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
        { name: 'K8S_NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
        { name: 'GRID_URL', value: grid },
        { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: grid },
        {
          name: 'OTEL_RESOURCE_ATTRIBUTES',
          value: 'a=%24(x),k8s.pod.name=$(K8S_POD_NAME),k8s.node.name=$(K8S_NODE_NAME),later=$(LATER)',
        },
        { name: 'LATER', value: 'late' },
        { name: 'UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
      ],
    };
    const problems: string[] = [];
    const { vars, problems: envProblems } = containerEnv(container, pod, {
      site: 'east',
      table,
      pod,
      mounts: [],
      problems,
    });
    expect(vars['GRID_URL']).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/u);
    expect(vars['OTEL_EXPORTER_OTLP_ENDPOINT']).toBe(grid);
    // Only earlier variables expand (LATER comes after), as the kubelet does it.
    expect(vars['OTEL_RESOURCE_ATTRIBUTES']).toBe(
      `a=%24(x),k8s.pod.name=consumer-gateway-0,k8s.node.name=${hostname()},later=$(LATER)`,
    );
    expect(envProblems).toEqual(['consumer-gateway-0/probe: env UID has a source the local grid cannot provide']);
    expect('UID' in vars).toBe(false);
  });
});

describe('a grid compiled with observability, run locally', () => {
  it('gives every daemon process the OTLP environment as compiled, with its pod and node names, and the sims none', async () => {
    const endpoint = 'http://127.0.0.1:4318';
    const built = buildGrid(Testing.app(), {
      ...exampleGrid,
      observability: {
        otlpEndpoint: endpoint,
        samplerRatio: 0.5,
        resourceAttributes: { 'deployment.environment.name': 'local dev' },
      },
    });
    const sites = built.sites.map((stack) =>
      compileSite(stack.siteName, `${stack.siteName}.k8s.yaml`, Testing.synth(stack) as KubeObject[]),
    );
    const table = await buildAddressTable(sites, counter());
    const seen: string[] = [];
    for (const site of sites) {
      for (const plan of site.pods) {
        const pod = materializePod(site, plan, join(dir, 'grid'), {
          repoRoot: REPO_ROOT,
          table,
          storeDir: join(dir, 'store'),
          manifestsDir: join(dir, 'manifests'),
          secrets: [],
          operatorEnv: {},
        });
        expect(
          pod.problems.filter((p) => p.includes('env ')),
          plan.id,
        ).toEqual([]);
        for (const process of pod.processes) {
          const otel = Object.keys(process.env).filter((name) => name.startsWith('OTEL_'));
          if (process.role === 'sim') {
            expect(otel, process.name).toEqual([]);
            continue;
          }
          seen.push(`${process.name}=${process.env['OTEL_SERVICE_NAME']}`);
          expect(process.env['OTEL_EXPORTER_OTLP_ENDPOINT']).toBe(endpoint);
          expect(process.env['OTEL_EXPORTER_OTLP_PROTOCOL']).toBe('http/protobuf');
          expect(process.env['OTEL_TRACES_SAMPLER']).toBe('parentbased_traceidratio');
          expect(process.env['OTEL_TRACES_SAMPLER_ARG']).toBe('0.5');
          expect(process.env['K8S_POD_NAME']).toBe(plan.id);
          expect(process.env['OTEL_RESOURCE_ATTRIBUTES']).toBe(
            `grid.network=demo,grid.site=${site.site},k8s.namespace.name=grid-system,k8s.deployment.name=${plan.deployment},k8s.container.name=${process.container},` +
              `deployment.environment.name=local%20dev,k8s.pod.name=${plan.id},k8s.node.name=${hostname()}`,
          );
        }
      }
    }
    expect(seen).toEqual(
      expect.arrayContaining([
        'east/gossip-operator/gossip-operator=gossip-operator',
        'east/consumer-gateway-0/overlay-sync-init=overlay-sync',
        'east/consumer-gateway-1/gateway=consumer-gateway',
        'east/consumer-gateway-1/overlay-sync=overlay-sync',
        'west/provider-gateway-1/gateway=provider-gateway',
      ]),
    );
  });
});
