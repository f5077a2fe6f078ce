// Configuration, migrations (versioned, serialized between hosts, a newer schema refused) and
// the durability settings the backend enforces on its connections.
import pg from 'pg'
import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence, SCHEMA_VERSION } from '../src/postgres/index.js'
import { startThrowawayPostgres } from '../src/torture/postgres-server.js'
import { workerEvents } from '../src/torture/postgres-worker.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schemas: string[] = []
const stores: PostgresSessionPersistence[] = []
const schema = () => {
  const s = freshSchema('schema')
  schemas.push(s)
  return s
}
const open = (s: string, extra: Record<string, unknown> = {}) => {
  const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2, ...extra })
  stores.push(store)
  return store
}
const codeOf = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code ?? String(e))
const codeOfSync = (fn: () => unknown) => {
  try {
    fn()
    return 'returned'
  } catch (e) {
    return (e as { code?: string }).code
  }
}

afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, schemas)
})

describe('PostgreSQL configuration', () => {
  test('bad configurations are E_CONFIG; creating a store does no I/O', async () => {
    expect(codeOfSync(() => createPostgresPersistence({}))).toBe('E_CONFIG')
    expect(codeOfSync(() => createPostgresPersistence({ connectionString: 'postgres://x', pool: new pg.Pool() }))).toBe('E_CONFIG')
    expect(codeOfSync(() => createPostgresPersistence({ connectionString: 'postgres://x', schema: 'Bad-Name' }))).toBe('E_CONFIG')
    expect(codeOfSync(() => createPostgresPersistence({ connectionString: 'postgres://x', schema: 'x"; DROP' }))).toBe('E_CONFIG')
    expect(codeOfSync(() => createPostgresPersistence({ connectionString: 'postgres://x', poolSize: 0 }))).toBe('E_CONFIG')
    expect(codeOfSync(() => createPostgresPersistence({ connectionString: 'postgres://x', unknown: 1 } as never))).toBe('E_CONFIG')
    // Nothing listens on port 1: only the first operation finds out.
    const unreachable = createPostgresPersistence({ connectionString: 'postgres://nobody@127.0.0.1:1/none', retryTimeoutMs: 0 })
    expect(unreachable.locate({ id: 'x', createdAt: 0, delegationDepth: 0 })).toEqual({
      kind: 'postgres',
      schema: 'session_persistence',
      id: 'x',
    })
    expect(await codeOf(unreachable.list())).toBe('E_IO')
    await unreachable.end()
    expect(await codeOf(unreachable.list())).toBe('E_DISPOSED')
  })
})

describe.skipIf(!url)('PostgreSQL schema migrations', () => {
  test('the first operation creates the schema at the current version; hosts racing to migrate apply each migration once', async () => {
    const s = schema()
    const racers = Array.from({ length: 4 }, () => open(s))
    expect(await Promise.all(racers.map((r) => r.list()))).toEqual([[], [], [], []])
    const versions = await sql<{ version: number }>(url!, `SELECT version FROM "${s}".schema_migrations ORDER BY version`)
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1))
  })

  test('a schema written by a newer release is refused with E_FORMAT_UNSUPPORTED and left untouched', async () => {
    const s = schema()
    const a = open(s)
    await a.create({ id: 'kept', createdAt: 1, delegationDepth: 0 })
    await a.append('kept', workerEvents(0, 2, 'x'))
    await a.close('kept')
    await sql(url!, `INSERT INTO "${s}".schema_migrations (version) VALUES ($1)`, [SCHEMA_VERSION + 1])
    const b = open(s)
    expect(await codeOf(b.list())).toBe('E_FORMAT_UNSUPPORTED')
    expect(await codeOf(b.load('kept'))).toBe('E_FORMAT_UNSUPPORTED')
    const rows = await sql(url!, `SELECT seq FROM "${s}".events WHERE session_id = 'kept'`)
    expect(rows).toHaveLength(2)
  })

  test('a header line of another format version is E_FORMAT_UNSUPPORTED; a damaged line is E_CORRUPT naming it', async () => {
    const s = schema()
    const a = open(s, { formatVersion: 0 }) // version 0: a header without a checksum, edited by hand
    await a.create({ id: 'v9', createdAt: 1, delegationDepth: 0 })
    await a.append('v9', workerEvents(0, 1, 'x'))
    await a.create({ id: 'damaged', createdAt: 1, delegationDepth: 0 })
    await a.append('damaged', workerEvents(0, 3, 'x'))
    await a.closeAll()
    await sql(url!, `UPDATE "${s}".sessions SET header_line = replace(header_line, '"version":0', '"version":9') WHERE session_id = 'v9'`)
    await sql(url!, `UPDATE "${s}".events SET line = '{"seq":1,' WHERE session_id = 'damaged' AND seq = 1`)
    expect(await codeOf(a.inspect('v9'))).toBe('E_FORMAT_UNSUPPORTED')
    expect(await codeOf(a.load('v9'))).toBe('E_FORMAT_UNSUPPORTED')
    const corrupt = await a.load('damaged').catch((e: { code: string; line: number }) => e)
    expect(corrupt).toMatchObject({ code: 'E_CORRUPT', line: 3 })
    const problems: string[] = []
    expect((await a.list({ onProblem: (p) => problems.push(p.code) })).map((l) => l.meta.id)).toEqual(['damaged'])
    expect(problems).toEqual(['E_FORMAT_UNSUPPORTED'])
  })
})

