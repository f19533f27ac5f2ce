import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The cluster suite: a real kube-apiserver and etcd (built by test/cluster/build-control-plane.sh, started once by
// global-setup.ts). Run with `npm run test:cluster`; the default `npm test` excludes this directory and needs no Go.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/cluster/**/*.test.ts'],
    globalSetup: ['test/cluster/global-setup.ts'],
    // One API server is shared; files run one after another so a 2-core machine is not oversubscribed.
    fileParallelism: false,
    testTimeout: 60_000,
    hookTimeout: 180_000,
    pool: 'forks',
    // The plain 'N passed, N failed' line CI reads, shared with the main suite.
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
