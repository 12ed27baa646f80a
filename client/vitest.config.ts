import { defineConfig } from 'vitest/config';

// `npm test -w client` runs these; the root `npm test` runs them too (its include lists client/test).
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
