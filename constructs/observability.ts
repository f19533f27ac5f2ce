import * as kplus from 'cdk8s-plus-28';
import type { IConstruct } from 'constructs';
import { constructPath, GridSynthError, type SynthIssue } from './synth-error.ts';

/**
 * Where the daemons send their OpenTelemetry traces, compiled into the standard OTEL_* environment of every daemon
 * container (the variables the OpenTelemetry SDKs and a platform team's collector setup already know), so nothing
 * grid-specific has to be learned to point a grid at a collector. A site without it renders exactly what it did
 * before: no variable, no annotation, no byte of difference.
 */

/** The OTLP transports the daemons export with (@opentelemetry/exporter-trace-otlp-proto). */
export const OTLP_PROTOCOLS = ['http/protobuf'] as const;
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number];

export interface ObservabilityDeclaration {
  /**
   * Base URL of the OTLP/HTTP collector (OTEL_EXPORTER_OTLP_ENDPOINT), such as
   * `http://otel-collector.observability.svc.cluster.local:4318`: http or https, with no credentials, query or
   * fragment. The exporters append `/v1/traces`.
   */
  readonly otlpEndpoint: string;
  /** @default 'http/protobuf' - the only transport the daemons speak yet */
  readonly protocol?: OtlpProtocol;
  /**
   * The fraction of new traces recorded, from 0 to 1 (OTEL_TRACES_SAMPLER=parentbased_traceidratio with this as
   * OTEL_TRACES_SAMPLER_ARG): a request that arrives with a sampled `traceparent` is always recorded, so a trace
   * started at another site is never cut in half.
   * @default - every trace (the SDK default, parentbased_always_on)
   */
  readonly samplerRatio?: number;
  /**
   * Resource attributes every daemon's spans carry besides the ones the compiler sets (service.name, grid.site,
   * grid.network and the k8s.* of the pod), such as `deployment.environment.name`. Keys are letters, digits, `.`,
   * `_` and `-`; values are strings of at most 255 characters.
   * @default - none
   */
  readonly resourceAttributes?: Readonly<Record<string, string>>;
}

/**
 * A site's observability: fields it sets override the grid's (resourceAttributes merge key by key, the site's
 * winning); `false` turns tracing off for the site even when the grid declares it.
 */
export type SiteObservabilityDeclaration = Partial<ObservabilityDeclaration> | false;

/** The component a daemon container reports as its `service.name`. */
export type TracedService = 'gossip-operator' | 'overlay-sync' | 'consumer-gateway' | 'provider-gateway';

/** A site's observability resolved and checked: what every daemon container of the site is given. */
export interface SiteTelemetry {
  readonly otlpEndpoint: string;
  readonly protocol: OtlpProtocol;
  readonly samplerRatio?: number;
  readonly resourceAttributes: Readonly<Record<string, string>>;
  readonly network: string;
  readonly site: string;
  readonly namespace: string;
}

/** The variables the downward API fills, referenced from OTEL_RESOURCE_ATTRIBUTES as $(NAME). */
export const POD_NAME_VARIABLE = 'K8S_POD_NAME';
export const NODE_NAME_VARIABLE = 'K8S_NODE_NAME';

/** Resource attributes the compiler sets per container; a declaration may not set them. */
export const COMPILER_RESOURCE_ATTRIBUTES = [
  'service.name',
  'grid.network',
  'grid.site',
  'k8s.namespace.name',
  'k8s.deployment.name',
  'k8s.pod.name',
  'k8s.container.name',
  'k8s.node.name',
] as const;

/** The SDKs discard the whole of OTEL_RESOURCE_ATTRIBUTES when one key or value is longer (the JS SDK's limit). */
const MAX_ATTRIBUTE_LENGTH = 255;
const ATTRIBUTE_KEY = /^[A-Za-z][A-Za-z0-9._-]*$/u;
const DECLARATION_FIELDS = new Set(['otlpEndpoint', 'protocol', 'samplerRatio', 'resourceAttributes']);

/** The problem with an endpoint URL, or undefined when it is a usable OTLP/HTTP base URL. */
function endpointProblem(value: unknown): { problem: string; fix: string } | undefined {
  const example =
    "name the collector's OTLP/HTTP base URL, such as http://otel-collector.observability.svc.cluster.local:4318";
  if (value === undefined) return { problem: 'no otlpEndpoint is declared', fix: example };
  if (typeof value !== 'string' || value === '')
    return { problem: `${JSON.stringify(value)} is not a URL`, fix: example };
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { problem: `${JSON.stringify(value)} is not a URL`, fix: example };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { problem: `${url.protocol} is not http or https`, fix: example };
  if (url.hostname === '') return { problem: `${JSON.stringify(value)} names no host`, fix: example };
  // Said without repeating the URL: it holds the secret.
  if (url.username !== '' || url.password !== '') {
    return {
      problem: 'the URL carries credentials, which would be written in plain text into every pod spec',
      fix: 'drop the user:password part; to authenticate to a backend, send to a collector in the cluster that holds the credentials',
    };
  }
  if (url.search !== '' || url.hash !== '' || value.includes('?') || value.includes('#')) {
    // Not repeated either: a query is where a token would be.
    return {
      problem: 'the URL has a query or fragment, which the exporters would put before /v1/traces',
      fix: 'give the base URL only (scheme, host, port and an optional path)',
    };
  }
  return undefined;
}

