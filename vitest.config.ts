import { defineConfig } from 'vitest/config'

// The PostgreSQL tests live in their own project so that their server (started by the global
// setup) is only started when one of them runs. The framework adapters that also run over
// PostgreSQL have projects of their own: LangGraph's validation suite needs `globals: true`.
const POSTGRES_TESTS = ['test/postgres-*.test.ts', 'test/cli-postgres.test.ts']
const LANGGRAPH_TESTS = ['test/langgraph-*.test.ts']
const CLAUDE_TESTS = ['test/claude-agent-sdk-*.test.ts']
const PG_SETUP = ['test/helpers/pg-global-setup.ts']
// Frameworks that tests install themselves live under test/.work/ (their own tests are not ours).
const NOT_OURS = ['**/node_modules/**', 'test/.work/**']

export default defineConfig({
  test: {
    exclude: NOT_OURS,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/**/*.test.ts'], exclude: [...NOT_OURS, ...POSTGRES_TESTS, ...LANGGRAPH_TESTS, ...CLAUDE_TESTS] },
      },
      {
        extends: true,
        test: { name: 'postgres', include: POSTGRES_TESTS, globalSetup: PG_SETUP, testTimeout: 120_000, hookTimeout: 120_000 },
      },
      {
        extends: true,
        test: { name: 'langgraph', include: LANGGRAPH_TESTS, globals: true, globalSetup: PG_SETUP, testTimeout: 120_000, hookTimeout: 120_000 },
      },
      {
        extends: true,
        test: { name: 'claude-agent-sdk', include: CLAUDE_TESTS, globalSetup: PG_SETUP, testTimeout: 300_000, hookTimeout: 600_000 },
      },
    ],
  },
})
