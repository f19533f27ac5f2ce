// crdManifest output must be accepted by a real API server: a structural openAPIV3Schema
// (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema)
// whose CEL rules have bounded cost, plus the names and printer columns of docs/contract.md §1. The checker below
// encodes the structural rules these schemas rely on; its own negative tests prove it catches each violation.
import { describe, expect, it } from 'vitest';
import { Ajv } from 'ajv';
import { parse as parseCel } from '@marcbachmann/cel-js';
import { DEFINITIONS, GROUP, KINDS, VERSION, crdManifest, openApiSchema } from '../../schemas/crds/definitions.ts';
import type { GridKind } from '../../schemas/crds/definitions.ts';

type Node = Record<string, unknown>;
const isObject = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Keywords apiextensions.k8s.io/v1 JSONSchemaProps accepts in a CRD schema (v1 forbids the rest). */
const ALLOWED = new Set([
  'type',
  'format',
  'title',
  'description',
  'default',
  'example',
  'externalDocs',
  'nullable',
  'enum',
  'maximum',
  'minimum',
  'exclusiveMaximum',
  'exclusiveMinimum',
  'multipleOf',
  'maxLength',
  'minLength',
  'pattern',
  'maxItems',
  'minItems',
  'maxProperties',
  'minProperties',
  'required',
  'items',
  'properties',
  'additionalProperties',
  'allOf',
  'anyOf',
  'oneOf',
  'not',
  'x-kubernetes-validations',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-embedded-resource',
]);
const TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean']);

/** Every violation of the structural-schema rules, as `path: problem`. */
function structuralViolations(schema: unknown): string[] {
  const out: string[] = [];
  const ajv = new Ajv({ strict: false, validateFormats: false });
  const walk = (node: unknown, path: string, isRoot: boolean): void => {
    if (!isObject(node)) {
      out.push(`${path}: schema node is not an object`);
      return;
    }
    for (const key of Object.keys(node)) if (!ALLOWED.has(key)) out.push(`${path}: keyword ${key} is not allowed`);
    const free = node['x-kubernetes-preserve-unknown-fields'] === true || node['x-kubernetes-int-or-string'] === true;
    const type = node['type'];
    if (typeof type !== 'string' || !TYPES.has(type)) {
      if (!free) out.push(`${path}: missing or invalid type`);
    }
    if (isRoot && type !== 'object') out.push(`${path}: the root must be an object`);
    if (node['additionalProperties'] === false) out.push(`${path}: additionalProperties: false is forbidden`);
    if (node['additionalProperties'] !== undefined && node['properties'] !== undefined) {
      out.push(`${path}: properties and additionalProperties are mutually exclusive`);
    }
    // Bounded CEL cost: the API server rejects rules whose estimated cost is unbounded.
    if (type === 'string' && node['maxLength'] === undefined && node['enum'] === undefined) {
      out.push(`${path}: string without maxLength`);
    }
    if (type === 'array' && node['maxItems'] === undefined) out.push(`${path}: array without maxItems`);
    if (type === 'object' && isObject(node['additionalProperties']) && node['maxProperties'] === undefined) {
      out.push(`${path}: map without maxProperties`);
    }
    if (node['default'] !== undefined) {
      const { default: _ignored, ...rest } = node;
      const stripped = JSON.parse(JSON.stringify(rest, (k, v) => (k.startsWith('x-kubernetes') ? undefined : v)));
      if (!ajv.validate(stripped, node['default'])) out.push(`${path}: default does not validate against its node`);
    }
    const listType = node['x-kubernetes-list-type'];
    if (listType !== undefined) {
      if (type !== 'array') out.push(`${path}: x-kubernetes-list-type on a non-array`);
      const items = node['items'];
      if (listType === 'map') {
        const keys = node['x-kubernetes-list-map-keys'];
        if (!Array.isArray(keys) || keys.length === 0) out.push(`${path}: list-type map without list-map-keys`);
        else if (isObject(items)) {
          const required = Array.isArray(items['required']) ? (items['required'] as string[]) : [];
          const props = isObject(items['properties']) ? items['properties'] : {};
          for (const key of keys as string[]) {
            const prop = props[key];
            if (!isObject(prop)) out.push(`${path}: map key ${key} is not a property`);
            else if (!required.includes(key) && prop['default'] === undefined) {
              out.push(`${path}: map key ${key} must be required or defaulted`);
            } else if (!['string', 'integer', 'boolean'].includes(String(prop['type']))) {
              out.push(`${path}: map key ${key} must be a scalar`);
            }
          }
        }
      } else if (
        listType === 'set' &&
        isObject(items) &&
        !['string', 'integer', 'number', 'boolean'].includes(String(items['type']))
      ) {
        out.push(`${path}: list-type set of non-scalars`);
      } else if (!['atomic', 'set', 'map'].includes(String(listType))) {
        out.push(`${path}: unknown list type ${String(listType)}`);
      }
    }
    const rules = node['x-kubernetes-validations'];
    if (rules !== undefined) {
      if (!Array.isArray(rules)) out.push(`${path}: x-kubernetes-validations must be a list`);
      else {
        for (const [i, r] of rules.entries()) {
          if (!isObject(r) || typeof r['rule'] !== 'string') {
            out.push(`${path}: rule ${i} has no rule text`);
            continue;
          }
          if (typeof r['message'] !== 'string' || r['message'].trim() === '' || /[\r\n]/.test(r['message'])) {
            out.push(`${path}: rule ${i} needs a one-line message`);
          }
          for (const expr of [r['rule'], r['messageExpression']]) {
            if (typeof expr !== 'string') continue;
            try {
              parseCel(expr);
            } catch (error) {
              out.push(`${path}: rule ${i} does not parse: ${(error as Error).message.split('\n')[0]}`);
            }
          }
          if (typeof r['fieldPath'] === 'string') {
            const field = /^\.([A-Za-z_][A-Za-z0-9_]*)$/.exec(r['fieldPath']);
            const props = isObject(node['properties']) ? node['properties'] : {};
            if (field === null || props[field[1] ?? ''] === undefined)
              out.push(`${path}: rule ${i} fieldPath does not name a property`);
          }
        }
      }
    }
    if (isObject(node['properties'])) {
      for (const [key, child] of Object.entries(node['properties'])) {
        if (isRoot && key === 'metadata') {
          if (isObject(child) && Object.keys(child).some((k) => k !== 'type'))
            out.push(`${path}.metadata: only type is allowed`);
          continue;
        }
        walk(child, `${path}.${key}`, false);
      }
    }
    if (node['items'] !== undefined) walk(node['items'], `${path}[]`, false);
    if (isObject(node['additionalProperties'])) walk(node['additionalProperties'], `${path}{}`, false);
  };
  walk(schema, '', true);
  return out;
}

