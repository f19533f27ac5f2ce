import type { AgentUpstream } from './consumer-gateway-config.ts';
import type { AgentToolProviderSpec } from '../schemas/generated/agenttoolproviders.ts';
import type { AgentToAgentProviderSpec } from '../schemas/generated/agenttoagentproviders.ts';
import { Construct } from 'constructs';
import { Chart } from 'cdk8s';
import { overlayConfigMapName } from '../schemas/overlay/configmap-name.ts';
import { servingConfigMapName } from '../schemas/serving/serving-config.ts';
import type { ClusterEndpoint, GridNetworkSpec } from '../schemas/generated/gridnetworks.ts';
import { delegatedDeployment, generatedConfigNames, generates } from '../schemas/generated-config.ts';
import { DEFAULT_PRAXIS_CONFIG_MAP_NAME } from '../schemas/object-names.ts';
import type { GridSiteSpec } from '../schemas/generated/gridsites.ts';
import type { InferenceProviderSpec } from '../schemas/generated/inferenceproviders.ts';
import { BackendNetworkPolicy } from './backend-network-policy.ts';
import {
  candidateCluster,
  candidateIssues,
  providerCandidates,
  providerCredential,
  siteNamespace,
} from './candidates.ts';
import { ConsumerGateway } from './consumer-gateway.ts';
import {
  DEFAULT_GATEWAY_AGE_PORT,
  DEFAULT_INGEST_TOKEN_SECRET,
  type OperatorListenerProps,
} from './operator-listeners.ts';
import { DEFAULT_DASHBOARD_TOKEN_SECRET } from './operator-dashboard.ts';
import type { UsagePrice } from '../schemas/generated/gateway-config.ts';
import { GossipOperator, type SecretName } from './gossip-operator.ts';
import type { NetworkDeclaration, ProviderDeclaration, SiteDeclaration } from './grid-declaration.ts';
import { GridNetwork } from './grid-network.ts';
import { GridSite } from './grid-site.ts';
import { InferenceProvider } from './inference-provider.ts';
import { AgentToolProvider } from './agent-tool-provider.ts';
import { AgentToAgentProvider } from './agent-to-agent-provider.ts';
import { SiteInvite } from './site-invite.ts';
import { imageOf, type ImageReference } from './image-reference.ts';
import { LABEL_MANAGED_BY, LABEL_NETWORK, workloadLabels } from './labels.ts';
import { ProviderGateway } from './provider-gateway.ts';
import type { BackendCluster } from './provider-gateway-config.ts';
import { SimBackend, simBackendUrl } from './sim-backend.ts';
import { customResourceIssues } from './grid-custom-resource.ts';
import { constructPath, throwIfIssues, type SynthIssue } from './synth-error.ts';
import type { GridTrust } from '../schemas/generated/grid-trust.ts';
import { peerTrust, peerTrustIssues, reachabilityIssues } from './site-reachability.ts';
import { mergeNeeds, type SiteSecretNeed } from './site-secrets.ts';
import type { EnrollmentProps } from './operator-listeners.ts';
import { resolveSiteTelemetry, type ObservabilityDeclaration, type SiteTelemetry } from './observability.ts';

export interface GridSiteStackProps {
  readonly network: NetworkDeclaration;
  readonly site: SiteDeclaration;
  /**
   * The other sites of the grid. Their providers become upstreams of this site's consumer gateway (through
   * their provider gateways), and each gets a GridSite here so its providers are eligible once it is Active.
   * @default - none (a single-site grid)
   */
  readonly peers?: readonly SiteDeclaration[];
  /** @default DEFAULT_IMAGE - the project image at this package's version; one image carries every daemon */
  readonly image?: ImageReference;
  /** The grid's trust file (`agn pki init`): the pins of the peers' GridSites. @default - none */
  readonly trust?: GridTrust;
  /**
   * Refuse a peer verified over Mutual TLS that has no pin. Off only while `agn pki init` reads what the
   * certificates must say, before any pin exists.
   * @default true
   */
  readonly checkPins?: boolean;
  /** The grid's trace export, which the site's own `observability` overrides. @default - none */
  readonly observability?: ObservabilityDeclaration;
}

/** The Secret names a site declaration's `secrets` resolves to. */
export function siteSecretNames(site: SiteDeclaration): {
  ca: string;
  siteCertificate: string;
  swimKey: string;
  gridCaSigner: string;
  ingestToken: string;
  dashboardToken: string;
} {
  return {
    ca: site.secrets?.ca ?? 'grid-ca',
    siteCertificate: site.secrets?.siteCertificate ?? 'grid-site-cert',
    swimKey: site.secrets?.swimKey ?? 'swim-key',
    gridCaSigner: site.secrets?.gridCaSigner ?? 'grid-ca-signer',
    ingestToken: site.secrets?.ingestToken ?? DEFAULT_INGEST_TOKEN_SECRET,
    dashboardToken: site.secrets?.dashboardToken ?? DEFAULT_DASHBOARD_TOKEN_SECRET,
  };
}

