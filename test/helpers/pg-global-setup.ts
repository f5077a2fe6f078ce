// Starts one throwaway PostgreSQL 15 for the PostgreSQL test files (or uses SPJ_PG_URL) and
// hands its URL to them via `inject('pgUrl')`. Where no server can be had, tests see an empty
// URL and the reason; under CI=true (or SPJ_PG_REQUIRED=1, which .ci/run sets) that is a
// failure, never a silent skip.
import type { TestProject } from 'vitest/node'
import { startThrowawayPostgres, throwawayPostgresUnavailable, type ThrowawayPostgres } from '../../src/torture/postgres-server.js'
import { pgRequired } from './pg-required.js'

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string
    pgUnavailable: string
  }
}

let server: ThrowawayPostgres | undefined

export async function setup(project: TestProject): Promise<void> {
  const given = process.env.SPJ_PG_URL
  if (given) {
    project.provide('pgUrl', given)
    project.provide('pgUnavailable', '')
    return
  }
  const why = throwawayPostgresUnavailable()
  if (why) {
    if (pgRequired()) throw new Error(`PostgreSQL tests cannot run here and must (CI): ${why}`)
    project.provide('pgUrl', '')
    project.provide('pgUnavailable', why)
    return
  }
  server = await startThrowawayPostgres()
  project.provide('pgUrl', server.url)
  project.provide('pgUnavailable', '')
}

export async function teardown(): Promise<void> {
  await server?.stop()
  server = undefined
}
