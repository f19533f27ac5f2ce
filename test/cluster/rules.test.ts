// Every row of test/fixtures/crds/rule-cases.ts (one per OpenAPI/CEL rule of docs/contract.md §1, each citing its
// sentence) against the real API server with the CRDs from dist/: the invalid object is refused with the row's message
// at the row's path, its valid twin is stored. The unit suite runs the same rows through the local validator, so
// the two must agree on every rule.
//
// The rows carry the local validator's wording; the API server words OpenAPI failures its own way
// (`should match '…'`, `Unsupported value`, `Required value`, …). `expectedFromServer` translates each wording
// once, by rule shape, and CEL messages (the rules' own `message`) are matched verbatim.
import { beforeAll, describe, expect, it } from 'vitest';
import { RULES, ruleObject } from '../fixtures/crds/rule-cases.ts';
import type { RuleRow } from '../fixtures/crds/rule-cases.ts';
import type { KubeResponse } from '../../daemons/shared/resource-store/kube-http.ts';
import { adminKubeConfig, uniqueName } from './kube.ts';
import { applyManifests, RawClient } from './manifests.ts';
import type { Manifest } from './manifests.ts';

interface Expected {
  readonly status: 400 | 422;
  /** Every string must occur in the Status message. */
  readonly all: readonly string[];
  /** When set, the message may instead contain all of these (an equivalent wording of the same refusal). */
  readonly alternative?: readonly string[];
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function expectedFromServer(row: RuleRow): Expected {
  const { path, message } = row;
  // The API server checks maxLength before pattern and then skips the pattern: a too-long string that also
  // breaks the pattern is refused as "Too long" at the same path.
  const tooLong = [`${path}: Too long: may not be longer than`];
  let m: RegExpMatchArray | null;
  if ((m = message.match(/^must match (.+)$/)))
    return { status: 422, all: [`${path} in body should match '${m[1]}'`], alternative: tooLong };
  if (message === 'must match') return { status: 422, all: [`${path} in body should match '`], alternative: tooLong };
  if ((m = message.match(/^must be <= (\S+)$/)))
    return { status: 422, all: [`${path} in body should be less than or equal to ${m[1]}`] };
  if ((m = message.match(/^must be >= (\S+)$/)))
    return { status: 422, all: [`${path} in body should be greater than or equal to ${m[1]}`] };
  if (message === 'must be of type integer') return { status: 422, all: [`${path} in body must be of type integer`] };
  if ((m = message.match(/^must be one of (.+)$/)))
    return { status: 422, all: [`${path}: Unsupported value: `, `supported values: ${m[1]}`] };
  if (message === 'required field is missing') return { status: 422, all: [`${path}: Required value`] };
  if ((m = message.match(/^duplicate entry \((\w+) ("[^"]*")\)/)))
    return { status: 422, all: [`${path}: Duplicate value: `, `"${m[1]}":${m[2]}`] };
  if (message === 'duplicate entry') return { status: 422, all: [`${path}: Duplicate value: `] };
  if ((m = message.match(/^must NOT have fewer than (\d+) characters$/)))
    return { status: 422, all: [`${path} in body should be at least ${m[1]} chars long`] };
  if ((m = message.match(/^must NOT have fewer than (\d+) items$/)))
    return { status: 422, all: [`${path} in body should have at least ${m[1]} items`] };
  if ((m = message.match(/^must NOT have more than (\d+) items$/)))
    return { status: 422, all: [`${path}: Too many: `, `must have at most ${m[1]} items`] };
  // Unknown fields: with fieldValidation=Strict (kubectl's default) the request is refused before validation.
  if (message.startsWith('unknown field'))
    return { status: 400, all: [`strict decoding error: unknown field "${path}"`] };
  // Everything else is a CEL rule: its message, reported at the rule's field path.
  return { status: 422, all: [`${path}: Invalid value: `, message] };
}

/** The row's value at its path (`spec.a.b[0]`), for status rows under `status`. */
function valueAt(row: RuleRow, variant: unknown): unknown {
  const steps = row.path
    .replace(/\[(\d+)\]/g, '.$1')
    .split('.')
    .slice(1);
  let node: unknown = variant;
  for (const step of steps) node = (node as Record<string, unknown> | undefined)?.[step];
  return node;
}

function matches(text: string, expected: Expected, row: RuleRow): boolean {
  const hasAll = (parts: readonly string[]): boolean => parts.every((p) => text.includes(p));
  if (hasAll(expected.all)) return true;
  if (expected.alternative === undefined || !hasAll(expected.alternative)) return false;
  // "Too long" stands in for the pattern failure only when the value really is longer than the limit named.
  const limit = Number(/may not be longer than (\d+)/.exec(text)?.[1]);
  const value = valueAt(row, row.invalid);
  return typeof value === 'string' && Number.isInteger(limit) && value.length > limit;
}

// The whole Status message (the store's statusMessage() bounds it at 300 characters).
function statusMessage(res: KubeResponse): string {
  const body = res.body as { message?: unknown } | undefined;
  return typeof body?.message === 'string' ? body.message : `HTTP ${res.status}: ${JSON.stringify(res.body)}`;
}

let client: RawClient;
const collection = new Map<string, string>();

beforeAll(async () => {
  client = new RawClient(adminKubeConfig());
  await applyManifests(client, ['crds.k8s.yaml']);
});

async function collectionPath(object: Manifest['object']): Promise<string> {
  const key = object.kind;
  let path = collection.get(key);
  if (path === undefined) {
    path = (await client.objectPath(object)).replace(/\/[^/]+$/, '');
    collection.set(key, path);
  }
  return path;
}

/** Creates the row's object (for status rows: the object, then its status through the status subresource). */
async function submit(row: RuleRow, variant: unknown, name: string): Promise<{ status: number; message: string }> {
  const object = ruleObject(row, variant) as Manifest['object'];
  object.metadata = { name };
  const base = await collectionPath(object);
  const query = { fieldValidation: 'Strict' };
  if (row.status !== true) {
    const res = await client.request('POST', base, object, { query });
    return { status: res.status, message: statusMessage(res) };
  }
  const { status, ...withoutStatus } = object;
  const created = await client.request('POST', base, withoutStatus, { query });
  if (created.status !== 201)
    throw new Error(`creating ${row.kind} ${name} for a status row: ${statusMessage(created)}`);
  const res = await client.request(
    'PATCH',
    `${base}/${name}/status`,
    { status },
    { query, contentType: 'application/merge-patch+json' },
  );
  return { status: res.status, message: statusMessage(res) };
}

const rows = RULES.map((row, i) => ({
  i,
  row,
  label: `${row.kind}${row.status === true ? ' status' : ''} ${row.path}: ${row.message}`,
}));

// Concurrent: 89 rows x 2-3 requests each; one API server answers them in a few seconds.
describe.concurrent('every rule row of test/fixtures/crds/rule-cases.ts on the real API server', () => {
  it.each(rows)('row $i: $label', async ({ i, row }) => {
    const expected = expectedFromServer(row);
    const refused = await submit(row, row.invalid, uniqueName(`rule-${i}-bad`));
    expect(refused.status, `${row.cite}\n${refused.message}`).toBe(expected.status);
    expect(
      matches(refused.message, expected, row),
      `${row.cite}\nexpected ${JSON.stringify(expected)}\ngot: ${refused.message}`,
    ).toBe(true);

    const accepted = await submit(row, row.valid, uniqueName(`rule-${i}-ok`));
    expect(accepted.status, `${row.cite}: the valid twin was refused: ${accepted.message}`).toBe(
      row.status === true ? 200 : 201,
    );
  });
});

describe('the message translation itself', () => {
  it('is total: every row maps to a concrete server wording that names its path', () => {
    for (const { row } of rows) {
      const expected = expectedFromServer(row);
      expect(expected.all.join(' ')).toMatch(new RegExp(escapeRegExp(row.path)));
    }
    expect(rows).toHaveLength(89);
  });
});
