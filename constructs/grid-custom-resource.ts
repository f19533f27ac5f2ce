import { Construct } from 'constructs';
import { ApiObject } from 'cdk8s';
import { API_VERSION, DEFINITIONS, type GridKind } from '../schemas/crds/definitions.ts';
import { validateCustomResource, type ResourceIssue } from '../schemas/crds/validate.ts';
import { constructPath, throwIfIssues, type SynthIssue } from './synth-error.ts';

export interface GridCustomResourceProps<Spec> {
  /** metadata.name; the grid kinds are cluster-scoped, so it is unique per kind in a cluster. */
  readonly name: string;
  /** The spec, typed from the generated schema types. */
  readonly spec: Spec;
  /** @default - none */
  readonly labels?: Record<string, string>;
  /** @default - none */
  readonly annotations?: Record<string, string>;
}

/** The correction to suggest for one validation issue of a custom resource. */
export function fixFor(kind: GridKind, issue: ResourceIssue): string {
  const field =
    issue.path
      .split('.')
      .pop()
      ?.replace(/\[\d+\]$/u, '') ?? issue.path;
  const deprecated = /deprecated name of (\w+)/u.exec(issue.message);
  if (deprecated !== null) return `remove ${field} and keep only ${deprecated[1]} (the current name)`;
  if (issue.message.startsWith('required field is missing')) return `add ${field} to the declaration`;
  if (field === 'capacityWeight') return 'set capacityWeight to an integer from 1 to 1000 (omit it for weight 1)';
  if (field === 'placementPolicy' || field === 'selectionPolicy') {
    return 'set placementPolicy: { strategy: static } together with selectionPolicy.mode weightedRandom, and neither otherwise';
  }
  if (/must match \^\(?\[1-9\]\[0-9\]\*s/u.test(issue.message)) {
    return issue.message.includes('ms')
      ? 'write the duration as whole seconds like 30s, or milliseconds of at least 1000ms'
      : 'write the duration as whole seconds like 10s';
  }
  const duplicate = /duplicate entry \((\w+)/u.exec(issue.message);
  if (duplicate !== null)
    return `give every entry of ${issue.path.replace(/\[\d+\]$/u, '')} a distinct ${duplicate[1]}`;
  return `change ${field} to satisfy the ${kind} schema (schemas/crds/${DEFINITIONS[kind].plural}.schema.json)`;
}

/** The manifest of a grid custom resource as it is emitted (before cdk8s resolves it). */
export function customResourceManifest<Spec extends object>(
  kind: GridKind,
  props: GridCustomResourceProps<Spec>,
): { apiVersion: string; kind: GridKind; metadata: { name: string }; spec: Spec } {
  const metadata = {
    name: props.name,
    ...(props.labels === undefined ? {} : { labels: props.labels }),
    ...(props.annotations === undefined ? {} : { annotations: props.annotations }),
  };
  return { apiVersion: API_VERSION, kind, metadata, spec: props.spec };
}

/**
 * The problems the API server would find with a custom resource (schema, list uniqueness, CEL rules), reported at
 * `path` (the construct path it has or will have). Pure, so a stack can check all of its resources before it builds
 * any of them and report every problem at once.
 */
export function customResourceIssues<Spec extends object>(
  path: string,
  kind: GridKind,
  props: GridCustomResourceProps<Spec>,
): SynthIssue[] {
  return validateCustomResource(customResourceManifest(kind, props)).map((issue) => ({
    path,
    field: issue.path === '' ? '(object)' : issue.path,
    problem: issue.message,
    fix: fixFor(kind, issue),
  }));
}

/**
 * One custom resource of the grid API. The object is validated the way the API server would (schema, list
 * uniqueness, CEL rules) when the construct is created, so a bad declaration fails before anything is written.
 */
export class GridCustomResource<Spec extends object> extends Construct {
  readonly kind: GridKind;
  readonly name: string;
  readonly spec: Spec;
  readonly apiObject: ApiObject;

  constructor(scope: Construct, id: string, kind: GridKind, props: GridCustomResourceProps<Spec>) {
    super(scope, id);
    this.kind = kind;
    this.name = props.name;
    this.spec = props.spec;
    throwIfIssues(customResourceIssues(constructPath(this), kind, props));
    this.apiObject = new ApiObject(this, 'Resource', customResourceManifest(kind, props));
  }

  /** The manifest as emitted (resolved), for tests and cross-checks. */
  toJson(): Record<string, unknown> {
    return this.apiObject.toJson() as Record<string, unknown>;
  }
}