/**
 * The enrollment endpoint a site serves: as declared, or, for a site that signs SiteInvites, one with the site's
 * certificate and its gridCaSigner Secret (an invite that nothing redeems would never let a site join).
 */
export function siteEnrollment(site: SiteDeclaration): EnrollmentProps | undefined {
  if (site.enrollment !== undefined || (site.invites ?? []).length === 0) return site.enrollment;
  const names = siteSecretNames(site);
  return { siteCertificateSecret: names.siteCertificate, gridCaSecret: names.gridCaSigner };
}

/** The seeds of a site: as declared, else the gossip address of every other site. */
export function siteSeeds(site: SiteDeclaration, peers: readonly SiteDeclaration[]): string[] | undefined {
  if (site.seeds !== undefined) return [...site.seeds];
  const seeds = peers.flatMap((peer) => (peer.gossipAddress === undefined ? [] : [peer.gossipAddress]));
  return seeds.length === 0 ? undefined : seeds;
}

/**
 * The name of the GridSite the operator matches a remote site's records against (docs/contract.md §2.5,
 * discovered_site_k8s_name): each part lowercased, non [a-z0-9] replaced by '-', trimmed, joined with '-'.
 */
export function peerGridSiteName(network: string, site: string): string {
  const part = (value: string): string =>
    value
      .toLowerCase()
      .replace(/[^a-z0-9]/gu, '-')
      .replace(/^-+|-+$/gu, '');
  return `${part(network)}-${part(site)}`;
}

/** Copies a value without its undefined properties (they are absent, not null, in a manifest). */
function compact<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/**
 * The Secrets a delegated gateway's mount reconciliation GETs by name in the gateway namespace that carry no
 * namespace of their own or come from another site: tls-mode custom CAs (transport.caSecretRef) and the credential
 * references of remote candidates (peers' providers) that name the gateway namespace. Local credential and site
 * TLS references carry their namespace and are already in referencedSecrets.
 */
export function delegatedMountSecrets(
  spec: GridNetworkSpec,
  remoteCredentials: readonly { name: string; namespace?: string }[],
): SecretName[] {
  const found: SecretName[] = [];
  for (const gateway of generatedConfigNames(spec).delegatingGateways) {
    for (const name of gateway.caSecrets) found.push({ name, namespace: gateway.namespace });
    for (const ref of remoteCredentials)
      if (ref.namespace === gateway.namespace) found.push({ name: ref.name, namespace: gateway.namespace });
  }
  return found;
}

/** Every Secret a spec references by name (`secretRef`, `*SecretRef`) with its namespace, for the operator's Role. */
export function referencedSecrets(value: unknown, found: SecretName[] = []): SecretName[] {
  if (Array.isArray(value)) {
    for (const item of value) referencedSecrets(item, found);
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      if ((key === 'secretRef' || key.endsWith('SecretRef')) && typeof child === 'object' && child !== null) {
        const ref = child as { name?: unknown; namespace?: unknown };
        if (typeof ref.name === 'string' && typeof ref.namespace === 'string')
          found.push({ name: ref.name, namespace: ref.namespace });
      } else {
        referencedSecrets(child, found);
      }
    }
  }
  return found;
}

/**
 * The site's gateway age ingest with its reporters narrowed to the gateways this stack renders, when the
 * declaration names none itself; a site without gateways keeps the default (every AGN gateway of the namespace).
 */
function siteGatewayAgeIngest(site: SiteDeclaration, tokenSecret: string): OperatorListenerProps['gatewayAgeIngest'] {
  const declared = site.gatewayAgeIngest;
  if (declared === undefined) return undefined;
  const ingest = { ...declared, tokenSecret };
  if (ingest.gateways !== undefined) return ingest;
  const gateways = [
    ...(site.consumerGateway === undefined
      ? []
      : [{ component: 'consumer-gateway' as const, name: site.consumerGateway.name ?? 'consumer-gateway' }]),
    ...(site.providerGateway === undefined
      ? []
      : [{ component: 'provider-gateway' as const, name: site.providerGateway.name ?? 'provider-gateway' }]),
  ];
  return gateways.length === 0 ? ingest : { ...ingest, gateways };
}

/**
 * A generated consumer config must not target this stack's own consumer gateway objects: its ConfigMap
 * (`<name>-config`) and Deployment are rendered here at synth time, and the operator writing them too would make two
 * owners of one object. Judged with the operator's own predicates, so a config it would not generate is no clash.
 */
