// The package entry point (`import { synthGrid, type GridDeclaration } from 'agn-ts'`): what a grid repository's
// declaration and a cdk8s app need. The construct modules stay importable one by one inside this repository.
export type {
  GridDeclaration,
  NetworkDeclaration,
  NetworkPolicyDeclaration,
  ProviderDeclaration,
  SimulatedBackendDeclaration,
  SiteDeclaration,
  SiteSecretsDeclaration,
} from './grid-declaration.ts';
export {
  buildGrid,
  gridProblems,
  synthGrid,
  validateGrid,
  CRDS_CHART_ID,
  type BuiltGrid,
  type GridBuildOptions,
} from './grid.ts';
export { readGridTrust } from './grid-trust-file.ts';
export type { GridTrust } from '../schemas/generated/grid-trust.ts';
export type {
  OperatorPortName,
  ProviderGatewayPortName,
  ServiceExposure,
  ServiceExposureType,
} from './service-exposure.ts';
export type { SiteSecretNeed } from './site-secrets.ts';
export { GridSiteStack, peerGridSiteName, type GridSiteStackProps } from './grid-site-stack.ts';
export { GridCrds } from './grid-crds.ts';
export { GridCustomResource, type GridCustomResourceProps } from './grid-custom-resource.ts';
export { GridNetwork } from './grid-network.ts';
export { GridSite } from './grid-site.ts';
export { InferenceProvider } from './inference-provider.ts';
export { AgentToolProvider } from './agent-tool-provider.ts';
export { AgentToAgentProvider } from './agent-to-agent-provider.ts';
export { SiteInvite } from './site-invite.ts';
export { GossipOperator, type GossipOperatorProps } from './gossip-operator.ts';
export { ConsumerGateway, type ConsumerGatewayProps } from './consumer-gateway.ts';
export { ProviderGateway, type ProviderGatewayProps } from './provider-gateway.ts';
export { OverlaySync, type OverlaySyncProps } from './overlay-sync.ts';
export { SimBackend, type SimBackendProps } from './sim-backend.ts';
export { GridSynthError, formatIssue, type SynthIssue } from './synth-error.ts';
export {
  OTLP_PROTOCOLS,
  resolveSiteTelemetry,
  type ObservabilityDeclaration,
  type OtlpProtocol,
  type SiteObservabilityDeclaration,
  type SiteTelemetry,
  type TracedService,
} from './observability.ts';
export { DEFAULT_NAMESPACE } from './labels.ts';
export {
  DEFAULT_IMAGE,
  DEFAULT_IMAGE_REPOSITORY,
  imageReferenceString,
  type ImageReference,
} from './image-reference.ts';
export { API_VERSION, GROUP, VERSION, KINDS, type GridKind } from '../schemas/crds/definitions.ts';
export type { GridNetworkSpec, PraxisConfig } from '../schemas/generated/gridnetworks.ts';
export type { GridSiteSpec } from '../schemas/generated/gridsites.ts';
export type { InferenceProviderSpec } from '../schemas/generated/inferenceproviders.ts';
export type { AgentToolProviderSpec } from '../schemas/generated/agenttoolproviders.ts';
export type { AgentToAgentProviderSpec } from '../schemas/generated/agenttoagentproviders.ts';
export type { SiteInviteSpec } from '../schemas/generated/siteinvites.ts';
