// Offline Kubernetes 1.28 object validation for the manifests in dist/. No OpenAPI document ships in
// node_modules, but cdk8s-plus-28 ships its jsii assembly (.jsii): every k8s 1.28 type of its generated imports
// with each property's JSON name (docs.custom.schema = "io.k8s...Type#jsonName"), its type and whether it is
// required. That is the Kubernetes OpenAPI schema re-expressed, so we validate against it: unknown fields (what
// `kubectl apply --validate=strict` rejects), missing required fields and wrong primitive types.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { k8s } from 'cdk8s-plus-28';

type JsiiType =
  | { primitive: 'string' | 'number' | 'boolean' | 'any' | 'json' | 'date' }
  | { fqn: string }
  | { collection: { kind: 'array' | 'map'; elementtype: JsiiType } }
  | { union: { types: JsiiType[] } };

interface JsiiProperty {
  name: string;
  optional?: boolean;
  type: JsiiType;
  docs?: { custom?: { schema?: string } };
}

interface JsiiTypeDef {
  kind: 'interface' | 'class' | 'enum';
  properties?: JsiiProperty[];
}

interface Field {
  readonly type: JsiiType;
  readonly required: boolean;
}

const PREFIX = 'cdk8s-plus-28.k8s.';
// IntOrString and Quantity are classes in the imports; on the wire they are a string or an integer.
const STRING_OR_NUMBER = new Set([`${PREFIX}IntOrString`, `${PREFIX}Quantity`]);

const require = createRequire(import.meta.url);
const assembly = JSON.parse(
  readFileSync(join(dirname(require.resolve('cdk8s-plus-28/package.json')), '.jsii'), 'utf8'),
) as {
  types: Record<string, JsiiTypeDef>;
};

const fieldsCache = new Map<string, Map<string, Field>>();

function fieldsOf(fqn: string): Map<string, Field> {
  const cached = fieldsCache.get(fqn);
  if (cached !== undefined) return cached;
  const def = assembly.types[fqn];
  if (def === undefined || def.kind !== 'interface') throw new Error(`no k8s type ${fqn}`);
  const fields = new Map<string, Field>();
  for (const property of def.properties ?? []) {
    const schema = property.docs?.custom?.schema ?? '';
    const jsonName = schema.includes('#') ? schema.slice(schema.indexOf('#') + 1) : property.name;
    fields.set(jsonName, { type: property.type, required: property.optional !== true });
  }
  fieldsCache.set(fqn, fields);
  return fields;
}

/** apiVersion/kind → the props type of its Kube* class (e.g. apps/v1 Deployment → KubeDeploymentProps). */
const propsByGvk = new Map<string, string>();
for (const [name, value] of Object.entries(k8s)) {
  const gvk = (value as { GVK?: { apiVersion: string; kind: string } }).GVK;
  if (name.startsWith('Kube') && gvk !== undefined && assembly.types[`${PREFIX}${name}Props`] !== undefined) {
    propsByGvk.set(`${gvk.apiVersion}/${gvk.kind}`, `${PREFIX}${name}Props`);
  }
}

function checkValue(value: unknown, type: JsiiType, path: string, errors: string[]): void {
  if ('primitive' in type) {
    const p = type.primitive;
    if (p === 'any' || p === 'json') return;
    const ok = p === 'date' ? typeof value === 'string' : typeof value === p;
    if (!ok) errors.push(`${path}: expected ${p}, got ${JSON.stringify(value)}`);
    return;
  }
  if ('union' in type) {
    const attempts = type.union.types.map((t) => {
      const e: string[] = [];
      checkValue(value, t, path, e);
      return e;
    });
    if (!attempts.some((e) => e.length === 0)) errors.push(...(attempts[0] ?? []));
    return;
  }
  if ('collection' in type) {
    if (type.collection.kind === 'array') {
      if (!Array.isArray(value)) return void errors.push(`${path}: expected an array`);
      for (const [i, item] of value.entries()) checkValue(item, type.collection.elementtype, `${path}[${i}]`, errors);
    } else {
      if (typeof value !== 'object' || value === null || Array.isArray(value))
        return void errors.push(`${path}: expected a map`);
      for (const [key, item] of Object.entries(value))
        checkValue(item, type.collection.elementtype, `${path}.${key}`, errors);
    }
    return;
  }
  if (STRING_OR_NUMBER.has(type.fqn)) {
    if (typeof value !== 'string' && typeof value !== 'number') errors.push(`${path}: expected a string or an integer`);
    return;
  }
  const def = assembly.types[type.fqn];
  if (def?.kind === 'enum') {
    if (typeof value !== 'string') errors.push(`${path}: expected a string`);
    return;
  }
  checkObject(value, type.fqn, path, errors);
}

function checkObject(
  value: unknown,
  fqn: string,
  path: string,
  errors: string[],
  ignore: readonly string[] = [],
): void {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    errors.push(`${path}: expected an object`);
    return;
  }
  const fields = fieldsOf(fqn);
  const record = value as Record<string, unknown>;
  for (const [name, field] of fields) {
    if (field.required && record[name] === undefined) errors.push(`${path}.${name}: required field is missing`);
  }
  for (const [key, child] of Object.entries(record)) {
    if (ignore.includes(key)) continue;
    const field = fields.get(key);
    if (field === undefined) {
      errors.push(`${path}.${key}: unknown field`);
      continue;
    }
    checkValue(child, field.type, `${path}.${key}`, errors);
  }
}

/** Whether the object is a built-in Kubernetes 1.28 kind this validator knows. */
export function isBuiltInKind(manifest: { apiVersion?: unknown; kind?: unknown }): boolean {
  return propsByGvk.has(`${String(manifest.apiVersion)}/${String(manifest.kind)}`);
}

/** Problems of one manifest against the Kubernetes 1.28 schema of its kind; empty when it is valid. */
export function validateKubernetesObject(manifest: Record<string, unknown>): string[] {
  const gvk = `${String(manifest['apiVersion'])}/${String(manifest['kind'])}`;
  const props = propsByGvk.get(gvk);
  if (props === undefined) return [`${gvk}: not a Kubernetes 1.28 kind`];
  const errors: string[] = [];
  const name = (manifest['metadata'] as { name?: string } | undefined)?.name ?? '?';
  checkObject(manifest, props, `${gvk} ${name}`, errors, ['apiVersion', 'kind']);
  return errors;
}