function praxisConfigIssues(site: SiteDeclaration): SynthIssue[] {
  const declared = site.consumerGateway;
  const praxis = declared?.praxisConfig;
  if (declared === undefined || !generates(praxis)) return [];
  const name = declared.name ?? 'consumer-gateway';
  const issues: SynthIssue[] = [];
  if ((praxis.configMapName ?? DEFAULT_PRAXIS_CONFIG_MAP_NAME) === `${name}-config`) {
    issues.push({
      path: site.name,
      field: 'consumerGateway.praxisConfig.configMapName',
      problem: `${name}-config is the ConfigMap of this stack's own consumer gateway`,
      fix: 'name the generated consumer config ConfigMap of the Praxis AI consumer differently',
    });
  }
  if (delegatedDeployment(praxis) === name) {
    issues.push({
      path: site.name,
      field: 'consumerGateway.praxisConfig.mountReconciliation.deploymentName',
      problem: `${name} is the Deployment of this stack's own consumer gateway, whose mounts the stack renders`,
      fix: 'delegate the annotated Deployment of the Praxis AI consumer instead',
    });
  }
  return issues;
}

/** Every consumer of a site has its own overlay ConfigMap, named after it: two consumers may not share a name. */
function externalConsumerIssues(site: SiteDeclaration): SynthIssue[] {
  const seen = new Set(site.consumerGateway === undefined ? [] : [site.consumerGateway.name ?? 'consumer-gateway']);
  const issues: SynthIssue[] = [];
  for (const consumer of site.externalConsumers ?? []) {
    if (seen.has(consumer.name)) {
      issues.push({
        path: site.name,
        field: `externalConsumers[${consumer.name}].name`,
        problem: `${consumer.name} is already the name of another consumer gateway of this site, whose overlay ConfigMap it would share`,
        fix: 'give every consumer gateway of the site its own name',
      });
    }
    seen.add(consumer.name);
  }
  return issues;
}

/** host:port and TLS of the backend an endpoint URL names (external APIs use the system trust store). */
/** True when a site offers anything a consumer reaches through its provider gateway: models, tool servers, agents. */
function servesThroughGateway(site: SiteDeclaration): boolean {
  return (
    (site.providers ?? []).length > 0 || (site.toolProviders ?? []).length > 0 || (site.agentProviders ?? []).length > 0
  );
}

export function backendFromEndpoint(name: string, endpoint: string): BackendCluster {
  const url = new URL(endpoint);
  const secure = url.protocol === 'https:';
  const port = url.port === '' ? (secure ? '443' : '80') : url.port;
  const host = url.hostname;
  return secure
    ? { name, endpoint: `${host}:${port}`, tls: { sni: host.replace(/^\[|\]$/gu, '') } }
    : { name, endpoint: `${host}:${port}` };
}

/**
 * Everything one site runs, compiled from one declaration: the operator with its RBAC, the site's GridNetwork,
 * GridSite(s) and InferenceProviders, the provider gateway with routes keyed by synth-time stable_ids and the
 * credentials it alone mounts, the consumer gateway with an upstream per potentially routable provider of the
 * grid, simulated backends and the NetworkPolicies that keep backends private. One chart = one file in dist/.
 */
export class GridSiteStack extends Chart {
  readonly siteName: string;
  readonly siteNamespace: string;
  readonly network: string;
  /** The container image string every workload of this construct runs (digest over tag). */
  readonly image: string;
  readonly imageReference: ImageReference | undefined;
  readonly operator: GossipOperator;
  readonly gridNetwork: GridNetwork;
  readonly gridSite: GridSite;
  readonly peerSites: readonly GridSite[];
  readonly inferenceProviders: readonly InferenceProvider[];
  readonly toolProviders: readonly AgentToolProvider[];
  readonly agentProviders: readonly AgentToAgentProvider[];
  readonly invites: readonly SiteInvite[];
  readonly simBackends: readonly SimBackend[];
  readonly backendPolicies: readonly BackendNetworkPolicy[];
  readonly providerGateway: ProviderGateway | undefined;
  readonly consumerGateway: ConsumerGateway | undefined;
  /** Every Secret this site's objects name, with what it is for (`agn pki secrets` fills them). */
  readonly secretNeeds: readonly SiteSecretNeed[];
  /** Where this site's daemons export traces; undefined when it declares none (nothing is rendered then). */
  readonly telemetry: SiteTelemetry | undefined;

