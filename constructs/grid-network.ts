import type { Construct } from 'constructs';
import type { GridNetworkSpec } from '../schemas/generated/gridnetworks.ts';
import { GridCustomResource, type GridCustomResourceProps } from './grid-custom-resource.ts';

/** A GridNetwork custom resource; spec typed from schemas/crds/gridnetworks.schema.json, validated at synth. */
export class GridNetwork extends GridCustomResource<GridNetworkSpec> {
  constructor(scope: Construct, id: string, props: GridCustomResourceProps<GridNetworkSpec>) {
    super(scope, id, 'GridNetwork', props);
  }
}
