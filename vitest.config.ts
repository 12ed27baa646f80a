import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // client/test: the @orgdata/client workspace package's suites (they start their own servers).
    include: ['test/**/*.test.ts', 'client/test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