  constructor(scope: Construct, id: string, props: GridSiteStackProps) {
    super(scope, id, { labels: { [LABEL_MANAGED_BY]: 'agn-constructs' } });
    const site = props.site;
    const peers = props.peers ?? [];
    this.siteName = site.name;
    this.siteNamespace = siteNamespace(site);
    this.network = props.network.name;
    this.imageReference = props.image;
    this.image = imageOf(this, props.image);

    const secrets = siteSecretNames(site);
    const enrollment = siteEnrollment(site);
    const ref = (name: string): SecretName => ({ name, namespace: this.siteNamespace });
    const consumerName =
      site.consumerGateway === undefined ? undefined : (site.consumerGateway.name ?? 'consumer-gateway');
    const consumerNames = [
      ...(consumerName === undefined ? [] : [consumerName]),
      ...(site.externalConsumers ?? []).map((c) => c.name),
    ];

    const networkSpec: GridNetworkSpec = compact({
      ...(props.network.policy ?? {}),
      seeds: siteSeeds(site, peers),
      region: site.region,
      zone: site.zone,
      // praxisConfig from the declaration is carried through: the operator's Role below is derived from this spec.
      // The deployed consumer is this project's gateway (dialect agn, the default, so not written); external
      // consumers carry the dialect they declare.
      consumerGateways:
        consumerNames.length === 0
          ? undefined
          : [
              ...(consumerName === undefined
                ? []
                : [
                    {
                      name: consumerName,
                      namespace: this.siteNamespace,
                      siteName: site.name,
                      praxisConfig: site.consumerGateway?.praxisConfig,
                      gridServing: site.consumerGateway?.gridServing !== undefined ? true : undefined,
                    },
                  ]),
              ...(site.externalConsumers ?? []).map((c) => ({
                name: c.name,
                namespace: this.siteNamespace,
                siteName: site.name,
                dialect: c.dialect,
              })),
            ],
      tls: {
        caSecretRef: ref(secrets.ca),
        siteSecretRef: ref(secrets.siteCertificate),
        swimKeySecretRef: ref(secrets.swimKey),
      },
    });
    const providerSpecs = (site.providers ?? []).map((provider) => ({ provider, spec: this.providerSpec(provider) }));
    const toolSpecs = (site.toolProviders ?? []).map((tool) => ({
      name: tool.name,
      spec: compact({ gridNetworkRef: this.network, ...tool.spec }),
    }));
    const agentSpecs = (site.agentProviders ?? []).map((agent) => ({
      name: agent.name,
      spec: compact({ gridNetworkRef: this.network, ...agent.spec }),
    }));
    const inviteSpecs = (site.invites ?? []).map((invite) => ({ name: invite.name, spec: compact(invite.spec) }));
    const siteProps = {
      name: site.name,
      labels: { [LABEL_NETWORK]: this.network, ...(site.labels ?? {}) },
      spec: this.gridSiteSpec(site),
    };
    // Every problem of the declaration and of this site's resources at once, before anything is built. (Peers'
    // GridSites are checked by their own stacks; each resource constructor checks itself again for direct users.)
    const path = constructPath(this);
    const observability = resolveSiteTelemetry(props.observability, site, path, {
      network: this.network,
      namespace: this.siteNamespace,
    });
    throwIfIssues([
      ...this.declarationIssues(site, peers),
      ...observability.issues,
      ...reachabilityIssues(site, peers, enrollment !== undefined),
      ...(props.checkPins === false ? [] : peers.flatMap((peer) => peerTrustIssues(peer, props.trust))),
      ...customResourceIssues(`${path}/network`, 'GridNetwork', { name: this.network, spec: networkSpec }),
      ...customResourceIssues(`${path}/site`, 'GridSite', siteProps),
      ...providerSpecs.flatMap(({ provider, spec }) =>
        customResourceIssues(`${path}/providers/${provider.name}`, 'InferenceProvider', { name: provider.name, spec }),
      ),
      ...toolSpecs.flatMap(({ name, spec }) =>
        customResourceIssues(`${path}/tools/${name}`, 'AgentToolProvider', { name, spec }),
      ),
      ...agentSpecs.flatMap(({ name, spec }) =>
        customResourceIssues(`${path}/agents/${name}`, 'AgentToAgentProvider', { name, spec }),
      ),
      ...inviteSpecs.flatMap(({ name, spec }) =>
        customResourceIssues(`${path}/invites/${name}`, 'SiteInvite', { name, spec }),
      ),
    ]);

    const generated = generatedConfigNames(networkSpec);
    this.operator = new GossipOperator(this, 'gossip-operator', {
      namespace: this.siteNamespace,
      network: this.network,
      site: site.name,
      image: this.imageReference,
      gatewayAddress: site.gatewayEndpoint?.address,
      gossipAdvertiseAddress: site.gossipAddress,
      peerSignals: site.peerSignals,
      gatewayAgeIngest: siteGatewayAgeIngest(site, secrets.ingestToken),
      enrollment,
      ...(site.gossipService === undefined ? {} : { publicService: site.gossipService }),
      overlayConfigMaps: [
        ...consumerNames.map((name) => overlayConfigMapName(this.network, name)),
        // The serving config is applied beside the overlay, by the same Role (its names are scoped the same way).
        ...(consumerName !== undefined && site.consumerGateway?.gridServing !== undefined
          ? [servingConfigMapName(this.network, consumerName)]
          : []),
      ],
      // Only the site's own consumer gateway can be served (external consumers have no serving sidecar).
      servingConfigMaps: consumerName === undefined ? [] : [servingConfigMapName(this.network, consumerName)],
      referencedSecrets: [
        ...referencedSecrets([networkSpec, ...[...providerSpecs, ...toolSpecs, ...agentSpecs].map((p) => p.spec)]),
        ...delegatedMountSecrets(
          networkSpec,
          peers.flatMap((peer) => (peer.providers ?? []).flatMap((p) => providerCredential(p) ?? [])),
        ),
      ],
      invites: (site.invites ?? []).map((invite) => invite.name),
      praxisConfigMaps: generated.praxisConfigMaps,
      delegatedDeployments: generated.delegatedDeployments,
      ...(site.dashboard === undefined
        ? {}
        : {
            dashboard:
              site.dashboard.access === 'token'
                ? { access: 'token', tokenSecret: site.secrets?.dashboardToken ?? DEFAULT_DASHBOARD_TOKEN_SECRET }
                : site.dashboard,
            dashboardGateways: consumerName === undefined ? [] : [consumerName],
          }),
    });

    this.gridNetwork = new GridNetwork(this, 'network', { name: this.network, spec: networkSpec });
    this.gridSite = new GridSite(this, 'site', siteProps);
    const peerScope = new Construct(this, 'peers');
    this.peerSites = peers.map(
      (peer) =>
        new GridSite(peerScope, peer.name, {
          name: peerGridSiteName(this.network, peer.name),
          labels: { [LABEL_NETWORK]: this.network, ...(peer.labels ?? {}) },
          spec: this.gridSiteSpec({ ...peer, trust: peerTrust(peer, props.trust) }),
        }),
    );

    const providerScope = new Construct(this, 'providers');
    const backendScope = new Construct(this, 'backends');
    const simBackends: SimBackend[] = [];
    const policies: BackendNetworkPolicy[] = [];
    const providerGatewayName = site.providerGateway?.name ?? 'provider-gateway';
    this.inferenceProviders = providerSpecs.map(({ provider, spec }) => {
      // The resource first: its schema check reports a missing or malformed endpoint before anything parses it.
      const resource = new InferenceProvider(providerScope, provider.name, { name: provider.name, spec });
      const sim = this.simBackendFor(backendScope, provider, simBackends);
      const podLabels = sim?.selectorLabels ?? provider.backendPodLabels;
      if (podLabels !== undefined) {
        const backend = backendFromEndpoint(provider.name, spec.endpoint);
        policies.push(
          new BackendNetworkPolicy(backendScope, `${provider.name}-policy`, {
            namespace: this.siteNamespace,
            name: `backend-${provider.name}`,
            backendLabels: podLabels,
            port: Number(backend.endpoint.slice(backend.endpoint.lastIndexOf(':') + 1)),
            providerGatewayLabels: workloadLabels('provider-gateway', providerGatewayName),
            operatorLabels: this.operator.selectorLabels,
          }),
        );
      }
      return resource;
    });
    this.simBackends = simBackends;
    this.backendPolicies = policies;
    const toolScope = new Construct(this, 'tools');
    this.toolProviders = toolSpecs.map(({ name, spec }) => new AgentToolProvider(toolScope, name, { name, spec }));
    const agentScope = new Construct(this, 'agents');
    this.agentProviders = agentSpecs.map(
      ({ name, spec }) => new AgentToAgentProvider(agentScope, name, { name, spec }),
    );
    const inviteScope = new Construct(this, 'invites');
    this.invites = inviteSpecs.map(({ name, spec }) => new SiteInvite(inviteScope, name, { name, spec }));

    this.providerGateway =
      site.providerGateway === undefined
        ? undefined
        : this.buildProviderGateway(site, providerSpecs, toolSpecs, agentSpecs);
    this.consumerGateway = site.consumerGateway === undefined ? undefined : this.buildConsumerGateway(site, peers);
    this.secretNeeds = this.collectSecretNeeds(site, peers, secrets, enrollment, [...toolSpecs, ...agentSpecs]);
    // Last, so every container (the consumer's serving sidecars too) exists. The sims are stand-ins, not daemons.
    this.telemetry = observability.telemetry;
    if (this.telemetry !== undefined) {
      this.operator.enableTracing(this.telemetry);
      this.providerGateway?.enableTracing(this.telemetry);
      this.consumerGateway?.enableTracing(this.telemetry);
    }
  }

