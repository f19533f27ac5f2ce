import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// The browser suite (npm run test:dashboard): needs Debian's Chromium, which test/dashboard/install-browser.sh
// installs, so it is kept out of `npm test`.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/dashboard/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 90_000,
    pool: 'forks',
  },
});
