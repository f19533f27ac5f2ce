import type { GatewayRef, GridNetworkSpec, PraxisConfig } from '../schemas/generated/gridnetworks.ts';
import type { GridSiteSpec } from '../schemas/generated/gridsites.ts';
import type { InferenceProviderSpec } from '../schemas/generated/inferenceproviders.ts';
import type { AgentToolProviderSpec } from '../schemas/generated/agenttoolproviders.ts';
import type { AgentToAgentProviderSpec } from '../schemas/generated/agenttoagentproviders.ts';
import type { SiteInviteSpec } from '../schemas/generated/siteinvites.ts';
import type { ImageReference } from './image-reference.ts';
import type { ConsumerGatewayProps } from './consumer-gateway.ts';
import type { OperatorListenerProps } from './operator-listeners.ts';
import type { ProviderGatewayProps } from './provider-gateway.ts';
import type { OperatorPortName, ServiceExposure } from './service-exposure.ts';
import type { SimEngineProps } from './sim-backend.ts';
import type { GridTrust } from '../schemas/generated/grid-trust.ts';
import type { ObservabilityDeclaration, SiteObservabilityDeclaration } from './observability.ts';

/**
 * The user-facing declaration of a grid: what a site runs, which providers it offers, which gateways it has.
 * Every resource field is typed from the generated schema types or the construct props; this module only adds
 * the grouping (which site owns what) and the few choices that exist only at compile time (simulated backends).
 */

/** Grid-wide routing policy: identical on every site, so it is declared once. */
export type NetworkPolicyDeclaration = Omit<
  GridNetworkSpec,
  'gridId' | 'seeds' | 'consumerGateways' | 'gatewayRefs' | 'region' | 'zone' | 'tls'
>;

export interface NetworkDeclaration {
  /** GridNetwork name (the network of every overlay, record and label). */
  readonly name: string;
  /** @default - every policy at its CRD default */
  readonly policy?: NetworkPolicyDeclaration;
}

/** Options of a simulated backend (the sim daemon) standing in for a provider in demos. */
export interface SimulatedBackendDeclaration {
  /** @default 0 */
  readonly latencyMs?: number;
  /** @default 1 */
  readonly replicas?: number;
  /** The engine model's parameters (unequal speed and cache size). @default - the sim's defaults */
  readonly engine?: SimEngineProps;
}

export interface ProviderDeclaration {
  /** InferenceProvider name; also its candidate cluster unless spec.routingClusterRef is set. */
  readonly name: string;
  /**
   * The InferenceProvider spec. `gridNetworkRef` is filled in from the network; `endpoint` is filled in for a
   * simulated provider.
   */
  readonly spec: Omit<InferenceProviderSpec, 'gridNetworkRef' | 'endpoint'> & { readonly endpoint?: string };
  /**
   * Run the sim daemon as this provider's backend (demos); spec.endpoint then points at it.
   * @default - no simulated backend; spec.endpoint names a real one
   */
  readonly simulated?: SimulatedBackendDeclaration | true;
  /**
   * Labels of existing in-cluster backend pods, to isolate them with a NetworkPolicy. Simulated backends are
   * isolated automatically; external APIs have no pods to isolate.
   * @default - none
   */
  readonly backendPodLabels?: Record<string, string>;
}

/** The names of the Secrets a site's control plane uses (all in the site namespace; never their contents). */
export interface SiteSecretsDeclaration {
  /** @default 'grid-ca' - CA bundle that signs site and gateway certificates */
  readonly ca?: string;
  /** @default 'grid-site-cert' - this site's mTLS identity */
  readonly siteCertificate?: string;
  /** @default 'swim-key' - 32-byte AES-256-GCM key of the gossip layer, key `key` */
  readonly swimKey?: string;
  /**
   * @default 'grid-ca-signer' - the grid CA certificate and private key (tls.crt, tls.key) the enrollment endpoint
   * signs joining sites with; only a site that signs SiteInvites needs it
   */
  readonly gridCaSigner?: string;
  /** @default 'grid-dashboard-token' - the fleet dashboard's token, key `token` (read with `dashboard.access: 'token'`) */
  readonly dashboardToken?: string;
  /**
   * @default 'grid-ingest-token' - key `token`: the bearer token of the operator's gateway ingest (gatewayAgeIngest),
   * mounted into the operator and into the consumer gateway that reports spend
   */
  readonly ingestToken?: string;
}

