// One version per release: package.json's. The package built from this repository, the default image tag of
// every daemon and the version label of the CRDs all carry it, so a grid repository that bumps the package gets
// CRDs and daemons that belong together.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { DEFAULT_IMAGE } from '../../constructs/image-reference.ts';
import { LABEL_VERSION } from '../../constructs/labels.ts';
import { PACKAGE_VERSION } from '../../constructs/package-version.ts';
import { packageManifest } from '../../daemons/cli/build-package.ts';
import { REPO_ROOT } from '../fixtures-path.ts';

const repo = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as Record<string, unknown>;

describe('the version', () => {
  it('is read from package.json', () => {
    expect(PACKAGE_VERSION).toBe(repo['version']);
    expect(PACKAGE_VERSION).toMatch(/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/u);
  });

  it('is the version of the built package, which runs on Node 24 and declares every runtime dependency', () => {
    const manifest = packageManifest(repo);
    expect(manifest['version']).toBe(PACKAGE_VERSION);
    expect(manifest['name']).toBe(repo['name']);
    expect(manifest['private']).toBeUndefined();
    expect(manifest['dependencies']).toEqual(repo['dependencies']);
    expect(manifest['bin']).toEqual({ agn: './daemons/cli/agn.js' });
  });

  it('is the tag of the default image, which every workload in the committed dist/ runs', () => {
    expect(DEFAULT_IMAGE.tag).toBe(PACKAGE_VERSION);
    const images = new Set(
      ['east', 'west']
        .flatMap(
          (site) => readFileSync(join(REPO_ROOT, 'dist', `${site}.k8s.yaml`), 'utf8').match(/^\s+image: \S+$/gmu) ?? [],
        )
        .map((line) => line.trim()),
    );
    expect([...images]).toEqual([`image: ${DEFAULT_IMAGE.repository}:${PACKAGE_VERSION}`]);
  });

  it('labels every CRD in the committed dist/', () => {
    const crds = YAML.parseAllDocuments(readFileSync(join(REPO_ROOT, 'dist', 'crds.k8s.yaml'), 'utf8')).map(
      (doc) => doc.toJS() as { kind: string; metadata: { labels: Record<string, string> } },
    );
    expect(crds.map((crd) => `${crd.kind} ${crd.metadata.labels[LABEL_VERSION]}`)).toEqual(
      Array(6).fill(`CustomResourceDefinition ${PACKAGE_VERSION}`),
    );
  });
});
