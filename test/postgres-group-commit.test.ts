// Group commit on a real server: sessions that share one append statement are still fenced one
// by one; migration 2 (events without their foreign key, a trigger deleting a session's lines)
// keeps every stored line, steps aside while others hold its tables; a deleted session leaves no
// line behind, whoever deletes its row.
import { sealLine } from '../src/session/line-codec.js'
import pg from 'pg'
import { afterAll, describe, expect, test } from 'vitest'
import { headerLine } from '../src/session/meta.js'
import { createPostgresPersistence, type PostgresSessionPersistence, SCHEMA_VERSION } from '../src/postgres/index.js'
import { Db } from '../src/postgres/db.js'
import { migrate } from '../src/postgres/migrate.js'
import { MIGRATIONS } from '../src/postgres/migrations.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schemas: string[] = []
const cleanups: (() => Promise<void>)[] = []
const schema = () => {
  const s = freshSchema('group')
  schemas.push(s)
  return s
}

afterAll(async () => {
  for (const c of cleanups) await c()
  if (url) await dropSchemas(url, schemas)
})

/**
 * A caller's pool whose first append statement waits at a gate until the test opens it, and
 * which records the sessions each append statement carried.
 */
function gatedPool(connectionString: string) {
  const pool = new pg.Pool({ connectionString, max: 8 })
  pool.on('error', () => {})
  const appends: string[][] = []
  let open!: () => void
  const gate = new Promise<void>((resolve) => (open = resolve))
  let entered!: () => void
  const firstEntered = new Promise<void>((resolve) => (entered = resolve))
  const patched = new WeakSet<pg.PoolClient>()
  const connect = pool.connect.bind(pool) as () => Promise<pg.PoolClient>
  ;(pool as unknown as { connect: () => Promise<pg.PoolClient> }).connect = async () => {
    const client = await connect()
    if (!patched.has(client)) {
      patched.add(client)
      const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>
      ;(client as unknown as { query: (...args: unknown[]) => Promise<unknown> }).query = async (...args: unknown[]) => {
        const config = args[0] as { name?: string; values?: unknown[] }
        if (typeof config === 'object' && config.name?.startsWith('spj_append')) {
          appends.push(config.values![0] as string[])
          if (appends.length === 1) {
            entered()
            await gate
          }
        }
        return query(...args)
      }
    }
    return client
  }
  return { pool, appends, open, firstEntered }
}

/** A store on a gated pool (`appendStatements` slots), ended after the tests. */
function gatedStore(s: string, appendStatements: number) {
  const gated = gatedPool(url!)
  const store = createPostgresPersistence({ pool: gated.pool, schema: s, appendStatements })
  cleanups.push(async () => {
    await store.end()
    await gated.pool.end()
  })
  return { gated, store }
}

