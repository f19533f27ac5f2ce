// The Grid API (docs/contract.md §1): group, version, the six kinds with their names and printer columns, and the
// CustomResourceDefinition each one is served by. The field lists live only in the `<plural>.schema.json` files
// beside this module; everything here is derived from them.
import gridNetworks from './gridnetworks.schema.json' with { type: 'json' };
import gridSites from './gridsites.schema.json' with { type: 'json' };
import inferenceProviders from './inferenceproviders.schema.json' with { type: 'json' };
import agentToolProviders from './agenttoolproviders.schema.json' with { type: 'json' };
import agentToAgentProviders from './agenttoagentproviders.schema.json' with { type: 'json' };
import siteInvites from './siteinvites.schema.json' with { type: 'json' };

export const GROUP = 'grid.praxis.fast';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}` as const;
/** Prefix of every Grid label and annotation key. */
export const LABEL_PREFIX = `${GROUP}/`;

export const KINDS = [
  'GridNetwork',
  'GridSite',
  'InferenceProvider',
  'AgentToolProvider',
  'AgentToAgentProvider',
  'SiteInvite',
] as const;
export type GridKind = (typeof KINDS)[number];

/** A JSON Schema node as stored in the schema files (OpenAPI v3 subset accepted by Kubernetes). */
export type SchemaNode = { readonly [keyword: string]: unknown };

/** One `additionalPrinterColumns` entry of apiextensions.k8s.io/v1. */
export interface PrinterColumn {
  readonly name: string;
  readonly type: 'string' | 'integer' | 'number' | 'boolean' | 'date';
  readonly jsonPath: string;
  readonly description?: string;
  /** 0 is shown by `kubectl get`; 1 only with `-o wide`. */
  readonly priority?: number;
}

export interface KindDefinition {
  readonly kind: GridKind;
  readonly plural: string;
  readonly singular: string;
  readonly listKind: string;
  readonly shortNames: readonly string[];
  readonly printerColumns: readonly PrinterColumn[];
  /** The `<plural>.schema.json` document: spec and status of the whole object. */
  readonly schema: SchemaNode;
}

const phase: PrinterColumn = { name: 'Phase', type: 'string', jsonPath: '.status.phase' };
const readyCondition = '.status.conditions[?(@.type=="Ready")]';

export const DEFINITIONS: { readonly [K in GridKind]: KindDefinition } = {
  GridNetwork: {
    kind: 'GridNetwork',
    plural: 'gridnetworks',
    singular: 'gridnetwork',
    listKind: 'GridNetworkList',
    shortNames: ['gnw'],
    printerColumns: [
      { name: 'Grid ID', type: 'string', jsonPath: '.status.gridId' },
      phase,
      { name: 'Sites', type: 'integer', jsonPath: '.status.connectedSites' },
    ],
    schema: gridNetworks,
  },
  GridSite: {
    kind: 'GridSite',
    plural: 'gridsites',
    singular: 'gridsite',
    listKind: 'GridSiteList',
    shortNames: ['gs'],
    printerColumns: [phase, { name: 'Network', type: 'string', jsonPath: '.spec.gridNetworkRef' }],
    schema: gridSites,
  },
  InferenceProvider: {
    kind: 'InferenceProvider',
    plural: 'inferenceproviders',
    singular: 'inferenceprovider',
    listKind: 'InferenceProviderList',
    shortNames: ['infpvd'],
    printerColumns: [
      { name: 'Provider', type: 'string', jsonPath: '.spec.providerKind' },
      // Readiness is a condition, not a phase (docs/contract.md §1): the column reads the condition directly.
      { name: 'Ready', type: 'string', jsonPath: `${readyCondition}.status` },
      { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
      { name: 'Reason', type: 'string', jsonPath: `${readyCondition}.reason`, priority: 1 },
      { ...phase, priority: 1 },
    ],
    schema: inferenceProviders,
  },
  AgentToolProvider: {
    kind: 'AgentToolProvider',
    plural: 'agenttoolproviders',
    singular: 'agenttoolprovider',
    listKind: 'AgentToolProviderList',
    shortNames: ['atp'],
    printerColumns: [{ name: 'Protocol', type: 'string', jsonPath: '.spec.protocol' }, phase],
    schema: agentToolProviders,
  },
  AgentToAgentProvider: {
    kind: 'AgentToAgentProvider',
    plural: 'agenttoagentproviders',
    singular: 'agenttoagentprovider',
    listKind: 'AgentToAgentProviderList',
    shortNames: ['a2ap'],
    printerColumns: [{ name: 'Protocol', type: 'string', jsonPath: '.spec.protocol' }, phase],
    schema: agentToAgentProviders,
  },
  SiteInvite: {
    kind: 'SiteInvite',
    plural: 'siteinvites',
    singular: 'siteinvite',
    listKind: 'SiteInviteList',
    shortNames: ['sinv'],
    printerColumns: [
      { name: 'Site', type: 'string', jsonPath: '.spec.siteName' },
      { name: 'Expires', type: 'date', jsonPath: '.status.expiresAt' },
      { name: 'Redeemed', type: 'boolean', jsonPath: '.status.redeemed' },
    ],
    schema: siteInvites,
  },
};

export function isGridKind(value: unknown): value is GridKind {
  return typeof value === 'string' && (KINDS as readonly string[]).includes(value);
}

/** Keywords of the schema files that describe the document, not the object (they may not appear in a CRD). */
const DOCUMENT_KEYWORDS = new Set(['$schema', '$id', '$comment']);

/**
 * The `openAPIV3Schema` of a kind: the schema file without its document keywords, plus the apiVersion, kind
 * and metadata every Kubernetes object carries (metadata stays untyped: the API server validates ObjectMeta).
 * Returns a fresh deep copy; callers may mutate it.
 */
export function openApiSchema(kind: GridKind): Record<string, unknown> {
  const source = structuredClone(DEFINITIONS[kind].schema) as Record<string, unknown>;
  const properties = (source['properties'] ?? {}) as Record<string, unknown>;
  const result: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(source)) {
    if (DOCUMENT_KEYWORDS.has(key) || key === 'properties') continue;
    result[key] = value;
  }
  result['properties'] = {
    apiVersion: { type: 'string', maxLength: 253, description: `APIVersion of the object: ${API_VERSION}.` },
    kind: { type: 'string', maxLength: 63, description: `Kind of the object: ${kind}.` },
    metadata: { type: 'object' },
    ...properties,
  };
  return result;
}

export interface CustomResourceDefinitionManifest {
  apiVersion: 'apiextensions.k8s.io/v1';
  kind: 'CustomResourceDefinition';
  metadata: { name: string; labels: Record<string, string> };
  spec: {
    group: string;
    names: {
      kind: string;
      plural: string;
      singular: string;
      listKind: string;
      shortNames: string[];
      categories: string[];
    };
    scope: 'Cluster';
    versions: Array<{
      name: string;
      served: true;
      storage: true;
      subresources: { status: Record<string, never> };
      additionalPrinterColumns: PrinterColumn[];
      schema: { openAPIV3Schema: Record<string, unknown> };
    }>;
  };
}

/** The plain apiextensions.k8s.io/v1 CustomResourceDefinition of a kind (pure; a fresh object per call). */
export function crdManifest(kind: GridKind): CustomResourceDefinitionManifest {
  const def = DEFINITIONS[kind];
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${def.plural}.${GROUP}`,
      labels: { 'app.kubernetes.io/part-of': 'agn' },
    },
    spec: {
      group: GROUP,
      names: {
        kind: def.kind,
        plural: def.plural,
        singular: def.singular,
        listKind: def.listKind,
        shortNames: [...def.shortNames],
        // `kubectl get grid` lists every Grid resource.
        categories: ['grid'],
      },
      scope: 'Cluster',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {} },
          additionalPrinterColumns: def.printerColumns.map((c) => ({ ...c })),
          schema: { openAPIV3Schema: openApiSchema(kind) },
        },
      ],
    },
  };
}

/** The common shape of a Grid object; the spec/status types come from schemas/generated/. */
export interface GridObject<K extends GridKind, Spec, Status> {
  apiVersion: typeof API_VERSION;
  kind: K;
  metadata: {
    name: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    creationTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [field: string]: unknown;
  };
  spec: Spec;
  status?: Status;
}