/**
 * A consumer gateway the site deploys itself (a Praxis AI gateway, say) that reads its routing overlay from this
 * grid: it gets a GridNetwork consumerGateways[] entry, so the operator renders and publishes its overlay ConfigMap
 * in the site namespace; nothing is deployed for it.
 */
export interface ExternalConsumerDeclaration {
  /** Gateway name: its consumerGateways[].name and the overlay ConfigMap name (grid-overlay-{network}-{name}). */
  readonly name: string;
  /**
   * What the gateway is, so it is given the overlay it accepts and its status says what it will not honour:
   * `praxis-main` (Praxis AI main), `praxis-groups` (Praxis AI with selection groups) or `agn`.
   */
  readonly dialect: NonNullable<GatewayRef['dialect']>;
}

export interface SiteDeclaration {
  /** Site name: the SWIM identity, the overlays' `local_site`, the candidates' `site`. */
  readonly name: string;
  /** @default 'grid-system' */
  readonly namespace?: string;
  /** Geography, for locality tiers (same_zone, same_region, cross_region). */
  readonly region?: GridSiteSpec['region'];
  readonly zone?: GridSiteSpec['zone'];
  readonly sovereigntyZone?: GridSiteSpec['sovereigntyZone'];
  /** GridSite labels; providers' siteSelector/accessPolicy match on them. @default - none */
  readonly labels?: Record<string, string>;
  /**
   * SWIM seeds (other sites' gossip addresses).
   * @default - the gossipAddress of every other site of the declaration (none for a lone site, which is a healthy
   * single-member mesh)
   */
  readonly seeds?: GridNetworkSpec['seeds'];
  /**
   * The host:port other sites reach this site's gossip port at (what their seeds list): the address of
   * `gossipService` (a load balancer's DNS name or address, or a node address with the node port). Required in a
   * grid of several sites.
   * @default - the operator advertises its bind address (a lone site)
   */
  readonly gossipAddress?: string;
  /**
   * How other sites reach this site's operator: the Service (`gossip-operator-public`) that carries SWIM (UDP and
   * TCP), the peer signals port and the enrollment port, and nothing else. Required in a grid of several sites, with
   * its type said explicitly (ClusterIP only where the sites share one routed network).
   * @default - none (a lone site)
   */
  readonly gossipService?: ServiceExposure<OperatorPortName>;
  /**
   * The address other sites reach this site's provider gateway at, with its TLS mode. Required when the site
   * offers providers to a grid that has consumers elsewhere.
   * @default - not reachable from other sites
   */
  readonly gatewayEndpoint?: GridSiteSpec['gatewayEndpoint'];
  /**
   * Certificate pin(s) other sites verify this site's provider gateway against, when they are not in the
   * declaration's `trust` file.
   * @default - the site's pins in the declaration's `trust`
   */
  readonly trust?: GridSiteSpec['trust'];
  /** @default - the names documented on SiteSecretsDeclaration */
  readonly secrets?: SiteSecretsDeclaration;
  /**
   * A consumer gateway for this site's workloads. `praxisConfig` is copied into its GridNetwork consumerGateways[]
   * entry for a Praxis AI consumer that reads this gateway's overlay; the
   * operator's Role then grants the generated ConfigMap, the delegated Deployment and the Secrets it checks.
   * @default - none
   */
  readonly consumerGateway?: Omit<
    ConsumerGatewayProps,
    'namespace' | 'network' | 'site' | 'upstreams' | 'image' | 'prices' | 'dashboardReaderLabels' | 'ingestTokenSecret'
  > & {
    /** @default - no generated consumer config */
    readonly praxisConfig?: PraxisConfig;
  };
  /**
   * Consumer gateways this site runs outside the compiler that read an overlay of this grid. The `consumerGateway`
   * above is this project's gateway (dialect agn); these carry their own dialect.
   * @default - none
   */
  readonly externalConsumers?: readonly ExternalConsumerDeclaration[];
  /** The provider gateway in front of this site's providers; required when the site has providers. @default - none */
  readonly providerGateway?: Omit<ProviderGatewayProps, 'namespace' | 'site' | 'routes' | 'backends' | 'image'>;
  /** @default - none */
  readonly providers?: readonly ProviderDeclaration[];
  /** MCP tool servers this site offers (AgentToolProvider; gridNetworkRef is filled in). @default - none */
  readonly toolProviders?: readonly {
    readonly name: string;
    readonly spec: Omit<AgentToolProviderSpec, 'gridNetworkRef'>;
  }[];
  /** A2A agents this site offers (AgentToAgentProvider; gridNetworkRef is filled in). @default - none */
  readonly agentProviders?: readonly {
    readonly name: string;
    readonly spec: Omit<AgentToAgentProviderSpec, 'gridNetworkRef'>;
  }[];
  /** Invitations this site signs for sites that will join (SiteInvite). @default - none */
  readonly invites?: readonly { readonly name: string; readonly spec: SiteInviteSpec }[];
  /** The operator's peer signals endpoint (signalTransport poll), passed to GossipOperator. @default - off */
  readonly peerSignals?: OperatorListenerProps['peerSignals'];
  /**
   * The operator's gateway ingest (age and spend reports, budgets), passed to GossipOperator; its token Secret is
   * `secrets.ingestToken`. @default - off
   */
  readonly gatewayAgeIngest?: Omit<NonNullable<OperatorListenerProps['gatewayAgeIngest']>, 'tokenSecret'>;
  /**
   * The operator's SiteInvite redeem endpoint, passed to GossipOperator. A site that declares `invites` always
   * serves it (an invite nobody can redeem is no invite).
   * @default - off without invites; with invites, the site certificate Secret and the `gridCaSigner` Secret
   */
  readonly enrollment?: OperatorListenerProps['enrollment'];
  /**
   * Who may open the operator's fleet dashboard (README "Fleet dashboard"). `token`: a bearer token or a browser
   * session cookie from the Secret `secrets.dashboardToken` (key `token`, which `agn pki` generates); the operator
   * then lists the consumer gateway pods and its pods are admitted to their admin ports.
   * @default - off
   */
  readonly dashboard?: { readonly access: 'off' } | { readonly access: 'token' };
  /**
   * This site's OpenTelemetry trace export, over the grid's `observability`: the fields set here win (resource
   * attributes merge key by key); `false` turns tracing off for this site.
   * @default - the grid's observability
   */
  readonly observability?: SiteObservabilityDeclaration;
}

