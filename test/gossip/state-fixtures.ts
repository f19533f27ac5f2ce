import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import type { ProviderState, SiteInfo, StateRecordBody } from '../../daemons/gossip-operator/state/records.ts';

export interface SiteKeys {
  readonly publicKey: KeyObject;
  readonly privateKey: KeyObject;
}

export function siteKeys(): SiteKeys {
  return generateKeyPairSync('ed25519');
}

export function siteInfo(overrides: Partial<SiteInfo> = {}): SiteInfo {
  return {
    gateway_address: 'egress.site.example:8443',
    public_cert_pem: '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n',
    capabilities: { inference: true, agent_tools: false, agent_to_agent: false },
    tenant_spend_usd: {},
    ...overrides,
  };
}

export function provider(name: string, overrides: Partial<ProviderState> = {}): ProviderState {
  return {
    name,
    routing_cluster: `${name}-cluster`,
    models: ['llama-3-8b'],
    tools: [],
    backend_kind: 'vllm',
    phase: 'Ready',
    metrics: {
      queue_depth: 1,
      kv_cache_utilization: 0.2,
      latency_p99_ms: 120,
      prefix_cache_hit_ratio: 0.5,
      error_rate: 0,
      healthy: true,
    },
    access_policy_labels: { tier: 'gold' },
    capacity_weight: 10,
    ...overrides,
  };
}

export function body(
  network: string,
  site: string,
  revision: number,
  extra: Partial<StateRecordBody> = {},
): StateRecordBody {
  return {
    schema_version: '1.0',
    kind: 'site',
    network,
    site,
    key: `${network}/${site}`,
    revision,
    writer: `${site}-op-0`,
    site_info: siteInfo(),
    ...extra,
  };
}
