import type { Construct } from 'constructs';
import type { AgentToolProviderSpec } from '../schemas/generated/agenttoolproviders.ts';
import { GridCustomResource, type GridCustomResourceProps } from './grid-custom-resource.ts';

/** A AgentToolProvider custom resource; spec typed from schemas/crds/agenttoolproviders.schema.json, validated at synth. */
export class AgentToolProvider extends GridCustomResource<AgentToolProviderSpec> {
  constructor(scope: Construct, id: string, props: GridCustomResourceProps<AgentToolProviderSpec>) {
    super(scope, id, 'AgentToolProvider', props);
  }
}
