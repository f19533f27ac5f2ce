import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The installed-package test (`npm run test:package`): kept out of `npm test` because it packs and installs.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/package/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
  },
});