describe.skipIf(!url)('PostgreSQL durability settings', () => {
  test('synchronous_commit is on for every connection it uses, even from a caller pool set to off', async () => {
    const pool = new pg.Pool({ connectionString: url!, max: 1, options: '-c synchronous_commit=off' })
    try {
      const store = createPostgresPersistence({ pool, schema: schema() })
      await store.create({ id: 'sc', createdAt: 1, delegationDepth: 0 })
      await store.append('sc', workerEvents(0, 1, 'x'))
      await store.end()
      const { rows } = await pool.query<{ synchronous_commit: string }>('SHOW synchronous_commit')
      expect(rows[0]?.synchronous_commit).toBe('on')
      // A store given a pool never ends it: the pool still answers.
      expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }])
    } finally {
      await pool.end()
    }
  })

  test('synchronous_commit is on for its own pool even when the connection string carries options setting it off', async () => {
    const s = schema()
    const target = new URL(url!)
    target.searchParams.set('options', '-c synchronous_commit=off')
    const store = open(s, { connectionString: target.toString() })
    await store.list() // creates the schema
    // Each stored line records the synchronous_commit of the transaction that inserted it.
    await sql(url!, `CREATE TABLE "${s}".seen (setting text)`)
    await sql(
      url!,
      `CREATE FUNCTION "${s}".record_setting() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN INSERT INTO "${s}".seen VALUES (current_setting('synchronous_commit')); RETURN NEW; END $$`,
    )
    await sql(url!, `CREATE TRIGGER record AFTER INSERT ON "${s}".events FOR EACH ROW EXECUTE FUNCTION "${s}".record_setting()`)
    await store.create({ id: 'sc-url', createdAt: 1, delegationDepth: 0 })
    await store.append('sc-url', workerEvents(0, 2, 'x'))
    await store.append('sc-url', workerEvents(2, 1, 'x'))
    const seen = await sql<{ setting: string }>(url!, `SELECT setting FROM "${s}".seen`)
    expect(seen.map((r) => r.setting)).toEqual(['on', 'on', 'on'])
  })

  test('a server running with fsync off is reported once through the logger', async () => {
    const server = await startThrowawayPostgres({ settings: { fsync: 'off' } })
    try {
      const warnings: string[] = []
      const store = createPostgresPersistence({ connectionString: server.url, logger: { warn: (m) => warnings.push(m) } })
      await store.list()
      await store.create({ id: 'f', createdAt: 1, delegationDepth: 0 })
      await store.append('f', workerEvents(0, 1, 'x'))
      await store.end()
      expect(warnings).toHaveLength(1)
      expect(warnings[0]).toContain('fsync')
    } finally {
      await server.stop()
    }
  })
})
