// Walking a resource along its schema: the traversal, the list-type (map/set) uniqueness the API server enforces,
// pruning of unknown fields and defaulting, all as the API server does them. Shared by validate.ts and cel-rules.ts.

export type Node = Record<string, unknown>;
export type Segment = string | number;

/** A problem at a path of segments (formatted only at the end, so paths can be compared as prefixes). */
export interface LocatedIssue {
  readonly segments: readonly Segment[];
  readonly message: string;
  /** The value at (or under) segments has the wrong shape, so CEL rules above it cannot be evaluated. */
  readonly breaksShape?: boolean;
}

export function isObject(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const MAX_VALUE_IN_MESSAGE = 64;

/** A value as quoted in a message, cut short: input can be arbitrarily large. */
export function show(value: unknown): string {
  let text: string;
  try {
    text = typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
  } catch {
    text = String(value);
  }
  return text.length > MAX_VALUE_IN_MESSAGE ? `${text.slice(0, MAX_VALUE_IN_MESSAGE)}…` : text;
}

export function valueAt(root: unknown, segments: readonly Segment[]): unknown {
  let current: unknown = root;
  for (const segment of segments) {
    if (typeof segment === 'number') current = Array.isArray(current) ? current[segment] : undefined;
    else current = isObject(current) ? current[segment] : undefined;
  }
  return current;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$-]*$/;

/** `spec.consumerGateways[0].praxisConfig`, `matchLabels["grid.praxis.fast/site"]`. */
export function formatPath(segments: readonly Segment[]): string {
  let out = '';
  for (const segment of segments) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (IDENTIFIER.test(segment)) out += out === '' ? segment : `.${segment}`;
    else out += `[${JSON.stringify(segment)}]`;
  }
  return out;
}

/** The first line of an error message, bounded (cel-js messages carry a multi-line source excerpt). */
export function firstLine(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return (text.split('\n')[0] ?? '').slice(0, 200);
}

/** The present children of a value with their schema nodes (properties, map values, list items). */
export function childSchemas(schema: Node, value: unknown): Array<[Segment, Node, unknown]> {
  const out: Array<[Segment, Node, unknown]> = [];
  if (Array.isArray(value) && isObject(schema['items'])) {
    value.forEach((item, index) => {
      out.push([index, schema['items'] as Node, item]);
    });
  } else if (isObject(value)) {
    const properties = isObject(schema['properties']) ? schema['properties'] : undefined;
    const additional = isObject(schema['additionalProperties']) ? schema['additionalProperties'] : undefined;
    for (const [key, child] of Object.entries(value)) {
      const sub = properties?.[key];
      if (isObject(sub)) out.push([key, sub, child]);
      else if (additional !== undefined && properties?.[key] === undefined) out.push([key, additional, child]);
    }
  }
  return out;
}

/** Duplicate keys of `x-kubernetes-list-type: map` lists and duplicate items of `set` lists. */
export function listTypeIssues(schema: Node, value: unknown, segments: Segment[], out: LocatedIssue[]): void {
  if (Array.isArray(value)) {
    const listType = schema['x-kubernetes-list-type'];
    if (listType === 'map' || listType === 'set') {
      const keys = listType === 'map' ? ((schema['x-kubernetes-list-map-keys'] as string[] | undefined) ?? []) : [];
      const seen = new Map<string, number>();
      value.forEach((item, index) => {
        const identity =
          listType === 'map'
            ? JSON.stringify(keys.map((k) => (isObject(item) ? (item[k] ?? null) : null)))
            : JSON.stringify(item);
        const first = seen.get(identity);
        if (first === undefined) {
          seen.set(identity, index);
          return;
        }
        const what =
          listType === 'map'
            ? keys.map((k) => `${k} ${show(isObject(item) ? item[k] : undefined)}`).join(', ')
            : show(item);
        out.push({ segments: [...segments, index], message: `duplicate entry (${what}): already at index ${first}` });
      });
    }
  }
  for (const [segment, sub, child] of childSchemas(schema, value)) {
    listTypeIssues(sub, child, [...segments, segment], out);
  }
}

/** Removes unknown fields in place, as the API server prunes them before it stores or validates with CEL. */
export function prune(schema: Node, value: unknown): void {
  if (isObject(value) && isObject(schema['properties']) && schema['x-kubernetes-preserve-unknown-fields'] !== true) {
    const properties = schema['properties'];
    for (const key of Object.keys(value)) {
      if (properties[key] === undefined && !isObject(schema['additionalProperties'])) delete value[key];
    }
  }
  for (const [, sub, child] of childSchemas(schema, value)) prune(sub, child);
}

/** Fills schema defaults in place, top-down (a defaulted object gets its own fields' defaults too). */
export function fillDefaults(schema: Node, value: unknown): void {
  if (isObject(value) && isObject(schema['properties'])) {
    for (const [key, sub] of Object.entries(schema['properties'])) {
      if (value[key] === undefined && isObject(sub) && sub['default'] !== undefined) {
        value[key] = structuredClone(sub['default']);
      }
    }
  }
  for (const [, sub, child] of childSchemas(schema, value)) fillDefaults(sub, child);
}

export function deepCopy<T>(value: T): T {
  try {
    return structuredClone(value);
  } catch {
    // Functions, symbols and the like cannot be part of a resource; a JSON round trip drops them.
    return JSON.parse(JSON.stringify(value) ?? 'null') as T;
  }
}
