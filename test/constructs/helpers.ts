// Shared test fixtures: a throwaway chart, synthesized objects, and small finders.
import { type Chart, Testing } from 'cdk8s';
import type { GridDeclaration, ProviderDeclaration, SiteDeclaration } from '../../constructs/grid-declaration.ts';
import type { GridTrust } from '../../schemas/generated/grid-trust.ts';

export type Manifest = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [key: string]: unknown;
};

export function chart(): Chart {
  return Testing.chart();
}

export function synth(target: Chart): Manifest[] {
  return Testing.synth(target) as Manifest[];
}

export function find(objects: readonly Manifest[], kind: string, name: string): Manifest {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (found === undefined)
    throw new Error(`no ${kind} ${name} in [${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}]`);
  return found;
}

/** The pod spec of a Deployment manifest. */
export function podSpec(deployment: Manifest): PodSpec {
  return (deployment as unknown as { spec: { template: { spec: PodSpec } } }).spec.template.spec;
}

export interface Container {
  name: string;
  command?: string[];
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; subPath?: string }[];
  [key: string]: unknown;
}

export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  volumes?: { name: string; [key: string]: unknown }[];
  automountServiceAccountToken?: boolean;
  serviceAccountName?: string;
  [key: string]: unknown;
}

/** A simulated provider declaration in the shape the example grid uses. */
export function simProvider(
  name: string,
  models: readonly string[],
  extra: Partial<ProviderDeclaration['spec']> = {},
): ProviderDeclaration {
  return {
    name,
    simulated: true,
    spec: {
      providerKind: 'self_hosted',
      backendKind: 'local',
      models: models.map((model) => ({ name: model })),
      auth: {
        strategy: 'bearer_token',
        secretRef: { name: `${name}-credential`, namespace: 'grid-system', key: 'token' },
      },
      ...extra,
    },
  };
}

/** A site reachable from other sites: LoadBalancer Services for its gossip port and its provider gateway. */
export function site(name: string, extra: Partial<SiteDeclaration> = {}): SiteDeclaration {
  return {
    name,
    gatewayEndpoint: {
      address: `gateway.${name}.example.com:8443`,
      tls: { mode: 'Mutual', serverName: `gateway.${name}.example.com` },
    },
    gossipAddress: `gossip.${name}.example.com:7946`,
    gossipService: { type: 'LoadBalancer' },
    providerGateway: { trustedPeers: [{ organization: 'test-consumers' }], exposure: { type: 'LoadBalancer' } },
    ...extra,
  };
}

/** A pin that names no real certificate: these tests read manifests, no TLS handshake checks it. */
export function fakePin(site: string): string {
  return Buffer.from(site.padEnd(32, '-')).toString('hex').slice(0, 64);
}

/** A trust file with a fake pin for every named site (the shape `agn pki init` writes). */
export function fakeTrust(network: string, sites: readonly string[]): GridTrust {
  return {
    kind: 'GridTrust',
    version: 1,
    network,
    ca: {
      certificatePem: '-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n',
      fingerprint: '0'.repeat(64),
    },
    sites: Object.fromEntries(sites.map((s) => [s, { gatewayPins: [fakePin(s)] }])),
  };
}

/** A small two-site grid: `a` is combined (consumer + provider), `b` offers one provider. */
export function twoSiteGrid(
  overrides: { a?: Partial<SiteDeclaration>; b?: Partial<SiteDeclaration> } = {},
): GridDeclaration {
  return {
    network: { name: 'net' },
    trust: fakeTrust('net', ['a', 'b']),
    sites: [
      site('a', { consumerGateway: {}, providers: [simProvider('pa', ['m1'])], ...overrides.a }),
      site('b', { providers: [simProvider('pb', ['m1', 'm2'])], ...overrides.b }),
    ],
  };
}
