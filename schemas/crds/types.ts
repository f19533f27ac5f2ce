// Typed Grid objects: the generated spec/status types (schemas/generated/, from the schema files) wrapped in the
// apiVersion/kind/metadata envelope every object carries.
import type { GridObject } from './definitions.ts';
import type { GridNetworkSpec, GridNetworkStatus } from '../generated/gridnetworks.ts';
import type { GridSiteSpec, GridSiteStatus } from '../generated/gridsites.ts';
import type { InferenceProviderSpec, InferenceProviderStatus } from '../generated/inferenceproviders.ts';
import type { AgentToolProviderSpec, AgentToolProviderStatus } from '../generated/agenttoolproviders.ts';
import type { AgentToAgentProviderSpec, AgentToAgentProviderStatus } from '../generated/agenttoagentproviders.ts';
import type { SiteInviteSpec, SiteInviteStatus } from '../generated/siteinvites.ts';

export type GridNetworkResource = GridObject<'GridNetwork', GridNetworkSpec, GridNetworkStatus>;
export type GridSiteResource = GridObject<'GridSite', GridSiteSpec, GridSiteStatus>;
export type InferenceProviderResource = GridObject<'InferenceProvider', InferenceProviderSpec, InferenceProviderStatus>;
export type AgentToolProviderResource = GridObject<'AgentToolProvider', AgentToolProviderSpec, AgentToolProviderStatus>;
export type AgentToAgentProviderResource = GridObject<
  'AgentToAgentProvider',
  AgentToAgentProviderSpec,
  AgentToAgentProviderStatus
>;
export type SiteInviteResource = GridObject<'SiteInvite', SiteInviteSpec, SiteInviteStatus>;

export type GridResource =
  | GridNetworkResource
  | GridSiteResource
  | InferenceProviderResource
  | AgentToolProviderResource
  | AgentToAgentProviderResource
  | SiteInviteResource;

export type {
  GridNetworkSpec,
  GridNetworkStatus,
  GridSiteSpec,
  GridSiteStatus,
  InferenceProviderSpec,
  InferenceProviderStatus,
  AgentToolProviderSpec,
  AgentToolProviderStatus,
  AgentToAgentProviderSpec,
  AgentToAgentProviderStatus,
  SiteInviteSpec,
  SiteInviteStatus,
};