/** Every problem of one observability object; `partial` (a site's override) lets otlpEndpoint be absent. */
function declarationIssues(path: string, value: unknown, partial: boolean): SynthIssue[] {
  const at = (field: string, problem: string, fix: string): SynthIssue => ({
    path,
    field: `observability${field}`,
    problem,
    fix,
  });
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return [
      at(
        '',
        `${JSON.stringify(value)} is not an observability declaration`,
        partial
          ? 'declare { otlpEndpoint, ... }, or false to turn tracing off for the site'
          : 'declare { otlpEndpoint, ... }',
      ),
    ];
  }
  const declared = value as Record<string, unknown>;
  const issues: SynthIssue[] = [];
  for (const key of Object.keys(declared)) {
    if (!DECLARATION_FIELDS.has(key))
      issues.push(at(`.${key}`, 'is not an observability field', `use ${[...DECLARATION_FIELDS].join(', ')}`));
  }
  if ('otlpEndpoint' in declared || !partial) {
    const problem = endpointProblem(declared['otlpEndpoint']);
    if (problem !== undefined) issues.push(at('.otlpEndpoint', problem.problem, problem.fix));
  }
  const protocol = declared['protocol'];
  if (protocol !== undefined && !(OTLP_PROTOCOLS as readonly unknown[]).includes(protocol)) {
    issues.push(
      at(
        '.protocol',
        `${JSON.stringify(protocol)} is not a protocol the daemons export with`,
        `use ${OTLP_PROTOCOLS.join(' or ')} (the collector's OTLP/HTTP port, 4318 by default), or leave it unset`,
      ),
    );
  }
  const ratio = declared['samplerRatio'];
  if (ratio !== undefined && (typeof ratio !== 'number' || !Number.isFinite(ratio) || ratio < 0 || ratio > 1)) {
    issues.push(
      at(
        '.samplerRatio',
        `${typeof ratio === 'number' ? String(ratio) : JSON.stringify(ratio)} is not a fraction from 0 to 1`,
        'give the share of new traces to record, such as 0.1 for one in ten, or leave it unset to record every trace',
      ),
    );
  }
  const attributes = declared['resourceAttributes'];
  if (attributes !== undefined) {
    if (typeof attributes !== 'object' || attributes === null || Array.isArray(attributes)) {
      issues.push(
        at(
          '.resourceAttributes',
          `${JSON.stringify(attributes)} is not a map of attribute names to strings`,
          "declare { 'deployment.environment.name': 'prod' }",
        ),
      );
    } else {
      for (const [key, attribute] of Object.entries(attributes as Record<string, unknown>))
        issues.push(
          ...attributeIssues(key, attribute, (problem, fix) => at(`.resourceAttributes[${key}]`, problem, fix)),
        );
    }
  }
  return issues;
}

function attributeIssues(key: string, value: unknown, at: (problem: string, fix: string) => SynthIssue): SynthIssue[] {
  const issues: SynthIssue[] = [];
  if ((COMPILER_RESOURCE_ATTRIBUTES as readonly string[]).includes(key)) {
    issues.push(
      at(
        `${key} is set by the compiler for every container`,
        'drop it; name your own attribute, such as deployment.environment.name',
      ),
    );
  } else if (!ATTRIBUTE_KEY.test(key) || key.length > MAX_ATTRIBUTE_LENGTH) {
    issues.push(
      at(
        `${JSON.stringify(key)} is not an attribute name`,
        `use letters, digits, '.', '_' and '-', starting with a letter, at most ${MAX_ATTRIBUTE_LENGTH} characters (OpenTelemetry names are lowercase and dotted, such as team.name)`,
      ),
    );
  }
  if (typeof value !== 'string') {
    issues.push(
      at(
        `${JSON.stringify(value)} is not a string`,
        'give the value as a string (OTEL_RESOURCE_ATTRIBUTES carries strings only)',
      ),
    );
  } else if (value.length > MAX_ATTRIBUTE_LENGTH) {
    issues.push(
      at(
        `the value is ${value.length} characters long; the SDK discards every resource attribute when one is over ${MAX_ATTRIBUTE_LENGTH}`,
        `shorten it to at most ${MAX_ATTRIBUTE_LENGTH} characters`,
      ),
    );
  } else if (/[\u0000-\u001f\u007f-\u009f]/u.test(value)) {
    issues.push(at('the value contains a control character', 'remove line breaks, tabs and other control characters'));
  }
  return issues;
}

/**
 * A site's telemetry from the grid's observability and the site's own, with every problem of either: a field the
 * site sets is reported at the site, one it inherits at `declaration` (so every site reports a grid mistake in the
 * same words, said once).
 */
