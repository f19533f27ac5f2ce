import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The node suite: dist/ on a real single-node Kubernetes per site (npm run test:node). Files one after another: a
// node is a dozen daemons and fills a good part of a 2-core machine.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/node/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 600_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