  private collectSecretNeeds(
    site: SiteDeclaration,
    peers: readonly SiteDeclaration[],
    secrets: ReturnType<typeof siteSecretNames>,
    enrollment: EnrollmentProps | undefined,
    agentSpecs: readonly {
      name: string;
      spec: { auth?: { secretRef?: { name: string; namespace: string; key?: string } } };
    }[],
  ): SiteSecretNeed[] {
    const namespace = this.siteNamespace;
    const needs: SiteSecretNeed[] = [
      { purpose: 'grid-ca', name: secrets.ca, namespace, keys: ['ca.crt'] },
      { purpose: 'site-certificate', name: secrets.siteCertificate, namespace, keys: ['ca.crt', 'tls.crt', 'tls.key'] },
      { purpose: 'swim-key', name: secrets.swimKey, namespace, keys: ['key'] },
    ];
    const provider = this.providerGateway;
    if (provider !== undefined) {
      const host =
        site.gatewayEndpoint === undefined
          ? undefined
          : site.gatewayEndpoint.address
              .slice(0, site.gatewayEndpoint.address.lastIndexOf(':'))
              .replace(/^\[|\]$/gu, '');
      const inCluster = [
        `${provider.name}.${namespace}.svc.cluster.local`,
        `${provider.name}.${namespace}.svc`,
        `${provider.name}.${namespace}`,
        provider.name,
      ];
      const serverNames = [
        ...new Set(
          [site.gatewayEndpoint?.tls?.serverName, host, ...inCluster].filter(
            (n): n is string => n !== undefined && n !== '',
          ),
        ),
      ];
      needs.push({
        purpose: 'gateway-tls',
        role: 'provider',
        gateway: provider.name,
        name: provider.tlsSecretName,
        namespace,
        keys: ['ca.crt', 'tls.crt', 'tls.key'],
        serverNames,
      });
    }
    const consumer = this.consumerGateway;
    if (consumer !== undefined) {
      // The consumer's client certificate must carry an organization every provider gateway it calls admits.
      const called = [site, ...peers].filter(
        (owner) => servesThroughGateway(owner) && (owner === site || owner.gatewayEndpoint !== undefined),
      );
      const organizations = [
        ...new Set(
          called.flatMap((owner) =>
            (owner.providerGateway?.trustedPeers ?? []).flatMap((peer) =>
              peer.organization === undefined ? [] : [peer.organization],
            ),
          ),
        ),
      ];
      needs.push({
        purpose: 'gateway-tls',
        role: 'consumer',
        gateway: consumer.name,
        name: consumer.tlsSecretName,
        namespace,
        keys: ['ca.crt', 'tls.crt', 'tls.key'],
        organizations,
      });
      const callerKeys = site.consumerGateway?.callerKeys;
      if (callerKeys !== undefined)
        needs.push({
          purpose: 'caller-keys',
          gateway: consumer.name,
          name: callerKeys.secretName,
          namespace,
          keys: [callerKeys.key ?? 'caller-keys.json'],
        });
    }
    if (site.dashboard?.access === 'token')
      needs.push({ purpose: 'dashboard-token', name: secrets.dashboardToken, namespace, keys: ['token'] });
    if (site.gatewayAgeIngest !== undefined)
      needs.push({ purpose: 'ingest-token', name: secrets.ingestToken, namespace, keys: ['token'] });
    if (enrollment !== undefined)
      needs.push({ purpose: 'grid-ca-signer', name: enrollment.gridCaSecret, namespace, keys: ['tls.crt', 'tls.key'] });
    for (const declared of site.providers ?? []) {
      const credential = providerCredential(declared);
      if (credential === undefined) continue;
      needs.push({
        purpose: 'provider-credential',
        provider: declared.name,
        simulated: declared.simulated !== undefined,
        name: credential.name,
        namespace: credential.namespace,
        keys: [credential.key],
      });
    }
    for (const { name, spec } of agentSpecs) {
      const ref = spec.auth?.secretRef;
      if (ref !== undefined)
        needs.push({
          purpose: 'provider-credential',
          provider: name,
          simulated: false,
          name: ref.name,
          namespace: ref.namespace,
          keys: [ref.key ?? 'token'],
        });
    }
    return mergeNeeds(needs);
  }

