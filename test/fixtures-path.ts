import { fileURLToPath } from 'node:url';

/** The shared conformance fixtures, read in place (../shared beside the repository) and never copied or edited. */
export const SHARED_FIXTURES = fileURLToPath(new URL('../../shared/fixtures/', import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
