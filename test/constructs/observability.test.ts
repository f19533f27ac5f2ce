// The `observability` declaration: with it, every daemon container of a site (operator, overlay-sync and its
// serving twin, both gateways; init containers too) gets the standard OTEL_* environment, with the pod and node
// names from the downward API referenced as $(VAR) after they are defined, and the SDK reads the resource
// attributes back exactly as declared. A site overrides the grid's fields or turns tracing off. Without it the
// compiled output does not change by a byte. Bad values fail synth naming the field, the credential never repeated.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Testing } from 'cdk8s';
import { resourceAttributesEnvDetector } from '@opentelemetry/resources';
import { afterAll, describe, expect, it } from 'vitest';
import { buildGrid, gridProblems, synthGrid } from '../../constructs/grid.ts';
import type { GridDeclaration, SiteDeclaration } from '../../constructs/grid-declaration.ts';
import type { ObservabilityDeclaration } from '../../constructs/observability.ts';
import { ProviderGateway } from '../../constructs/provider-gateway.ts';
import { LABEL_NAME } from '../../constructs/labels.ts';
import { expandReferences } from '../../daemons/local-grid/container-env.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { chart, podSpec, twoSiteGrid, type Container, type Manifest } from './helpers.ts';
import { validateKubernetesObject } from './k8s-schema.ts';
import { synthFailure } from './synth-failure.ts';