export function resolveSiteTelemetry(
  grid: ObservabilityDeclaration | undefined,
  site: { readonly name: string; readonly observability?: SiteObservabilityDeclaration },
  sitePath: string,
  scope: { readonly network: string; readonly namespace: string },
): { telemetry: SiteTelemetry | undefined; issues: SynthIssue[] } {
  const own = site.observability;
  if (own === false) return { telemetry: undefined, issues: [] };
  if (grid === undefined && own === undefined) return { telemetry: undefined, issues: [] };
  const issues = [
    ...(grid === undefined ? [] : declarationIssues('declaration', grid, false)),
    ...(own === undefined ? [] : declarationIssues(sitePath, own, true)),
  ];
  const merged = { ...(grid ?? {}), ...(own ?? {}) } as Partial<ObservabilityDeclaration>;
  if (
    merged.otlpEndpoint === undefined &&
    issues.every((issue) => issue.field !== 'observability.otlpEndpoint' && issue.field !== 'observability')
  ) {
    issues.push({
      path: sitePath,
      field: 'observability.otlpEndpoint',
      problem: `site ${site.name} declares observability without an otlpEndpoint, and the grid declares none`,
      fix: "set observability.otlpEndpoint on the site or on the grid declaration, or set the site's observability to false",
    });
  }
  if (issues.length > 0) return { telemetry: undefined, issues };
  return {
    telemetry: {
      otlpEndpoint: merged.otlpEndpoint as string,
      protocol: merged.protocol ?? 'http/protobuf',
      ...(merged.samplerRatio === undefined ? {} : { samplerRatio: merged.samplerRatio }),
      resourceAttributes: {
        ...(grid?.resourceAttributes ?? {}),
        ...((own === undefined ? undefined : own.resourceAttributes) ?? {}),
      },
      network: scope.network,
      site: site.name,
      namespace: scope.namespace,
    },
    issues: [],
  };
}

/** Checks telemetry given to a construct directly (GridSiteStack has checked its own already). */
export function checkTelemetry(scope: IConstruct, telemetry: SiteTelemetry): void {
  const { network: _network, site: _site, namespace: _namespace, ...declaration } = telemetry;
  const issues = declarationIssues(constructPath(scope), declaration, false);
  if (issues.length > 0) throw new GridSynthError(issues);
}

/** A literal env value: Kubernetes expands $(NAME) in env values, and $$ is its escape for a plain `$`. */
function literal(value: string): string {
  return value.replaceAll('$', '$$$$');
}

/**
 * OTEL_RESOURCE_ATTRIBUTES for one container (service.name is OTEL_SERVICE_NAME): `key=value` pairs, comma
 * separated, values percent-encoded (the SDKs decode them; encoding also turns every `$` into %24, so no value can
 * be read as a $(NAME) reference). The pod and node names are the downward API's, through the variables rendered
 * before this one.
 */
export function resourceAttributesValue(telemetry: SiteTelemetry, deployment: string, container: string): string {
  const own: [string, string][] = [
    ['grid.network', telemetry.network],
    ['grid.site', telemetry.site],
    ['k8s.namespace.name', telemetry.namespace],
    ['k8s.deployment.name', deployment],
    ['k8s.container.name', container],
  ];
  const declared = Object.entries(telemetry.resourceAttributes).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const pairs = [...own, ...declared].map(([key, value]) => `${key}=${encodeURIComponent(value)}`);
  pairs.push(`k8s.pod.name=$(${POD_NAME_VARIABLE})`, `k8s.node.name=$(${NODE_NAME_VARIABLE})`);
  return pairs.join(',');
}

/**
 * Gives one daemon container the OTEL_* environment. The downward-API variables come first: Kubernetes expands a
 * $(NAME) only to a variable defined earlier in the list.
 */
export function instrumentContainer(
  container: kplus.Container,
  telemetry: SiteTelemetry,
  service: TracedService,
  deployment: string,
): void {
  const env = container.env;
  env.addVariable(POD_NAME_VARIABLE, kplus.EnvValue.fromFieldRef(kplus.EnvFieldPaths.POD_NAME));
  env.addVariable(NODE_NAME_VARIABLE, kplus.EnvValue.fromFieldRef(kplus.EnvFieldPaths.NODE_NAME));
  env.addVariable('OTEL_SERVICE_NAME', kplus.EnvValue.fromValue(service));
  env.addVariable('OTEL_EXPORTER_OTLP_ENDPOINT', kplus.EnvValue.fromValue(literal(telemetry.otlpEndpoint)));
  env.addVariable('OTEL_EXPORTER_OTLP_PROTOCOL', kplus.EnvValue.fromValue(telemetry.protocol));
  if (telemetry.samplerRatio !== undefined) {
    env.addVariable('OTEL_TRACES_SAMPLER', kplus.EnvValue.fromValue('parentbased_traceidratio'));
    env.addVariable('OTEL_TRACES_SAMPLER_ARG', kplus.EnvValue.fromValue(String(telemetry.samplerRatio)));
  }
  env.addVariable(
    'OTEL_RESOURCE_ATTRIBUTES',
    kplus.EnvValue.fromValue(resourceAttributesValue(telemetry, deployment, container.name)),
  );
}
