// Validates a Grid custom resource the way the API server would, but louder: used at synth time (constructs) and
// by the operator on objects it reads. Four passes, all driven by the kind's schema file:
//   1. apiVersion, kind, metadata.name (the API server checks these itself; ObjectMeta is untyped in the schema);
//   2. the OpenAPI part with ajv, defaults NOT applied, and every unknown field an error (the API server would
//      silently prune it, so a typo would vanish instead of failing);
//   3. x-kubernetes-list-type uniqueness (map keys, set items), which the API server enforces and JSON Schema
//      cannot express;
//   4. every x-kubernetes-validations CEL rule, evaluated on `self` at its node of the defaulted copy (the API
//      server defaults before it validates). Transition rules (those reading `oldSelf`) need the previous object
//      and are left to the API server.
import { Ajv } from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { API_VERSION, KINDS, isGridKind, openApiSchema } from './definitions.ts';
import type { GridKind } from './definitions.ts';
import { celIssues } from './cel-rules.ts';
import {
  deepCopy,
  fillDefaults,
  firstLine,
  formatPath,
  isObject,
  listTypeIssues,
  prune,
  show,
  valueAt,
} from './schema-walk.ts';
import type { LocatedIssue, Node, Segment } from './schema-walk.ts';

export interface ResourceIssue {
  /** Where, e.g. `spec.admissionPolicy.pressure.exitThreshold` or `spec.seeds[2]`; `""` for the whole object. */
  readonly path: string;
  readonly message: string;
}

/** More issues than this are summarized in one last issue, so a garbage input cannot flood a log. */
export const MAX_ISSUES = 50;

const KUBERNETES_KEYWORDS = [
  'x-kubernetes-validations',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-embedded-resource',
] as const;

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

// ---------------------------------------------------------------------------------------------------------------
// Schemas, compiled once per kind

interface KindSchemas {
  /** openAPIV3Schema as the CRD carries it. */
  readonly openApi: Node;
  readonly validate: ValidateFunction;
}

let ajv: Ajv | undefined;
const compiled = new Map<GridKind, KindSchemas>();

function getAjv(): Ajv {
  if (ajv !== undefined) return ajv;
  const instance = new Ajv({ strict: true, allErrors: true, useDefaults: false, validateFormats: true });
  for (const keyword of KUBERNETES_KEYWORDS) instance.addKeyword({ keyword });
  // The two formats the schemas use, with the API server's meaning.
  instance.addFormat('date-time', {
    type: 'string',
    validate: (s: string) => RFC3339.test(s) && !Number.isNaN(Date.parse(s)),
  });
  instance.addFormat('int64', { type: 'number', validate: (n: number) => Number.isSafeInteger(n) });
  ajv = instance;
  return instance;
}

/** Closes every typed object so unknown fields fail instead of being pruned. */
function closeObjects(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(closeObjects);
  if (!isObject(node)) return node;
  const out: Node = {};
  for (const [key, value] of Object.entries(node)) {
    out[key] = key === 'default' || key === 'enum' || key === 'x-kubernetes-validations' ? value : closeObjects(value);
  }
  if (
    isObject(out['properties']) &&
    out['additionalProperties'] === undefined &&
    out['x-kubernetes-preserve-unknown-fields'] !== true
  ) {
    out['additionalProperties'] = false;
  }
  return out;
}

function schemasOf(kind: GridKind): KindSchemas {
  const cached = compiled.get(kind);
  if (cached !== undefined) return cached;
  const openApi = openApiSchema(kind) as Node;
  const validate = getAjv().compile(closeObjects(openApi) as Node);
  const entry = { openApi, validate };
  compiled.set(kind, entry);
  return entry;
}

// ---------------------------------------------------------------------------------------------------------------
// ajv errors as issues

/** Decodes an ajv instancePath against the data, so array indexes and map keys are told apart. */
function pointerSegments(pointer: string, root: unknown): Segment[] {
  if (pointer === '') return [];
  const segments: Segment[] = [];
  let current: unknown = root;
  for (const raw of pointer.slice(1).split('/')) {
    const token = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(current)) {
      const index = Number(token);
      segments.push(index);
      current = current[index];
    } else {
      segments.push(token);
      current = isObject(current) ? current[token] : undefined;
    }
  }
  return segments;
}

function ajvIssue(error: ErrorObject, root: unknown): LocatedIssue {
  return { breaksShape: true, ...ajvMessage(error, root) };
}

