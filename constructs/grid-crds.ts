import { Construct } from 'constructs';
import { ApiObject } from 'cdk8s';
import { KINDS, crdManifest, type GridKind } from '../schemas/crds/definitions.ts';

/**
 * The six CustomResourceDefinitions of the grid API (apiextensions.k8s.io/v1), taken whole from crdManifest():
 * the schema files in schemas/crds/ are the only field lists, so nothing here can drift from them.
 */
export class GridCrds extends Construct {
  /** The CRD objects by kind. */
  readonly crds: Readonly<Record<GridKind, ApiObject>>;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const crds = {} as Record<GridKind, ApiObject>;
    for (const kind of KINDS) crds[kind] = new ApiObject(this, kind, crdManifest(kind));
    this.crds = crds;
  }
}
