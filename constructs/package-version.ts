import { readFileSync } from 'node:fs';

/**
 * The version of this package: the one version source of a release. The image tag of every daemon
 * (DEFAULT_IMAGE) and the `app.kubernetes.io/version` label of the CRDs carry it, so a grid repository that bumps
 * the package gets matching CRDs and daemons from one synth. Read from package.json, which sits at the same
 * relative path in the repository and in the installed package.
 */
export const PACKAGE_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