function ajvMessage(error: ErrorObject, root: unknown): LocatedIssue {
  const base = pointerSegments(error.instancePath, root);
  const params = error.params as Record<string, unknown>;
  const got = (): string => ` (got ${show(valueAt(root, base))})`;
  switch (error.keyword) {
    case 'additionalProperties': {
      const field = String(params['additionalProperty']);
      return {
        segments: [...base, field],
        breaksShape: false,
        message: `unknown field "${field}": the API server would silently drop it (check the spelling)`,
      };
    }
    case 'required':
      return { segments: [...base, String(params['missingProperty'])], message: 'required field is missing' };
    case 'enum':
      return {
        segments: base,
        message: `must be one of ${(params['allowedValues'] as unknown[]).map((v) => show(v)).join(', ')}${got()}`,
      };
    case 'pattern':
      return { segments: base, message: `must match ${String(params['pattern'])}${got()}` };
    case 'type':
      return { segments: base, message: `must be of type ${String(params['type'])}${got()}` };
    case 'format':
      return { segments: base, message: `must be a valid ${String(params['format'])}${got()}` };
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
    case 'multipleOf':
      return { segments: base, message: `${error.message ?? 'out of range'}${got()}` };
    default:
      return { segments: base, message: error.message ?? `fails ${error.keyword}` };
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Public API

/**
 * The object as the API server would store it: a deep copy with every schema default filled in.
 * Input that is not a Grid object of a known kind is returned as a plain copy.
 */
export function applyDefaults<T>(kind: GridKind, obj: T): T {
  const copy = deepCopy(obj);
  try {
    fillDefaults(schemasOf(kind).openApi, copy);
  } catch {
    // Defaulting a malformed object is best effort; validateCustomResource reports what is wrong with it.
  }
  return copy;
}

/** Every problem with `obj` as a Grid custom resource, or `[]`. Never throws. */
export function validateCustomResource(obj: unknown): ResourceIssue[] {
  try {
    return bounded(collectIssues(obj));
  } catch (error) {
    return [{ path: '', message: `could not validate the object: ${firstLine(error)}` }];
  }
}

function bounded(issues: LocatedIssue[]): ResourceIssue[] {
  const unique = new Map<string, ResourceIssue>();
  for (const issue of issues) {
    const path = formatPath(issue.segments);
    const key = `${path}\u0000${issue.message}`;
    if (!unique.has(key)) unique.set(key, { path, message: issue.message });
  }
  const all = [...unique.values()];
  if (all.length <= MAX_ISSUES) return all;
  return [
    ...all.slice(0, MAX_ISSUES - 1),
    { path: '', message: `${all.length - (MAX_ISSUES - 1)} more issues not shown` },
  ];
}

function collectIssues(obj: unknown): LocatedIssue[] {
  if (!isObject(obj)) {
    return [
      {
        segments: [],
        message: `a Grid resource must be an object (got ${obj === null ? 'null' : Array.isArray(obj) ? 'an array' : typeof obj})`,
      },
    ];
  }
  const issues: LocatedIssue[] = [];
  const kind = obj['kind'];
  if (!isGridKind(kind)) {
    issues.push({ segments: ['kind'], message: `must be one of ${KINDS.join(', ')} (got ${show(kind)})` });
  }
  if (obj['apiVersion'] !== API_VERSION) {
    issues.push({ segments: ['apiVersion'], message: `must be ${API_VERSION} (got ${show(obj['apiVersion'])})` });
  }
  issues.push(...metadataIssues(obj['metadata']));
  if (!isGridKind(kind)) return issues;

  const { openApi, validate } = schemasOf(kind);
  const structural: LocatedIssue[] = [];
  if (!validate(obj)) {
    const errors = validate.errors ?? [];
    // A value of the wrong type also fails its enum/pattern/bounds; the type error alone says what to fix.
    const mistyped = new Set(errors.filter((e) => e.keyword === 'type').map((e) => e.instancePath));
    for (const error of errors) {
      if (error.keyword !== 'type' && mistyped.has(error.instancePath)) continue;
      structural.push(ajvIssue(error, obj));
    }
  }
  listTypeIssues(openApi, obj, [], structural);
  issues.push(...structural);

  // What the API server evaluates its rules on: unknown fields pruned, defaults applied.
  const stored = deepCopy(obj);
  prune(openApi, stored);
  fillDefaults(openApi, stored);
  const broken = structural.filter((i) => i.breaksShape === true).map((i) => i.segments);
  celIssues(openApi, stored, [], broken, issues);
  return issues;
}

function metadataIssues(metadata: unknown): LocatedIssue[] {
  if (!isObject(metadata)) return [{ segments: ['metadata'], message: 'required object is missing' }];
  const issues: LocatedIssue[] = [];
  const name = metadata['name'];
  if (typeof name !== 'string' || name.length === 0) {
    issues.push({ segments: ['metadata', 'name'], message: 'required field is missing' });
  } else if (name.length > 253 || !DNS_SUBDOMAIN.test(name)) {
    issues.push({
      segments: ['metadata', 'name'],
      message: `must be a DNS subdomain: at most 253 lowercase alphanumerics, '-' or '.' (got ${show(name)})`,
    });
  }
  if (metadata['namespace'] !== undefined) {
    issues.push({
      segments: ['metadata', 'namespace'],
      message: 'Grid resources are cluster-scoped: remove metadata.namespace',
    });
  }
  return issues;
}