  private declarationIssues(site: SiteDeclaration, peers: readonly SiteDeclaration[]): SynthIssue[] {
    const issues: SynthIssue[] = [];
    const path = constructPath(this);
    if (site.consumerGateway?.gridServing !== undefined && site.peerSignals === undefined) {
      issues.push({
        path,
        field: 'consumerGateway.gridServing',
        problem: `site ${site.name}'s consumer gateway serves gridServing, but the site's operator serves no signals endpoint for it to poll`,
        fix: 'declare peerSignals on the site (and on every site it routes to), so each site publishes the load its gateway reads',
      });
    }
    if (servesThroughGateway(site) && site.providerGateway === undefined) {
      issues.push({
        path,
        field: 'providerGateway',
        problem: `site ${site.name} declares providers but no provider gateway to front them`,
        fix: 'add providerGateway with the trustedPeers (consumer identities) allowed to call them',
      });
    }
    for (const each of [site, ...peers]) {
      const endpoint = each.gatewayEndpoint;
      const needed = site.consumerGateway !== undefined && each !== site && servesThroughGateway(each);
      if (endpoint === undefined) {
        if (needed) {
          issues.push({
            path: each.name,
            field: 'gatewayEndpoint',
            problem: `site ${each.name} offers providers but declares no gatewayEndpoint, so the consumer gateway of ${site.name} cannot reach them`,
            fix: 'set gatewayEndpoint { address: host:port of its provider gateway, tls: { mode: Mutual, serverName } }',
          });
        }
      } else if (endpoint.tls?.mode === undefined) {
        issues.push({
          path: each.name,
          field: 'gatewayEndpoint.tls.mode',
          problem: `endpoint ${endpoint.address} has no transport`,
          fix: 'set gatewayEndpoint.tls.mode to Mutual (with serverName) for a provider gateway, or Plaintext for a local test endpoint',
        });
      }
    }
    // In name order, so every stack of a grid reports a conflict between two sites in the same words (said once).
    issues.push(
      ...candidateIssues(
        [site, ...peers].sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0)),
        (owner, provider) => `${owner.name}/providers/${provider.name}`,
      ),
    );
    issues.push(...praxisConfigIssues(site));
    issues.push(...externalConsumerIssues(site));
    return issues;
  }

  private providerSpec(provider: ProviderDeclaration): InferenceProviderSpec {
    const endpoint =
      provider.simulated === undefined
        ? provider.spec.endpoint
        : (provider.spec.endpoint ?? simBackendUrl(provider.name, this.siteNamespace));
    return compact({ gridNetworkRef: this.network, ...provider.spec, endpoint } as InferenceProviderSpec);
  }

  private gridSiteSpec(site: SiteDeclaration): GridSiteSpec {
    return compact({
      gridNetworkRef: this.network,
      gatewayEndpoint: site.gatewayEndpoint,
      trust: site.trust,
      region: site.region,
      zone: site.zone,
      sovereigntyZone: site.sovereigntyZone,
    });
  }

  private simBackendFor(
    scope: Construct,
    provider: ProviderDeclaration,
    created: SimBackend[],
  ): SimBackend | undefined {
    if (provider.simulated === undefined) return undefined;
    const options = provider.simulated === true ? {} : provider.simulated;
    const credential = providerCredential(provider);
    const sim = new SimBackend(scope, provider.name, {
      namespace: this.siteNamespace,
      provider: provider.name,
      models: (provider.spec.models ?? []).map((model) => model.name),
      // A simulated backend always checks a bearer token; without a declared credential it cannot start.
      credential:
        credential === undefined
          ? { name: `${provider.name}-credential`, key: 'token' }
          : { name: credential.name, key: credential.key },
      image: this.imageReference,
      latencyMs: options.latencyMs,
      replicas: options.replicas,
      engine: options.engine,
    });
    created.push(sim);
    return sim;
  }

  private buildProviderGateway(
    site: SiteDeclaration,
    providers: readonly { provider: ProviderDeclaration; spec: InferenceProviderSpec }[],
    tools: readonly { name: string; spec: AgentToolProviderSpec }[],
    agents: readonly { name: string; spec: AgentToAgentProviderSpec }[],
  ): ProviderGateway {
    const declared = site.providerGateway;
    if (declared === undefined) throw new Error('buildProviderGateway without a declaration');
    const gateway = new ProviderGateway(this, 'provider-gateway', {
      ...declared,
      namespace: this.siteNamespace,
      site: site.name,
      image: this.imageReference,
    });
    // Tool servers and agents behind this gateway: /mcp/<name> and /a2a/<name> on the hop, their tokens mounted here.
    for (const [protocol, list] of [
      ['mcp', tools],
      ['a2a', agents],
    ] as const) {
      for (const { name, spec } of list) {
        const backend = backendFromEndpoint(`${protocol === 'mcp' ? 'tool' : 'agent'}-backend-${name}`, spec.endpoint);
        gateway.addBackend(backend);
        const ref = spec.auth?.strategy === 'bearer_token' ? spec.auth.secretRef : undefined;
        gateway.addAgentServer({
          protocol,
          name,
          backendCluster: backend.name,
          path: new URL(spec.endpoint).pathname,
          ...(ref === undefined
            ? {}
            : { credential: { name: ref.name, namespace: ref.namespace, key: ref.key ?? 'token' } }),
        });
      }
    }
    for (const { provider, spec } of providers) {
      const backend = backendFromEndpoint(`backend-${provider.name}`, spec.endpoint);
      gateway.addBackend(backend);
      const credential = providerCredential(provider);
      for (const candidate of providerCandidates(site, provider)) {
        gateway.addRoute({
          candidateId: candidate.stableId,
          model: candidate.model,
          backendCluster: backend.name,
          ...(credential === undefined ? {} : { credential }),
        });
      }
    }
    return gateway;
  }

  private buildConsumerGateway(site: SiteDeclaration, peers: readonly SiteDeclaration[]): ConsumerGateway {
    // praxisConfig belongs to the GridNetwork entry (the operator generates that config), not to this construct.
    const { praxisConfig: _praxisConfig, ...declared } = site.consumerGateway ?? {};
    if (site.consumerGateway === undefined) throw new Error('buildConsumerGateway without a declaration');
    const upstreams: ClusterEndpoint[] = [];
    // usage_meter prices each answer by the cluster it came from: that cluster's InferenceProvider.spec.cost.
    const prices: UsagePrice[] = [];
    const seen = new Set<string>();
    for (const owner of [site, ...peers]) {
      const address = this.providerGatewayAddress(site, owner);
      for (const provider of owner.providers ?? []) {
        const cluster = candidateCluster(provider);
        if (seen.has(cluster) || address === undefined) continue;
        seen.add(cluster);
        upstreams.push({ cluster, address: address.address, transport: address.transport });
        const cost = provider.spec.cost;
        if (cost !== undefined)
          prices.push({
            cluster,
            per_million_input_tokens: cost.perMillionInputTokens ?? 0,
            per_million_output_tokens: cost.perMillionOutputTokens ?? 0,
          });
      }
    }
    // Every site's tool servers and the agents whose accessPolicy admits this site, through their site's provider
    // gateway (the overlay then decides which tools this site's callers may call).
    const toolServers: AgentUpstream[] = [];
    const agents: AgentUpstream[] = [];
    for (const owner of [site, ...peers]) {
      const address = owner.providerGateway === undefined ? undefined : this.providerGatewayAddress(site, owner);
      if (address === undefined) continue;
      for (const tool of owner.toolProviders ?? [])
        toolServers.push({ name: tool.name, site: owner.name, address: address.address, transport: address.transport });
      for (const agent of owner.agentProviders ?? []) {
        const wanted = agent.spec.accessPolicy?.siteSelector?.matchLabels ?? {};
        if (Object.entries(wanted).every(([key, value]) => site.labels?.[key] === value))
          agents.push({ name: agent.name, site: owner.name, address: address.address, transport: address.transport });
      }
    }
    // The dashboard reads the replicas' admin endpoints from the operator pods: their NetworkPolicy admits them.
    const dashboardReader =
      site.dashboard?.access === 'token' ? { dashboardReaderLabels: this.operator.selectorLabels } : {};
    return new ConsumerGateway(this, 'consumer-gateway', {
      ...declared,
      namespace: this.siteNamespace,
      network: this.network,
      site: site.name,
      image: this.imageReference,
      upstreams,
      prices,
      toolServers,
      agents,
      ...this.spendReportUrl(site),
      ...dashboardReader,
      ingestTokenSecret: siteSecretNames(site).ingestToken,
    });
  }

  /** The operator's gateway ingest listener, where a consumer with caller keys reports spend and reads budgets. */
  private spendReportUrl(site: SiteDeclaration): { spendReportUrl?: string } {
    if (site.gatewayAgeIngest === undefined || site.consumerGateway?.callerKeys === undefined) return {};
    const port = site.gatewayAgeIngest.port ?? DEFAULT_GATEWAY_AGE_PORT;
    return { spendReportUrl: `http://${this.operator.service.name}.${this.siteNamespace}.svc.cluster.local:${port}` };
  }

  /** Where this site's consumer reaches `owner`'s provider gateway: the in-cluster Service locally, else its gatewayEndpoint. */
  private providerGatewayAddress(
    site: SiteDeclaration,
    owner: SiteDeclaration,
  ): (Pick<ClusterEndpoint, 'address'> & { transport: NonNullable<ClusterEndpoint['transport']> }) | undefined {
    const serverName = owner.gatewayEndpoint?.tls?.serverName;
    if (owner === site) {
      const name = site.providerGateway?.name ?? 'provider-gateway';
      const port = site.providerGateway?.listenerPort ?? 8443;
      const host = `${name}.${this.siteNamespace}.svc.cluster.local`;
      return { address: `${host}:${port}`, transport: { mode: 'mutual_tls', sni: serverName ?? host } };
    }
    const endpoint = owner.gatewayEndpoint;
    if (endpoint === undefined) return undefined;
    return endpoint.tls?.mode === 'Plaintext'
      ? { address: endpoint.address, transport: { mode: 'plaintext' } }
      : {
          address: endpoint.address,
          transport: { mode: 'mutual_tls', ...(serverName === undefined ? {} : { sni: serverName }) },
        };
  }
}
