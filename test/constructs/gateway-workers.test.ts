// The gateways' worker count (daemons/gateway/README.md "Workers") compiled into the Deployment: `--workers N` on the
// command line and requests/limits that scale per worker; one worker renders exactly what it did before the setting
// existed; counts and CPU limits the workers cannot use fail synth, naming the field.
import { Testing } from 'cdk8s';
import * as kplus from 'cdk8s-plus-28';
import { describe, expect, it } from 'vitest';
import { ConsumerGateway } from '../../constructs/consumer-gateway.ts';
import type { ConsumerGatewayProps } from '../../constructs/consumer-gateway.ts';
import { buildGrid, validateGrid } from '../../constructs/grid.ts';
import { ProviderGateway } from '../../constructs/provider-gateway.ts';
import type { ProviderGatewayProps } from '../../constructs/provider-gateway.ts';
import { resources } from '../../constructs/workload-defaults.ts';
import { chart, find, podSpec, synth, twoSiteGrid, type Manifest } from './helpers.ts';

const consumerBase = {
  namespace: 'grid-system',
  network: 'demo',
  site: 'east',
  upstreams: [
    {
      cluster: 'west-llm',
      address: 'gateway.west.example.com:8443',
      transport: { mode: 'mutual_tls', sni: 'gateway.west.example.com' },
    },
  ],
} satisfies ConsumerGatewayProps;

function consumer(extra: Partial<ConsumerGatewayProps> = {}) {
  const c = chart();
  new ConsumerGateway(c, 'consumer', { ...consumerBase, ...extra });
  return c;
}

function provider(extra: Partial<ProviderGatewayProps> = {}) {
  const c = chart();
  new ProviderGateway(c, 'provider', {
    namespace: 'grid-system',
    site: 'west',
    trustedPeers: [{ organization: 'consumers' }],
    backends: [{ name: 'backend', endpoint: 'sim.grid-system.svc.cluster.local:8080' }],
    routes: [{ candidateId: 'aaaaaaaa', model: 'm1', backendCluster: 'backend' }],
    ...extra,
  });
  return c;
}

function gatewayContainer(objects: Manifest[], name: string) {
  const container = podSpec(find(objects, 'Deployment', name)).containers.find((c) => c.name === 'gateway');
  if (container === undefined) throw new Error(`no gateway container in ${name}`);
  return container as typeof container & { resources: unknown };
}

describe('gateway workers', () => {
  it('one worker (the default) renders no flag and the single-worker resources', () => {
    for (const [objects, name] of [
      [synth(consumer()), 'consumer-gateway'],
      [synth(provider()), 'provider-gateway'],
    ] as const) {
      const container = gatewayContainer(objects, name);
      expect(container.command).toEqual(['node', 'daemons/gateway/main.ts', '--config', '/etc/praxis/praxis.yaml']);
      expect(container.resources).toEqual({
        limits: { cpu: '1000m', memory: '512Mi' },
        requests: { cpu: '100m', memory: '128Mi' },
      });
    }
    expect(new ConsumerGateway(chart(), 'c', consumerBase).workers).toBe(1);
  });

  it('N workers: --workers N and requests and limits scaled per worker, on both roles', () => {
    const c = gatewayContainer(synth(consumer({ workers: 2 })), 'consumer-gateway');
    expect(c.command).toEqual([
      'node',
      'daemons/gateway/main.ts',
      '--config',
      '/etc/praxis/praxis.yaml',
      '--workers',
      '2',
    ]);
    expect(c.resources).toEqual({
      limits: { cpu: '2000m', memory: '1024Mi' },
      requests: { cpu: '200m', memory: '256Mi' },
    });
    const p = gatewayContainer(synth(provider({ workers: 3 })), 'provider-gateway');
    expect(p.command?.slice(-2)).toEqual(['--workers', '3']);
    expect(p.resources).toEqual({
      limits: { cpu: '3000m', memory: '1536Mi' },
      requests: { cpu: '300m', memory: '384Mi' },
    });
  });

  it('keeps explicit resources whose CPU limit gives every worker a core', () => {
    const explicit: kplus.ContainerResources = { cpu: { request: kplus.Cpu.units(2), limit: kplus.Cpu.units(2) } };
    const c = gatewayContainer(synth(consumer({ workers: 2, resources: explicit })), 'consumer-gateway');
    expect(c.resources).toEqual({ limits: { cpu: '2' }, requests: { cpu: '2' } });
    expect(() => validateGrid(consumer({ workers: 2, resources: resources(500, 256, 2500, 1024) }))).not.toThrow();
  });

  it('refuses a CPU limit below one core per worker, naming the field and the fix', () => {
    expect(() => validateGrid(consumer({ workers: 2, resources: resources(100, 128, 1000, 512) }))).toThrow(
      /resources\.cpu\.limit: a CPU limit of 1000m gives 2 workers less than one core each.*Fix: set resources\.cpu\.limit to at least 2 CPUs, or declare workers: 1/su,
    );
    expect(() => validateGrid(provider({ workers: 4, resources: { cpu: { limit: kplus.Cpu.units(3.5) } } }))).toThrow(
      /a CPU limit of 3\.5 gives 4 workers/u,
    );
  });

  it.each([[0], [1.5], [65], [-2]])('refuses workers: %s', (workers) => {
    expect(() => validateGrid(provider({ workers }))).toThrow(
      new RegExp(`workers: workers must be a whole number from 1 to 64, got ${workers}`, 'u'),
    );
  });

  it('refuses per-key limits with more than one worker (each worker would count a key on its own)', () => {
    const tenants = {
      callerKeys: { secretName: 'keys', budgetEnforce: { requestsPerMinute: 60 } },
      spendReportUrl: 'http://gossip-operator.grid-system.svc:9444',
    };
    expect(() => consumer({ workers: 2, ...tenants })).toThrow(
      /workers: per-key limits are counted in each worker's memory, so 2 workers would let a key through up to 2 times its limit/u,
    );
    expect(() => consumer({ workers: 1, ...tenants })).not.toThrow();
    expect(() =>
      consumer({ workers: 2, ...tenants, callerKeys: { secretName: 'keys', budgetEnforce: { softLimit: 0.9 } } }),
    ).not.toThrow();
  });

  it("is a field of the grid declaration: a site declares its gateways' workers", () => {
    const app = Testing.app();
    const grid = twoSiteGrid({
      a: {
        consumerGateway: { workers: 2 },
        providerGateway: {
          trustedPeers: [{ organization: 'test-consumers' }],
          workers: 2,
          exposure: { type: 'LoadBalancer' },
        },
      },
    });
    const built = buildGrid(app, grid);
    const a = Testing.synth(built.sites.find((s) => s.siteName === 'a')!) as Manifest[];
    expect(gatewayContainer(a, 'consumer-gateway').command?.slice(-2)).toEqual(['--workers', '2']);
    expect(gatewayContainer(a, 'provider-gateway').command?.slice(-2)).toEqual(['--workers', '2']);
    const b = Testing.synth(built.sites.find((s) => s.siteName === 'b')!) as Manifest[];
    expect(gatewayContainer(b, 'provider-gateway').command).not.toContain('--workers');
  });
});
