import { App } from 'cdk8s';
import { describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { buildGrid, validateGrid } from '../../constructs/grid.ts';
import {
  DEFAULT_IMAGE_REPOSITORY,
  imageReferenceString,
  type ImageReference,
} from '../../constructs/image-reference.ts';
import { SimBackend } from '../../constructs/sim-backend.ts';
import { chart, podSpec, synth, twoSiteGrid, type Manifest } from './helpers.ts';
import { synthFailure } from './synth-failure.ts';

const DIGEST = `sha256:${'ab'.repeat(32)}`;

/** Every container and init container image of every workload in the grid's charts. */
function workloadImages(image: ImageReference | undefined): string[] {
  const app = new App();
  const built = buildGrid(app, {
    ...twoSiteGrid({
      a: { providerGateway: { trustedPeers: [{ organization: 'x' }], exposure: { type: 'LoadBalancer' } } },
    }),
    ...(image === undefined ? {} : { image }),
  });
  validateGrid(app);
  const objects: Manifest[] = built.sites.flatMap((site) => synth(site));
  const pods = objects.filter((o) => o.kind === 'Deployment').map(podSpec);
  expect(pods.length).toBeGreaterThanOrEqual(6);
  return pods.flatMap((pod) => [...pod.containers, ...(pod.initContainers ?? [])].map((c) => c['image'] as string));
}

describe('the declaration image', () => {
  it('defaults to the project repository at the package version on every workload', () => {
    expect(new Set(workloadImages(undefined))).toEqual(new Set([`${DEFAULT_IMAGE_REPOSITORY}:${pkg.version}`]));
  });

  it('puts a declared repository and tag on every container and init container', () => {
    expect(new Set(workloadImages({ repository: 'registry.example.com:5000/platform/agn', tag: '1.2.3' }))).toEqual(
      new Set(['registry.example.com:5000/platform/agn:1.2.3']),
    );
  });

  it('pulls by digest when one is given, keeping the tag for readers', () => {
    expect(new Set(workloadImages({ repository: 'registry.example.com/agn', tag: '1.2.3', digest: DIGEST }))).toEqual(
      new Set([`registry.example.com/agn:1.2.3@${DIGEST}`]),
    );
    expect(imageReferenceString({ repository: 'r/agn', digest: DIGEST })).toBe(`r/agn@${DIGEST}`);
  });

  it('refuses an image with neither tag nor digest, saying what to set', () => {
    const message = synthFailure(() =>
      buildGrid(new App(), { ...twoSiteGrid(), image: { repository: 'registry.example.com/agn' } }),
    );
    expect(message).toBe(
      'declaration: image: "registry.example.com/agn" has neither a tag nor a digest, so every rollout would pull whatever the registry holds then. ' +
        'Fix: set image.tag (the version you pushed) or image.digest (sha256:...)',
    );
  });

  it('refuses a tag inside the repository, a malformed tag and a malformed digest, one line each', () => {
    const message = synthFailure(() =>
      buildGrid(new App(), {
        ...twoSiteGrid(),
        image: { repository: 'Registry/agn:1.0', tag: '-x', digest: 'sha256:abc' },
      }),
    );
    const lines = message.split('\n');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(
      /^declaration: image\.repository: "Registry\/agn:1\.0" is not a registry\/repository name/u,
    );
    expect(lines[1]).toMatch(/^declaration: image\.tag: "-x" is not a valid tag/u);
    expect(lines[2]).toMatch(/^declaration: image\.digest: "sha256:abc" is not a sha256 digest/u);
  });

  it('fails validation of a construct used on its own with an untagged image, once, at its path', () => {
    const c = chart();
    new SimBackend(c, 'sim', {
      namespace: 'ns',
      provider: 'p',
      models: ['m'],
      credential: { name: 's', key: 'k' },
      image: { repository: 'r/agn' },
    });
    const lines = c.node.findAll().flatMap((x) => x.node.validate());
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^test\/sim: image: "r\/agn" has neither a tag nor a digest/u);
  });
});
