// A CRD's structural schema cannot use $ref, so gridnetworks.schema.json spells one shape out more than once: the
// consumer gateway entry under spec.consumerGateways and its alias spec.gatewayRefs, and inside each the generated
// config block under praxisConfig and its alias consumerConfig. One source per contract shape: the copies must stay
// identical, so an edit to one that misses another fails here, naming which.
import { describe, expect, it } from 'vitest';
import schema from '../../schemas/crds/gridnetworks.schema.json' with { type: 'json' };

type Node = Record<string, unknown>;
const at = (path: string): Node =>
  path
    .split('/')
    .filter((p) => p !== '')
    .reduce<Node>((node, key) => node[key] as Node, schema as unknown as Node);

describe('gridnetworks.schema.json: the shapes it spells out more than once', () => {
  it('keeps spec.gatewayRefs[] the same shape as spec.consumerGateways[]', () => {
    expect(at('/properties/spec/properties/gatewayRefs/items')).toEqual(
      at('/properties/spec/properties/consumerGateways/items'),
    );
  });

  it('keeps the four copies of the generated-config block identical', () => {
    const copies = ['consumerGateways', 'gatewayRefs'].flatMap((list) =>
      ['praxisConfig', 'consumerConfig'].map(
        (block) => `/properties/spec/properties/${list}/items/properties/${block}/properties`,
      ),
    );
    const first = at(copies[0]!);
    expect(JSON.stringify(first).length).toBeGreaterThan(4000);
    for (const copy of copies.slice(1)) expect(at(copy), copy).toEqual(first);
  });
});
