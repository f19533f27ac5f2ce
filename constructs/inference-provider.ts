import type { Construct } from 'constructs';
import type { InferenceProviderSpec } from '../schemas/generated/inferenceproviders.ts';
import { GridCustomResource, type GridCustomResourceProps } from './grid-custom-resource.ts';

/** A InferenceProvider custom resource; spec typed from schemas/crds/inferenceproviders.schema.json, validated at synth. */
export class InferenceProvider extends GridCustomResource<InferenceProviderSpec> {
  constructor(scope: Construct, id: string, props: GridCustomResourceProps<InferenceProviderSpec>) {
    super(scope, id, 'InferenceProvider', props);
  }
}
