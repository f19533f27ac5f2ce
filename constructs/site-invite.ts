import type { Construct } from 'constructs';
import type { SiteInviteSpec } from '../schemas/generated/siteinvites.ts';
import { GridCustomResource, type GridCustomResourceProps } from './grid-custom-resource.ts';

/** A SiteInvite custom resource; spec typed from schemas/crds/siteinvites.schema.json, validated at synth. */
export class SiteInvite extends GridCustomResource<SiteInviteSpec> {
  constructor(scope: Construct, id: string, props: GridCustomResourceProps<SiteInviteSpec>) {
    super(scope, id, 'SiteInvite', props);
  }
}