export interface GridDeclaration {
  readonly network: NetworkDeclaration;
  readonly sites: readonly SiteDeclaration[];
  /**
   * The public half of the grid's PKI that `agn pki init` writes (grid-trust.json): pass
   * `readGridTrust(new URL('./grid-trust.json', import.meta.url))` here (undefined until the file exists). Synth renders each site's
   * provider gateway pins into the GridSite every other site has for it. Required in a grid of several sites whose
   * gateways speak Mutual TLS.
   * @default - no pins (a lone site needs none)
   */
  readonly trust?: GridTrust;
  /**
   * The image every workload runs (`npm run image` builds it; push it where your cluster pulls from). Synth refuses
   * a reference with neither tag nor digest; a digest wins over the tag.
   * @default DEFAULT_IMAGE - ghcr.io/agn-ts/agn at this package's version
   */
  readonly image?: ImageReference;
  /**
   * Where every daemon of every site (operator, overlay-sync, consumer and provider gateways) exports its
   * OpenTelemetry traces: rendered as the OTEL_* environment of each container, with service.name, grid.site,
   * grid.network and the pod's k8s.* resource attributes. A site may override it or turn it off (its own
   * `observability`).
   * @default - no trace export; the daemons' environment carries no OTEL_* variable
   */
  readonly observability?: ObservabilityDeclaration;
}