describe('the structural-schema checker', () => {
  const base = () => ({
    type: 'object',
    properties: { spec: { type: 'object', properties: { a: { type: 'string', maxLength: 3 } } } },
  });
  it('accepts a minimal structural schema', () => {
    expect(structuralViolations(base())).toEqual([]);
  });
  it.each([
    ['$ref', (s: any) => (s.properties.spec.properties.a = { $ref: '#/x' }), 'keyword $ref is not allowed'],
    ['a missing type', (s: any) => delete s.properties.spec.properties.a.type, 'missing or invalid type'],
    [
      'additionalProperties: false',
      (s: any) => (s.properties.spec.additionalProperties = false),
      'additionalProperties: false is forbidden',
    ],
    ['an unbounded string', (s: any) => delete s.properties.spec.properties.a.maxLength, 'string without maxLength'],
    [
      'an unbounded array',
      (s: any) => (s.properties.spec.properties.b = { type: 'array', items: { type: 'integer' } }),
      'array without maxItems',
    ],
    [
      'an invalid default',
      (s: any) => (s.properties.spec.properties.a.default = 'toolong'),
      'default does not validate',
    ],
    [
      'a list-map key that may be absent',
      (s: any) =>
        (s.properties.spec.properties.l = {
          type: 'array',
          maxItems: 1,
          'x-kubernetes-list-type': 'map',
          'x-kubernetes-list-map-keys': ['k'],
          items: { type: 'object', properties: { k: { type: 'string', maxLength: 1 } } },
        }),
      'map key k must be required or defaulted',
    ],
    [
      'a rule that does not parse',
      (s: any) => (s.properties.spec['x-kubernetes-validations'] = [{ rule: 'self.(', message: 'm' }]),
      'does not parse',
    ],
    [
      '$schema inside',
      (s: any) => (s.$schema = 'http://json-schema.org/draft-07/schema#'),
      'keyword $schema is not allowed',
    ],
  ])('rejects %s', (_name, mutate, expected) => {
    const schema = base();
    mutate(schema);
    expect(structuralViolations(schema).join('\n')).toContain(expected);
  });
});

// docs/contract.md §1 table: kind | plural | short | printer columns.
const SPEC_TABLE: Record<GridKind, { plural: string; short: string; columns: Array<[string, string, number?]> }> = {
  GridNetwork: {
    plural: 'gridnetworks',
    short: 'gnw',
    columns: [
      ['Grid ID', '.status.gridId'],
      ['Phase', '.status.phase'],
      ['Sites', '.status.connectedSites'],
    ],
  },
  GridSite: {
    plural: 'gridsites',
    short: 'gs',
    columns: [
      ['Phase', '.status.phase'],
      ['Network', '.spec.gridNetworkRef'],
    ],
  },
  InferenceProvider: {
    plural: 'inferenceproviders',
    short: 'infpvd',
    columns: [
      ['Provider', '.spec.providerKind'],
      ['Ready', '.status.conditions[?(@.type=="Ready")].status'],
      ['Age', '.metadata.creationTimestamp'],
      ['Reason', '.status.conditions[?(@.type=="Ready")].reason', 1],
      ['Phase', '.status.phase', 1],
    ],
  },
  AgentToolProvider: {
    plural: 'agenttoolproviders',
    short: 'atp',
    columns: [
      ['Protocol', '.spec.protocol'],
      ['Phase', '.status.phase'],
    ],
  },
  AgentToAgentProvider: {
    plural: 'agenttoagentproviders',
    short: 'a2ap',
    columns: [
      ['Protocol', '.spec.protocol'],
      ['Phase', '.status.phase'],
    ],
  },
  SiteInvite: {
    plural: 'siteinvites',
    short: 'sinv',
    columns: [
      ['Site', '.spec.siteName'],
      ['Expires', '.status.expiresAt'],
      ['Redeemed', '.status.redeemed'],
    ],
  },
};

