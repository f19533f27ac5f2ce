import { describe, expect, it } from 'vitest';
import { GridCrds } from '../../constructs/grid-crds.ts';
import { KINDS, crdManifest } from '../../schemas/crds/definitions.ts';
import { chart, synth } from './helpers.ts';
import { validateKubernetesObject } from './k8s-schema.ts';

describe('GridCrds', () => {
  it('emits the six CRDs exactly as crdManifest() defines them', () => {
    const c = chart();
    new GridCrds(c, 'crds');
    const objects = synth(c);
    expect(objects.map((o) => o.metadata.name)).toEqual(KINDS.map((kind) => crdManifest(kind).metadata.name));
    for (const [i, kind] of KINDS.entries()) expect(objects[i]).toEqual(crdManifest(kind));
  });

  it('emits valid apiextensions.k8s.io/v1 objects (snapshot of the names and versions)', () => {
    const c = chart();
    new GridCrds(c, 'crds');
    const objects = synth(c);
    for (const object of objects) expect(validateKubernetesObject(object)).toEqual([]);
    expect(
      objects.map((o) => [
        o.metadata.name,
        (o as unknown as { spec: { scope: string; versions: { name: string }[] } }).spec.versions[0]?.name,
      ]),
    ).toMatchSnapshot();
  });
});
