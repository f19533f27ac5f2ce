import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Tests run real sockets, processes and TLS; the timeouts leave room for a loaded 2-core CI machine.
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('..', import.meta.url)),
    include: ['test/**/*.test.ts'],
    exclude: [
      'test/cluster/**',
      'test/praxis/**',
      'test/package/**',
      'test/dashboard/**',
      'test/node/**',
      'node_modules/**',
    ],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default', './test/summary-reporter.ts'],
  },
});
