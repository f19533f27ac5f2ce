import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The container suite: dist/'s workloads from the project image under podman (npm run test:containers). One grid
// per run, files one after another: two API servers and a dozen containers already fill a 2-core machine.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/containers/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 600_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
