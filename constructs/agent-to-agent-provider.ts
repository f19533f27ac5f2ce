import type { Construct } from 'constructs';
import type { AgentToAgentProviderSpec } from '../schemas/generated/agenttoagentproviders.ts';
import { GridCustomResource, type GridCustomResourceProps } from './grid-custom-resource.ts';

/** A AgentToAgentProvider custom resource; spec typed from schemas/crds/agenttoagentproviders.schema.json, validated at synth. */
export class AgentToAgentProvider extends GridCustomResource<AgentToAgentProviderSpec> {
  constructor(scope: Construct, id: string, props: GridCustomResourceProps<AgentToAgentProviderSpec>) {
    super(scope, id, 'AgentToAgentProvider', props);
  }
}
