/** Builders of routing-core input for the tests: plain data with defaults a test overrides field by field. */
import { expect } from 'vitest';
import { serializeOverlay } from '../../schemas/overlay/envelope.ts';
import { GATEWAY_MAX_OVERLAY_BYTES, validateOverlay } from '../../schemas/overlay/validate.ts';
import type {
  GatewayReference,
  GridSiteView,
  LocalInferenceProvider,
  LocalToolProvider,
  MetricsSample,
  NetworkRoutingInput,
  NetworkRoutingPolicy,
  PressureAdmissionPolicy,
  RemoteProviderRecord,
  RenderSource,
} from '../../daemons/routing/model.ts';
import type { RenderedOverlay } from '../../daemons/routing/render.ts';
import type { RenderError, Result } from '../../daemons/routing/result.ts';

export const NET = 'production';
export const OWN = 'east';
export const T0 = Date.parse('2026-07-29T00:00:00Z');

export function site(name: string, over: Partial<GridSiteView> = {}): GridSiteView {
  return { name, network: NET, phase: 'Active', labels: {}, ...over };
}

/** A remote site's GridSite under its auto-discovered name. */
export function remoteSite(siteId: string, over: Partial<GridSiteView> = {}): GridSiteView {
  return site(`${NET}-${siteId}`, over);
}

export function local(name: string, over: Partial<LocalInferenceProvider> = {}): LocalInferenceProvider {
  return { name, network: NET, phase: 'Available', backendKind: 'local', models: ['model-a'], ...over };
}

export function tool(name: string, over: Partial<LocalToolProvider> = {}): LocalToolProvider {
  return { name, network: NET, phase: 'Available', tools: ['search'], ...over };
}

export function sample(over: Partial<MetricsSample> = {}): MetricsSample {
  return { generation: 1, observedAtMs: T0, healthy: true, ...over };
}

export function remote(
  siteId: string,
  provider: string,
  over: Partial<RemoteProviderRecord> = {},
): RemoteProviderRecord {
  return {
    network: NET,
    site: siteId,
    provider,
    routingCluster: `gateway-${siteId}`,
    backendKind: 'remote',
    phase: 'Available',
    models: ['model-a'],
    memberState: 'alive',
    memberAgeSeconds: 0,
    ...over,
  };
}

export const STABILIZED: PressureAdmissionPolicy = {
  enterThreshold: 0.85,
  exitThreshold: 0.7,
  failureThreshold: 2,
  successThreshold: 3,
  minimumStateDurationSeconds: 10,
  recoveryHoldDownSeconds: 30,
  missingMetrics: 'existingOnly',
};

export function policy(over: Partial<NetworkRoutingPolicy> = {}): NetworkRoutingPolicy {
  return { routingPolicy: 'geographyFirst', scoringStrategy: 'noMetrics', signalTransport: 'gossip', ...over };
}

export function network(over: Partial<NetworkRoutingInput> = {}): NetworkRoutingInput {
  return {
    network: NET,
    ownSite: OWN,
    policy: policy(),
    sites: [site(OWN, { phase: 'Pending' })],
    inferenceProviders: [],
    toolProviders: [],
    remoteRecords: [],
    ...over,
  };
}

export const GATEWAY: GatewayReference = { name: 'inference-gw', namespace: 'praxis-system', siteName: OWN };
export const SOURCE: RenderSource = {
  uid: '00000000-0000-0000-0000-000000000001',
  generation: 3,
  producerVersion: '0.1.0',
};

/** Unwraps a render result; fails the test with the render error's message otherwise. */
export function rendered(result: Result<RenderedOverlay, RenderError>): RenderedOverlay {
  if (!result.ok) throw new Error(`render failed: ${result.error.code}: ${result.error.message}`);
  return result.value;
}

/**
 * Every envelope a test renders must be one the gateway (of its dialect) accepts under its own expected scope, with the revision the
 * renderer reported, and its bare payload must equal envelope.overlay.
 */
export function expectGatewayAccepts(overlay: RenderedOverlay, gateway: GatewayReference = GATEWAY): void {
  const text = serializeOverlay(overlay.envelope);
  const verdict = validateOverlay(text, {
    maxBytes: GATEWAY_MAX_OVERLAY_BYTES,
    allowLegacy: false,
    ...(gateway.dialect === undefined ? {} : { dialect: gateway.dialect }),
    expectedScope: {
      network: overlay.envelope.scope.network,
      gateway: gateway.name,
      namespace: gateway.namespace,
      local_site: overlay.envelope.scope.local_site,
    },
  });
  expect(verdict, JSON.stringify(verdict)).toMatchObject({ ok: true, format: 'envelope', revision: overlay.revision });
  expect(overlay.payload).toBe(overlay.envelope.overlay);
}
