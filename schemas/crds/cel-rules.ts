// The x-kubernetes-validations rules of a schema, evaluated with @marcbachmann/cel-js on `self` at each rule's
// node, as the API server evaluates them on the stored (pruned, defaulted) object.
import { parse as parseCel } from '@marcbachmann/cel-js';
import { childSchemas, firstLine, isObject } from './schema-walk.ts';
import type { LocatedIssue, Node, Segment } from './schema-walk.ts';

/** Rules reading `oldSelf` are transition rules: they need the previous object, which only the API server has. */
const TRANSITION_RULE = /\boldSelf\b/;

/** JSON values as CEL sees them: schema integers are CEL ints (BigInt in cel-js), other numbers doubles. */
function toCel(schema: Node, value: unknown): unknown {
  if (schema['type'] === 'integer' && typeof value === 'number' && Number.isInteger(value)) return BigInt(value);
  if (Array.isArray(value)) {
    const items = isObject(schema['items']) ? schema['items'] : {};
    return value.map((item) => toCel(items, item));
  }
  if (isObject(value)) {
    const out: Node = {};
    const properties = isObject(schema['properties']) ? schema['properties'] : {};
    const additional = isObject(schema['additionalProperties']) ? schema['additionalProperties'] : {};
    for (const [key, child] of Object.entries(value)) {
      const sub = properties[key];
      out[key] = toCel(isObject(sub) ? sub : additional, child);
    }
    return out;
  }
  return value;
}

interface CelRule {
  readonly rule: string;
  readonly message?: string;
  readonly messageExpression?: string;
  readonly fieldPath?: string;
}

type CelProgram = (context: Record<string, unknown>) => unknown;
const programs = new Map<string, CelProgram>();

function program(expression: string): CelProgram {
  let compiledProgram = programs.get(expression);
  if (compiledProgram === undefined) {
    compiledProgram = parseCel(expression) as unknown as CelProgram;
    programs.set(expression, compiledProgram);
  }
  return compiledProgram;
}

/** `.a.b` / `.a['b']` / `.a[0]` fieldPath of a rule, as path segments. */
function fieldPathSegments(fieldPath: string | undefined): Segment[] {
  if (fieldPath === undefined || fieldPath === '') return [];
  const out: Segment[] = [];
  const pattern = /\.([A-Za-z_$][A-Za-z0-9_$-]*)|\[(\d+)\]|\['([^']*)'\]/g;
  for (const match of fieldPath.matchAll(pattern)) {
    if (match[1] !== undefined) out.push(match[1]);
    else if (match[2] !== undefined) out.push(Number(match[2]));
    else if (match[3] !== undefined) out.push(match[3]);
  }
  return out;
}

function isPrefix(prefix: readonly Segment[], of: readonly Segment[]): boolean {
  return prefix.length <= of.length && prefix.every((segment, i) => of[i] === segment);
}

export function celIssues(
  schema: Node,
  value: unknown,
  segments: Segment[],
  broken: readonly (readonly Segment[])[],
  out: LocatedIssue[],
): void {
  if (value === undefined) return;
  // A node whose own shape is wrong already has an issue; its rules would only repeat it less clearly.
  if (broken.some((b) => isPrefix(segments, b))) {
    for (const [segment, sub, child] of childSchemas(schema, value)) {
      celIssues(sub, child, [...segments, segment], broken, out);
    }
    return;
  }
  const rules = Array.isArray(schema['x-kubernetes-validations'])
    ? (schema['x-kubernetes-validations'] as CelRule[])
    : [];
  let self: unknown;
  for (const rule of rules) {
    if (TRANSITION_RULE.test(rule.rule)) continue;
    self ??= toCel(schema, value);
    const where = [...segments, ...fieldPathSegments(rule.fieldPath)];
    let result: unknown;
    try {
      result = program(rule.rule)({ self });
    } catch (error) {
      out.push({
        segments: where,
        message: `${rule.message ?? 'validation rule'} (rule could not be evaluated: ${firstLine(error)})`,
      });
      continue;
    }
    if (result === true) continue;
    let message = rule.message ?? `failed rule: ${rule.rule}`;
    if (rule.messageExpression !== undefined) {
      try {
        const computed = program(rule.messageExpression)({ self });
        if (typeof computed === 'string' && computed.trim() !== '') message = computed;
      } catch {
        // The static message stands, as on the API server.
      }
    }
    out.push({ segments: where, message });
  }
  for (const [segment, sub, child] of childSchemas(schema, value)) {
    celIssues(sub, child, [...segments, segment], broken, out);
  }
}