describe.skipIf(!url)('PostgreSQL group commit', () => {
  test('batches of several sessions share one statement; a session another writer took over is refused alone', async () => {
    const s = schema()
    const { gated, store } = gatedStore(s, 1)
    for (const id of ['a', 'b', 'c']) {
      await store.create(meta(id))
      await store.append(id, turn(0, 1)) // the first batch creates the row: not a group statement
    }
    // Another host took 'b' over: its row carries another writer token now.
    await sql(url!, `UPDATE "${s}".sessions SET writer_epoch = writer_epoch + 1000 WHERE session_id = 'b'`)

    const first = store.append('a', turn(4, 2))
    await gated.firstEntered // 'a' holds the only slot: what comes now waits and is grouped
    const later = Promise.allSettled([store.append('b', turn(4, 2)), store.append('c', turn(4, 2))])
    await new Promise((r) => setImmediate(r))
    gated.open()
    await first
    const [b, c] = await later

    expect(gated.appends).toEqual([['a'], ['b', 'c']])
    expect(b).toMatchObject({ status: 'rejected', reason: { code: 'E_LOCKED' } })
    expect(c.status).toBe('fulfilled')
    const counts = await sql<{ session_id: string; n: string }>(
      url!,
      `SELECT session_id, count(*) AS n FROM "${s}".events GROUP BY session_id ORDER BY session_id`,
    )
    expect(counts).toEqual([
      { session_id: 'a', n: '8' },
      { session_id: 'b', n: '4' }, // nothing of the refused batch
      { session_id: 'c', n: '8' },
    ])
    const lengths = await sql<{ session_id: string; length: string }>(
      url!,
      `SELECT session_id, length::text FROM "${s}".sessions ORDER BY session_id`,
    )
    expect(lengths.map((r) => r.length)).toEqual(['8', '4', '8'])
  })

  test('one shared statement: ids that need quoting land under their own id; a stale length and a deleted row are refused alone', async () => {
    const s = schema()
    const { gated, store } = gatedStore(s, 1)
    const odd = ['a,"b"\\c{}', 'NULL', 'ü\u2028,x', ' sp ace ']
    const ids = ['gate', ...odd, 'stale', 'gone']
    const sent = new Map<string, unknown[]>() // the events appended to each session, in order
    const append = (id: string, events: ReturnType<typeof turn>) => {
      sent.set(id, [...(sent.get(id) ?? []), ...events])
      return store.append(id, events)
    }
    for (const id of ids) {
      await store.create(meta(id))
      await append(id, turn(0, 1))
    }
    // 'stale': another writer appended (the row's length moved on); 'gone': its row was deleted.
    await sql(url!, `UPDATE "${s}".sessions SET length = length + 1 WHERE session_id = 'stale'`)
    await sql(url!, `DELETE FROM "${s}".sessions WHERE session_id = 'gone'`)

    const first = append('gate', turn(4, 2))
    await gated.firstEntered
    const later = Promise.allSettled([...odd, 'stale', 'gone'].map((id) => append(id, turn(4, 2))))
    await new Promise((r) => setImmediate(r))
    gated.open()
    await first
    const settled = await later

    expect(gated.appends).toEqual([['gate'], [...odd, 'stale', 'gone']]) // one shared statement
    expect(settled.slice(0, odd.length).map((r) => r.status)).toEqual(odd.map(() => 'fulfilled'))
    expect(settled[odd.length]).toMatchObject({ status: 'rejected', reason: { code: 'E_SEQ_NOT_CONTIGUOUS' } })
    expect(settled[odd.length + 1]).toMatchObject({ status: 'rejected', reason: { code: 'E_NOT_FOUND' } })
    for (const id of odd) {
      const stored = await sql<{ seq: string; line: string }>(
        url!,
        `SELECT seq::text, line FROM "${s}".events WHERE session_id = $1 ORDER BY seq`,
        [id],
      )
      const want = sent.get(id)!.map((e) => sealLine(JSON.stringify(e), 1)) // version 1, the default
      expect(want).toHaveLength(8)
      expect(stored.map((r) => r.line)).toEqual(want)
      expect(stored.map((r) => Number(r.seq))).toEqual(want.map((_, i) => i))
    }
    const stale = await sql<{ n: string }>(url!, `SELECT count(*)::text AS n FROM "${s}".events WHERE session_id = 'stale'`)
    expect(stale).toEqual([{ n: '4' }]) // nothing of the refused batch
    const gone = await sql<{ n: string }>(url!, `SELECT count(*)::text AS n FROM "${s}".events WHERE session_id = 'gone'`)
    expect(gone).toEqual([{ n: '0' }])
  })

  test('sixteen sessions appending at once: every log whole and in order, in fewer statements than batches', async () => {
    const s = schema()
    const { gated, store } = gatedStore(s, 2)
    gated.open()
    const ids = Array.from({ length: 16 }, (_, i) => `s${i}`)
    for (const id of ids) {
      await store.create(meta(id))
      await store.append(id, turn(0, 0))
    }
    await Promise.all(ids.map(async (id) => {
      for (let t = 1; t <= 20; t++) await store.append(id, turn(t * 4, t))
    }))
    await store.closeAll()
    expect(gated.appends.flat().length).toBe(16 * 20)
    expect(gated.appends.length).toBeLessThan(16 * 20)
    for (const id of ids) {
      const loaded = await store.load(id)
      expect(loaded.events.map((e) => e.seq)).toEqual(Array.from({ length: 84 }, (_, i) => i))
      await store.close(id)
    }
  })

  /** A schema at version 1 (with the foreign key) holding one session 'old' of four lines. */
  async function versionOneSchema(): Promise<{ s: string; lines: string[] }> {
    const s = schema()
    const header = headerLine(meta('old')).slice(0, -1)
    const lines = turn(0, 1).map((e) => JSON.stringify(e))
    await sql(url!, `CREATE SCHEMA "${s}"; CREATE TABLE "${s}".schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
    await sql(url!, MIGRATIONS[0]!(s))
    await sql(url!, `INSERT INTO "${s}".schema_migrations (version) VALUES (1)`)
    await sql(url!, `INSERT INTO "${s}".sessions (session_id, header_line, created_at, length, size_bytes, writer_epoch) VALUES ('old', $1, 1, 4, 0, 0)`, [header])
    await sql(url!, `INSERT INTO "${s}".events SELECT 'old', o - 1, l FROM unnest($1::text[]) WITH ORDINALITY u(l, o)`, [lines])
    return { s, lines }
  }

  test('migration 2 drops only the foreign key: a version-1 schema keeps every line and loads the same', async () => {
    const { s, lines } = await versionOneSchema()
    const foreignKeys = () => sql(url!, `SELECT conname FROM pg_constraint WHERE conrelid = '"${s}".events'::regclass AND contype = 'f'`)
    expect(await foreignKeys()).toHaveLength(1)

    const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
    cleanups.push(() => store.end())
    const loaded = await store.load('old')
    expect(loaded.events.map((e) => JSON.stringify(e))).toEqual(lines)
    expect(await foreignKeys()).toHaveLength(0)
    const versions = await sql<{ version: number }>(url!, `SELECT version FROM "${s}".schema_migrations ORDER BY version`)
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1))
    await store.append('old', turn(4, 2))
    expect((await sql(url!, `SELECT 1 FROM "${s}".events WHERE session_id = 'old'`)).length).toBe(8)
  })

  test('a row deleted by plain SQL (an older release, a retention job) takes its lines: the id can be created again', async () => {
    const { s } = await versionOneSchema()
    const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
    cleanups.push(() => store.end())
    expect((await store.list()).map((l) => l.meta.id)).toEqual(['old']) // migrates
    await sql(url!, `DELETE FROM "${s}".sessions WHERE session_id = 'old'`)
    expect(await sql(url!, `SELECT 1 FROM "${s}".events WHERE session_id = 'old'`)).toHaveLength(0)
    await store.create(meta('old'))
    await store.append('old', turn(0, 9))
    await store.close('old')
    expect((await store.load('old')).events.map((e) => e.data)).toEqual(turn(0, 9).map((e) => e.data))
  })

  test("a role that may delete sessions but not touch events still takes a session's lines (as the cascade did)", async () => {
    const { s } = await versionOneSchema()
    const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
    cleanups.push(() => store.end())
    await store.list() // migrates
    const role = `retention_${s}`
    await sql(url!, `CREATE ROLE ${role}; GRANT USAGE ON SCHEMA "${s}" TO ${role}; GRANT SELECT, DELETE ON "${s}".sessions TO ${role}`)
    cleanups.push(async () => {
      await sql(url!, `DROP OWNED BY ${role}; DROP ROLE ${role}`)
    })
    const client = new pg.Client({ connectionString: url! })
    await client.connect()
    try {
      await client.query(`SET ROLE ${role}`)
      expect((await client.query(`DELETE FROM "${s}".sessions WHERE session_id = 'old'`)).rowCount).toBe(1)
      expect(await client.query(`SELECT 1 FROM "${s}".events`).then(() => 'read', (e: { code?: string }) => e.code)).toBe('42501')
    } finally {
      await client.end()
    }
    expect(await sql(url!, `SELECT 1 FROM "${s}".events WHERE session_id = 'old'`)).toHaveLength(0)
  })

  test('a migration that cannot get its table locks steps aside and tries again; past its deadline it gives up', async () => {
    const { s } = await versionOneSchema()
    // Another host in a long read of events: its lock blocks the migration's ALTER TABLE.
    const reader = new pg.Client({ connectionString: url! })
    await reader.connect()
    cleanups.push(() => reader.end())
    await reader.query(`BEGIN; SELECT count(*) FROM "${s}".events`)
    const warnings: string[] = []
    let warned!: () => void
    const firstWarning = new Promise<void>((resolve) => (warned = resolve))
    const pool = new pg.Pool({ connectionString: url!, max: 2 })
    cleanups.push(() => pool.end())
    const db = new Db(pool, {
      owned: false,
      logger: {
        warn: (message: string) => {
          warnings.push(message)
          warned()
        },
      },
    })

    expect(await migrate(db, s, { lockTimeoutMs: 50, deadline: Date.now() }).then(() => 'migrated', (e: { code?: string }) => e.code)).toBe('55P03')
    const migrating = migrate(db, s, { lockTimeoutMs: 50, deadline: Date.now() + 60_000 })
    await firstWarning
    // Other hosts still get through: each attempt makes them wait at most its lock timeout.
    expect(await sql(url!, `SELECT count(*)::int AS n FROM "${s}".events`)).toEqual([{ n: 4 }])
    await reader.query('COMMIT')
    await migrating
    expect(warnings[0]).toContain('stepped aside')
    const versions = await sql<{ version: number }>(url!, `SELECT version FROM "${s}".schema_migrations ORDER BY version`)
    expect(versions.map((v) => v.version)).toEqual(Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1))
  })

  test('rows deleted by SQL while their sessions append in shared statements: no line outlives its row', async () => {
    const s = schema()
    const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 4 })
    cleanups.push(() => store.end())
    const ids = Array.from({ length: 8 }, (_, i) => `r${i}`)
    for (const id of ids) {
      await store.create(meta(id))
      await store.append(id, turn(0, 0))
    }
    const deleter = new pg.Client({ connectionString: url! })
    await deleter.connect()
    cleanups.push(() => deleter.end())
    // Each session appends until its row is gone; its row is deleted after its third batch.
    const ends = await Promise.all(ids.map(async (id) => {
      for (let t = 1; ; t++) {
        if (t === 3) void deleter.query(`DELETE FROM "${s}".sessions WHERE session_id = $1`, [id])
        try {
          await store.append(id, turn(t * 4, t))
        } catch (err) {
          return (err as { code?: string }).code
        }
        if (t > 500) return 'never refused'
      }
    }))
    expect(ends).toEqual(ids.map(() => 'E_NOT_FOUND'))
    const orphans = await sql<{ n: number }>(
      url!,
      `SELECT count(*)::int AS n FROM "${s}".events e WHERE NOT EXISTS (SELECT 1 FROM "${s}".sessions r WHERE r.session_id = e.session_id)`,
    )
    expect(orphans).toEqual([{ n: 0 }])
    expect(await sql(url!, `SELECT 1 FROM "${s}".sessions`)).toHaveLength(0)
  })

  test('delete removes the lines with the row; the id starts from nothing when created again', async () => {
    const s = schema()
    const store: PostgresSessionPersistence = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
    cleanups.push(() => store.end())
    await store.create(meta('gone'))
    await store.append('gone', turn(0, 1))
    await store.append('gone', turn(4, 2))
    await store.close('gone')
    await store.delete('gone')
    expect(await sql(url!, `SELECT 1 FROM "${s}".events WHERE session_id = 'gone'`)).toHaveLength(0)
    await store.create(meta('gone'))
    await store.append('gone', turn(0, 7))
    await store.close('gone')
    const loaded = await store.load('gone')
    expect(loaded.events.map((e) => e.data)).toEqual(turn(0, 7).map((e) => e.data))
  })
})