describe.each(KINDS)('crdManifest(%s)', (kind) => {
  const crd = crdManifest(kind);
  const version = crd.spec.versions[0]!;

  it('is a cluster-scoped v1 CRD of grid.praxis.fast with a served, stored v1alpha1 and a status subresource', () => {
    expect(crd.apiVersion).toBe('apiextensions.k8s.io/v1');
    expect(crd.kind).toBe('CustomResourceDefinition');
    expect(crd.metadata.name).toBe(`${SPEC_TABLE[kind].plural}.grid.praxis.fast`);
    expect(crd.spec.group).toBe(GROUP);
    expect(crd.spec.scope).toBe('Cluster');
    expect(crd.spec.versions).toHaveLength(1);
    expect(version.name).toBe(VERSION);
    expect(version.served).toBe(true);
    expect(version.storage).toBe(true);
    expect(version.subresources).toEqual({ status: {} });
  });

  it('has the names and short name of docs/contract.md §1', () => {
    expect(crd.spec.names.kind).toBe(kind);
    expect(crd.spec.names.plural).toBe(SPEC_TABLE[kind].plural);
    expect(crd.spec.names.singular).toBe(kind.toLowerCase());
    expect(crd.spec.names.listKind).toBe(`${kind}List`);
    expect(crd.spec.names.shortNames).toEqual([SPEC_TABLE[kind].short]);
  });

  it('has exactly the printer columns of docs/contract.md §1', () => {
    const columns = version.additionalPrinterColumns.map((c) => [c.name, c.jsonPath, c.priority ?? 0]);
    expect(columns).toEqual(SPEC_TABLE[kind].columns.map(([name, path, priority]) => [name, path, priority ?? 0]));
  });

  it('carries a structural openAPIV3Schema built from the schema file', () => {
    const schema = version.schema.openAPIV3Schema;
    expect(structuralViolations(schema)).toEqual([]);
    expect(Object.keys(schema['properties'] as Node).sort()).toEqual([
      'apiVersion',
      'kind',
      'metadata',
      'spec',
      'status',
    ]);
    expect(schema['required']).toEqual(['spec']);
    const fileSchema = DEFINITIONS[kind].schema as Node;
    expect((schema['properties'] as Node)['spec']).toEqual((fileSchema['properties'] as Node)['spec']);
    expect((schema['properties'] as Node)['status']).toEqual((fileSchema['properties'] as Node)['status']);
  });

  it('returns a fresh object each call (callers may mutate it)', () => {
    const first = crdManifest(kind);
    (first.spec.versions[0]!.schema.openAPIV3Schema['properties'] as Node)['spec'] = null;
    first.spec.names.shortNames.push('x');
    expect(crdManifest(kind)).toEqual(crd);
    expect(openApiSchema(kind)).toEqual(crd.spec.versions[0]!.schema.openAPIV3Schema);
  });
});

describe('CEL rules in the CRDs', () => {
  const allRules = (node: unknown, out: string[] = []): string[] => {
    if (Array.isArray(node)) for (const n of node) allRules(n, out);
    else if (isObject(node)) {
      for (const [k, v] of Object.entries(node)) {
        if (k === 'x-kubernetes-validations' && Array.isArray(v))
          out.push(...v.map((r) => String((r as Node)['rule'])));
        else if (k !== 'default' && k !== 'enum') allRules(v, out);
      }
    }
    return out;
  };

  it('use oldSelf only for the SiteInvite spec immutability rule (docs/contract.md §1: "SiteInvite.spec immutable (self == oldSelf)")', () => {
    const transitions = KINDS.flatMap((k) =>
      allRules(openApiSchema(k))
        .filter((r) => /oldSelf/.test(r))
        .map((r) => `${k}: ${r}`),
    );
    expect(transitions).toEqual(['SiteInvite: self == oldSelf']);
    const specRules = (openApiSchema('SiteInvite')['properties'] as Node)['spec'] as Node;
    expect(specRules['x-kubernetes-validations']).toContainEqual({
      rule: 'self == oldSelf',
      message: 'SiteInvite spec is immutable; delete and recreate the invite to change it',
    });
  });

  it('the immutability rule rejects a changed spec and accepts an unchanged one', () => {
    const rule = parseCel('self == oldSelf');
    const spec = { siteName: 'east2', jurisdictions: ['eu-west'], lifetime: '24h', allowDeletedName: false };
    expect(rule({ self: spec, oldSelf: structuredClone(spec) })).toBe(true);
    expect(rule({ self: { ...spec, lifetime: '48h' }, oldSelf: spec })).toBe(false);
  });
});
