import type { IConstruct } from 'constructs';
import { PACKAGE_VERSION } from './package-version.ts';
import { addIssueCheck, constructPath, type SynthIssue } from './synth-error.ts';

/**
 * The image every AGN workload runs (one image carries every daemon). `npm run image` builds
 * `DEFAULT_IMAGE_REPOSITORY:<package.json version>`, which is also the declaration's default, so a synth of an
 * unchanged checkout names the image that checkout builds.
 */
export const DEFAULT_IMAGE_REPOSITORY = 'ghcr.io/agn-ts/agn';

export interface ImageReference {
  /** Registry and repository, e.g. `registry.example.com/platform/agn`. */
  readonly repository: string;
  /** @default - the package.json version of this checkout */
  readonly tag?: string;
  /** `sha256:<64 hex>`; when given, the workloads pull by digest and the tag is only informative. @default - none */
  readonly digest?: string;
}

export const DEFAULT_IMAGE: ImageReference = { repository: DEFAULT_IMAGE_REPOSITORY, tag: PACKAGE_VERSION };

// Docker's reference grammar, restricted to what a registry accepts: lowercase path components, optional host:port.
const REPOSITORY =
  /^(?:[a-z0-9.-]+(?::[0-9]+)?\/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$/u;
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/u;
const DIGEST = /^sha256:[a-f0-9]{64}$/u;

/** What is wrong with an image reference, as synth issues at `path` (empty when it is usable). */
export function imageReferenceIssues(image: ImageReference, path: string): SynthIssue[] {
  const issues: SynthIssue[] = [];
  const at = (field: string, problem: string, fix: string): void => void issues.push({ path, field, problem, fix });
  if (!REPOSITORY.test(image.repository)) {
    at(
      'image.repository',
      `"${image.repository}" is not a registry/repository name (lowercase, no tag or digest)`,
      'write it as registry.example.com/team/agn and put the tag in image.tag',
    );
  }
  if (image.tag === undefined && image.digest === undefined) {
    at(
      'image',
      `"${image.repository}" has neither a tag nor a digest, so every rollout would pull whatever the registry holds then`,
      'set image.tag (the version you pushed) or image.digest (sha256:...)',
    );
  }
  if (image.tag !== undefined && !TAG.test(image.tag)) {
    at(
      'image.tag',
      `"${image.tag}" is not a valid tag`,
      'use letters, digits, "_", "." and "-" (at most 128, not starting with "." or "-")',
    );
  }
  if (image.digest !== undefined && !DIGEST.test(image.digest)) {
    at(
      'image.digest',
      `"${image.digest}" is not a sha256 digest`,
      'copy it from `podman push --digestfile` or the registry: sha256: and 64 lowercase hex digits',
    );
  }
  return issues;
}

/** The string a container's `image` field takes: the digest wins over the tag when both are given. */
export function imageReferenceString(image: ImageReference): string {
  // With both, the tag stays for readers; the runtime pulls by digest.
  const tag = image.tag === undefined ? '' : `:${image.tag}`;
  return image.digest === undefined ? `${image.repository}${tag}` : `${image.repository}${tag}@${image.digest}`;
}

/** The references already checked under one App, so a reference handed down to nested constructs is reported once. */
const checked = new WeakMap<IConstruct, WeakSet<ImageReference>>();

/**
 * The image string of a construct's containers, registering a synth-time check of the reference (once per
 * reference object per App) so an untagged or malformed image fails synth with the construct's path.
 */
export function imageOf(scope: IConstruct, image: ImageReference | undefined): string {
  const reference = image ?? DEFAULT_IMAGE;
  const root = scope.node.root;
  const seen = checked.get(root) ?? new WeakSet<ImageReference>();
  checked.set(root, seen);
  if (!seen.has(reference)) {
    seen.add(reference);
    addIssueCheck(scope, () => imageReferenceIssues(reference, constructPath(scope)));
  }
  return imageReferenceString(reference);
}