const ENDPOINT = 'http://otel-collector.observability.svc.cluster.local:4318';
const work = mkdtempSync(join(tmpdir(), 'agn-observability-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** a runs both gateways with gridServing (so the serving-sync pair exists too); b offers one provider. */
function grid(
  observability: ObservabilityDeclaration | undefined,
  sites: { a?: Partial<SiteDeclaration>; b?: Partial<SiteDeclaration> } = {},
): GridDeclaration {
  const base = twoSiteGrid({
    a: { consumerGateway: { gridServing: {} }, peerSignals: { advertise: 'signals.a.example.com:7950' }, ...sites.a },
    b: { peerSignals: { advertise: 'signals.b.example.com:7950' }, ...sites.b },
  });
  return observability === undefined ? base : { ...base, observability };
}

function compile(declaration: GridDeclaration): Record<string, Manifest[]> {
  const built = buildGrid(Testing.app(), declaration);
  return Object.fromEntries(built.sites.map((stack) => [stack.siteName, Testing.synth(stack) as Manifest[]]));
}

interface DaemonContainer {
  readonly site: string;
  readonly deployment: string;
  readonly component: string;
  readonly container: Container;
}

function containers(compiled: Record<string, Manifest[]>): DaemonContainer[] {
  return Object.entries(compiled).flatMap(([site, objects]) =>
    objects
      .filter((o) => o.kind === 'Deployment')
      .flatMap((deployment) => {
        const spec = podSpec(deployment);
        return [...(spec.initContainers ?? []), ...spec.containers].map((container) => ({
          site,
          deployment: deployment.metadata.name,
          component: deployment.metadata.labels?.[LABEL_NAME] ?? '',
          container,
        }));
      }),
  );
}

const telemetryEnv = (container: Container) => (container.env ?? []).filter((e) => /^(OTEL_|K8S_)/u.test(e.name));
const envValue = (container: Container, name: string) => (container.env ?? []).find((e) => e.name === name)?.value;

describe('observability on every daemon', () => {
  const compiled = compile(
    grid({ otlpEndpoint: ENDPOINT, resourceAttributes: { 'deployment.environment.name': 'prod' } }),
  );
  const all = containers(compiled);

  it('gives every daemon container, init containers too, its service name and the collector, and the sims nothing', () => {
    const traced = all
      .filter((c) => telemetryEnv(c.container).length > 0)
      .map((c) => `${c.site}/${c.deployment}/${c.container.name}=${envValue(c.container, 'OTEL_SERVICE_NAME')}`);
    expect(traced.sort()).toEqual([
      'a/consumer-gateway/gateway=consumer-gateway',
      'a/consumer-gateway/overlay-sync-init=overlay-sync',
      'a/consumer-gateway/overlay-sync=overlay-sync',
      'a/consumer-gateway/serving-sync-init=overlay-sync',
      'a/consumer-gateway/serving-sync=overlay-sync',
      'a/gossip-operator/gossip-operator=gossip-operator',
      'a/provider-gateway/gateway=provider-gateway',
      'b/gossip-operator/gossip-operator=gossip-operator',
      'b/provider-gateway/gateway=provider-gateway',
    ]);
    const sims = all.filter((c) => c.component === 'inference-backend');
    expect(sims.map((c) => c.deployment).sort()).toEqual(['sim-pa', 'sim-pb']);
    for (const sim of sims) expect(telemetryEnv(sim.container)).toEqual([]);
  });

  it('renders the downward API variables first, then the OTLP settings and the resource attributes that reference them', () => {
    const gateway = all.find(
      (c) => c.site === 'a' && c.deployment === 'consumer-gateway' && c.container.name === 'gateway',
    )!;
    expect(telemetryEnv(gateway.container)).toEqual([
      { name: 'K8S_POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'K8S_NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
      { name: 'OTEL_SERVICE_NAME', value: 'consumer-gateway' },
      { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: ENDPOINT },
      { name: 'OTEL_EXPORTER_OTLP_PROTOCOL', value: 'http/protobuf' },
      {
        name: 'OTEL_RESOURCE_ATTRIBUTES',
        value:
          'grid.network=net,grid.site=a,k8s.namespace.name=grid-system,k8s.deployment.name=consumer-gateway,k8s.container.name=gateway,' +
          'deployment.environment.name=prod,k8s.pod.name=$(K8S_POD_NAME),k8s.node.name=$(K8S_NODE_NAME)',
      },
    ]);
    // Kubernetes expands $(VAR) only to a variable defined earlier in the same list: every traced container has both
    // before the attributes, and its other settings are untouched.
    for (const { container } of all.filter((c) => telemetryEnv(c.container).length > 0)) {
      const names = (container.env ?? []).map((e) => e.name);
      expect(names.indexOf('K8S_POD_NAME')).toBeLessThan(names.indexOf('OTEL_RESOURCE_ATTRIBUTES'));
      expect(names.indexOf('K8S_NODE_NAME')).toBeLessThan(names.indexOf('OTEL_RESOURCE_ATTRIBUTES'));
      expect(new Set(names).size).toBe(names.length);
    }
    const b = all.find((c) => c.site === 'b' && c.deployment === 'provider-gateway')!;
    expect(envValue(b.container, 'OTEL_RESOURCE_ATTRIBUTES')).toMatch(
      /^grid\.network=net,grid\.site=b,k8s\.namespace\.name=grid-system,k8s\.deployment\.name=provider-gateway,k8s\.container\.name=gateway,/u,
    );
    expect(envValue(b.container, 'OTEL_TRACES_SAMPLER')).toBeUndefined();
  });

  it('renders Deployments the Kubernetes schema accepts', () => {
    for (const objects of Object.values(compiled)) {
      for (const deployment of objects.filter((o) => o.kind === 'Deployment'))
        expect(validateKubernetesObject(deployment), deployment.metadata.name).toEqual([]);
    }
  });
});

describe('what the SDK reads from the rendered environment', () => {
  /** OTEL_RESOURCE_ATTRIBUTES as the kubelet hands it to the process, read by the OpenTelemetry JS resource detector. */
  function detected(container: Container, pod: string, node: string): Record<string, unknown> {
    const raw = envValue(container, 'OTEL_RESOURCE_ATTRIBUTES')!;
    const saved = process.env['OTEL_RESOURCE_ATTRIBUTES'];
    process.env['OTEL_RESOURCE_ATTRIBUTES'] = expandReferences(raw, { K8S_POD_NAME: pod, K8S_NODE_NAME: node });
    try {
      return resourceAttributesEnvDetector.detect().attributes as Record<string, unknown>;
    } finally {
      if (saved === undefined) delete process.env['OTEL_RESOURCE_ATTRIBUTES'];
      else process.env['OTEL_RESOURCE_ATTRIBUTES'] = saved;
    }
  }

  it('is every declared attribute exactly, separators, $(...) and non-ASCII included, and the pod and node names', () => {
    const tricky = {
      'deployment.environment.name': 'prod, eu=1 $(K8S_POD_NAME) %41',
      'team.name': 'Zürich-ü',
      cost_center: ' 42 ',
    };
    const compiled = compile(grid({ otlpEndpoint: ENDPOINT, resourceAttributes: tricky }));
    const overlaySync = containers(compiled).find((c) => c.site === 'a' && c.container.name === 'overlay-sync')!;
    expect(detected(overlaySync.container, 'consumer-gateway-7d9f-abcde', 'node-3')).toEqual({
      'grid.network': 'net',
      'grid.site': 'a',
      'k8s.namespace.name': 'grid-system',
      'k8s.deployment.name': 'consumer-gateway',
      'k8s.container.name': 'overlay-sync',
      'k8s.pod.name': 'consumer-gateway-7d9f-abcde',
      'k8s.node.name': 'node-3',
      ...tricky,
    });
  });
});

describe('the sampler', () => {
  it('renders parentbased_traceidratio with the ratio, for 0 and 1 as well', () => {
    for (const [ratio, arg] of [
      [0.25, '0.25'],
      [0, '0'],
      [1, '1'],
    ] as const) {
      const gateway = containers(compile(grid({ otlpEndpoint: ENDPOINT, samplerRatio: ratio }))).find(
        (c) => c.deployment === 'provider-gateway',
      )!.container;
      expect(envValue(gateway, 'OTEL_TRACES_SAMPLER')).toBe('parentbased_traceidratio');
      expect(envValue(gateway, 'OTEL_TRACES_SAMPLER_ARG')).toBe(arg);
    }
  });
});

describe('a site and the grid', () => {
  it("lets a site override the grid's fields, merging resource attributes key by key", () => {
    const compiled = compile(
      grid(
        {
          otlpEndpoint: ENDPOINT,
          resourceAttributes: { 'team.name': 'platform', 'deployment.environment.name': 'prod' },
        },
        {
          a: {
            observability: {
              otlpEndpoint: 'https://collector.eu.example.com/otlp',
              samplerRatio: 0.5,
              resourceAttributes: { 'deployment.environment.name': 'staging' },
            },
          },
        },
      ),
    );
    const a = containers(compiled).find((c) => c.site === 'a' && c.deployment === 'gossip-operator')!.container;
    expect(envValue(a, 'OTEL_EXPORTER_OTLP_ENDPOINT')).toBe('https://collector.eu.example.com/otlp');
    expect(envValue(a, 'OTEL_TRACES_SAMPLER_ARG')).toBe('0.5');
    expect(envValue(a, 'OTEL_RESOURCE_ATTRIBUTES')).toContain(
      ',deployment.environment.name=staging,team.name=platform,',
    );
    const b = containers(compiled).find((c) => c.site === 'b' && c.deployment === 'gossip-operator')!.container;
    expect(envValue(b, 'OTEL_EXPORTER_OTLP_ENDPOINT')).toBe(ENDPOINT);
    expect(envValue(b, 'OTEL_TRACES_SAMPLER_ARG')).toBeUndefined();
    expect(envValue(b, 'OTEL_RESOURCE_ATTRIBUTES')).toContain(',deployment.environment.name=prod,team.name=platform,');
  });

  it('traces one site that declares it alone, and none where a site says false', () => {
    const compiled = compile(grid(undefined, { b: { observability: { otlpEndpoint: ENDPOINT } } }));
    const traced = containers(compiled).filter((c) => telemetryEnv(c.container).length > 0);
    expect([...new Set(traced.map((c) => c.site))]).toEqual(['b']);
    const off = compile(grid({ otlpEndpoint: ENDPOINT }, { a: { observability: false } }));
    expect(
      containers(off)
        .filter((c) => telemetryEnv(c.container).length > 0)
        .map((c) => c.site)
        .sort(),
    ).toEqual(['b', 'b']);
    // A site turned off compiles to exactly what it does without any observability.
    expect(JSON.stringify(off['a'])).toBe(JSON.stringify(compile(grid(undefined))['a']));
  });
});

describe('without observability', () => {
  it('compiles to the same objects as a grid whose every site turns it off, with no OTEL_ or K8S_ variable', () => {
    const none = compile(grid(undefined));
    expect(
      JSON.stringify(
        compile(grid({ otlpEndpoint: ENDPOINT }, { a: { observability: false }, b: { observability: false } })),
      ),
    ).toBe(JSON.stringify(none));
    expect(containers(none).flatMap((c) => telemetryEnv(c.container))).toEqual([]);
  });

  it('leaves the committed example (dist/, which declares none) without any trace setting', () => {
    const dist = join(REPO_ROOT, 'dist');
    for (const file of readdirSync(dist))
      expect(readFileSync(join(dist, file), 'utf8'), file).not.toMatch(/OTEL_|K8S_POD_NAME|K8S_NODE_NAME/u);
  });
});

describe('observability mistakes', () => {
  const problems = (
    observability: unknown,
    sites: { a?: Partial<SiteDeclaration>; b?: Partial<SiteDeclaration> } = {},
  ) => gridProblems(grid(observability as ObservabilityDeclaration, sites));

  it('refuses an endpoint that is not an http(s) base URL, saying why and what to write', () => {
    const fix =
      "Fix: name the collector's OTLP/HTTP base URL, such as http://otel-collector.observability.svc.cluster.local:4318";
    expect(problems({ otlpEndpoint: 'ftp://collector:21' })).toEqual([
      `declaration: observability.otlpEndpoint: ftp: is not http or https. ${fix}`,
    ]);
    expect(problems({ otlpEndpoint: 'otel-collector:4318' })).toEqual([
      `declaration: observability.otlpEndpoint: otel-collector: is not http or https. ${fix}`,
    ]);
    expect(problems({ otlpEndpoint: 'not a url' })).toEqual([
      `declaration: observability.otlpEndpoint: "not a url" is not a URL. ${fix}`,
    ]);
    expect(problems({})).toEqual([`declaration: observability.otlpEndpoint: no otlpEndpoint is declared. ${fix}`]);
    expect(problems({ otlpEndpoint: 42 })).toEqual([
      `declaration: observability.otlpEndpoint: 42 is not a URL. ${fix}`,
    ]);
    expect(problems({ otlpEndpoint: 'http://collector:4318/#traces' })).toEqual([
      'declaration: observability.otlpEndpoint: the URL has a query or fragment, which the exporters would put before /v1/traces. Fix: give the base URL only (scheme, host, port and an optional path)',
    ]);
  });

  it('refuses credentials in the endpoint, in a query too, without repeating them', () => {
    for (const endpoint of [
      'https://tracer:s3cr3t-t0ken@collector.example.com:4318',
      'https://s3cr3t-t0ken@collector.example.com',
      'https://collector.example.com/?api_key=s3cr3t-t0ken',
    ]) {
      const lines = problems({ otlpEndpoint: endpoint });
      expect(lines, endpoint).toHaveLength(1);
      expect(lines[0]).toMatch(/^declaration: observability\.otlpEndpoint: the URL (carries credentials|has a query)/u);
      expect(lines.join('\n')).not.toContain('s3cr3t');
    }
  });

  it('refuses a protocol the daemons do not speak, a ratio outside 0..1 and unknown fields', () => {
    expect(problems({ otlpEndpoint: ENDPOINT, protocol: 'grpc' })).toEqual([
      'declaration: observability.protocol: "grpc" is not a protocol the daemons export with. Fix: use http/protobuf (the collector\'s OTLP/HTTP port, 4318 by default), or leave it unset',
    ]);
    for (const [ratio, said] of [
      [1.5, '1.5'],
      [-0.1, '-0.1'],
      [Number.NaN, 'NaN'],
      [Number.POSITIVE_INFINITY, 'Infinity'],
      ['0.5', '"0.5"'],
    ] as const) {
      expect(problems({ otlpEndpoint: ENDPOINT, samplerRatio: ratio }), said).toEqual([
        `declaration: observability.samplerRatio: ${said} is not a fraction from 0 to 1. Fix: give the share of new traces to record, such as 0.1 for one in ten, or leave it unset to record every trace`,
      ]);
    }
    expect(problems({ otlpEndpoint: ENDPOINT, samplingRatio: 0.1 })).toEqual([
      'declaration: observability.samplingRatio: is not an observability field. Fix: use otlpEndpoint, protocol, samplerRatio, resourceAttributes',
    ]);
  });

  it('refuses resource attributes the compiler sets, bad names and values the SDK would drop', () => {
    expect(
      problems({
        otlpEndpoint: ENDPOINT,
        resourceAttributes: {
          'service.name': 'x',
          'k8s.pod.name': 'y',
          'bad key!': 'z',
          '9lives': 'z',
          long: 'v'.repeat(256),
          count: 3,
          multi: 'a\nb',
        },
      }),
    ).toEqual([
      'declaration: observability.resourceAttributes[service.name]: service.name is set by the compiler for every container. Fix: drop it; name your own attribute, such as deployment.environment.name',
      'declaration: observability.resourceAttributes[k8s.pod.name]: k8s.pod.name is set by the compiler for every container. Fix: drop it; name your own attribute, such as deployment.environment.name',
      "declaration: observability.resourceAttributes[bad key!]: \"bad key!\" is not an attribute name. Fix: use letters, digits, '.', '_' and '-', starting with a letter, at most 255 characters (OpenTelemetry names are lowercase and dotted, such as team.name)",
      "declaration: observability.resourceAttributes[9lives]: \"9lives\" is not an attribute name. Fix: use letters, digits, '.', '_' and '-', starting with a letter, at most 255 characters (OpenTelemetry names are lowercase and dotted, such as team.name)",
      'declaration: observability.resourceAttributes[long]: the value is 256 characters long; the SDK discards every resource attribute when one is over 255. Fix: shorten it to at most 255 characters',
      'declaration: observability.resourceAttributes[count]: 3 is not a string. Fix: give the value as a string (OTEL_RESOURCE_ATTRIBUTES carries strings only)',
      'declaration: observability.resourceAttributes[multi]: the value contains a control character. Fix: remove line breaks, tabs and other control characters',
    ]);
  });

  it("reports a site's own mistakes at the site, and a site that inherits no endpoint", () => {
    expect(
      problems(undefined, {
        a: { observability: { samplerRatio: 0.1 } },
        b: { observability: { otlpEndpoint: ENDPOINT, samplerRatio: 2 } },
      }),
    ).toEqual([
      "a: observability.otlpEndpoint: site a declares observability without an otlpEndpoint, and the grid declares none. Fix: set observability.otlpEndpoint on the site or on the grid declaration, or set the site's observability to false",
      'b: observability.samplerRatio: 2 is not a fraction from 0 to 1. Fix: give the share of new traces to record, such as 0.1 for one in ten, or leave it unset to record every trace',
    ]);
    // With a grid endpoint, a site may set only what differs.
    expect(problems({ otlpEndpoint: ENDPOINT }, { a: { observability: { samplerRatio: 0.1 } } })).toEqual([]);
    expect(problems({ otlpEndpoint: ENDPOINT }, { a: { observability: 'on' as never } })).toEqual([
      'a: observability: "on" is not an observability declaration. Fix: declare { otlpEndpoint, ... }, or false to turn tracing off for the site',
    ]);
  });

  it('fails synth with the same lines, a grid mistake said once though every site inherits it', () => {
    const declaration = grid({ otlpEndpoint: ENDPOINT, protocol: 'grpc' as never });
    const out = join(work, 'out');
    const lines = synthFailure(() => synthGrid(declaration, out)).split('\n');
    expect(lines).toEqual(gridProblems(declaration));
    expect(lines).toHaveLength(1);
    expect(existsSync(out)).toBe(false);
  });

  it('checks telemetry handed to a construct directly', () => {
    const scope = chart();
    const gateway = new ProviderGateway(scope, 'pg', {
      namespace: 'ns',
      site: 's',
      trustedPeers: [{ organization: 'o' }],
    });
    const message = synthFailure(() =>
      gateway.enableTracing({
        otlpEndpoint: 'http://u:pw@c:4318',
        protocol: 'http/protobuf',
        resourceAttributes: {},
        network: 'n',
        site: 's',
        namespace: 'ns',
      }),
    );
    expect(message).toMatch(/^test\/pg: observability\.otlpEndpoint: the URL carries credentials/u);
    expect(message).not.toContain('pw@');
  });
});
