import type { Construct } from 'constructs';
import type { GridSiteSpec } from '../schemas/generated/gridsites.ts';
import { GridCustomResource, type GridCustomResourceProps } from './grid-custom-resource.ts';

/** A GridSite custom resource; spec typed from schemas/crds/gridsites.schema.json, validated at synth. */
export class GridSite extends GridCustomResource<GridSiteSpec> {
  constructor(scope: Construct, id: string, props: GridCustomResourceProps<GridSiteSpec>) {
    super(scope, id, 'GridSite', props);
  }
}
