import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The real-Praxis suite: praxis-proxy 0.5.3's config loader and validator (built by test/praxis/build-praxis-check.sh)
// on our configs. Run with `npm run test:praxis`; the default `npm test` excludes this directory and needs no Rust.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/praxis/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
