import { defineConfig } from 'vitest/config'

// The PostgreSQL tests live in their own project so that their server (started by the global
// setup) is only started when one of them runs.
const POSTGRES_TESTS = ['test/postgres-*.test.ts', 'test/cli-postgres.test.ts']

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: POSTGRES_TESTS } },
      {
        extends: true,
        test: {
          name: 'postgres',
          include: POSTGRES_TESTS,
          globalSetup: ['test/helpers/pg-global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
})
