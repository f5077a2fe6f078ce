// A connection cut while a batch commits: the append is retried on a new connection and the
// outcome is resolved — stored exactly once either way, acknowledged, and the log goes on. An
// append is the named statement spj_append_<hash of its text>: its name is in every message that runs it.
import { sealLine } from '../src/session/line-codec.js'
import { headerLine } from '../src/session/meta.js'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { workerEvents } from '../src/torture/postgres-worker.js'
import { codeOf } from './helpers/codes.js'
import { dropSchemas, freshSchema, pgUrl, sql, storedLines } from './helpers/pg-env.js'
import { PgCutProxy } from './helpers/pg-proxy.js'

const url = pgUrl()

describe.skipIf(!url)('an ambiguous COMMIT is resolved on retry (PostgreSQL)', () => {
  const schema = freshSchema('cut')
  let proxy: PgCutProxy & { port: number }
  let store: PostgresSessionPersistence

  beforeAll(async () => {
    const target = new URL(url!)
    proxy = await PgCutProxy.start(Number(target.port))
    target.port = String(proxy.port)
    store = createPostgresPersistence({ connectionString: target.toString(), schema, poolSize: 1 })
  })
  afterAll(async () => {
    await store?.end()
    await proxy?.close()
    if (url) await dropSchemas(url, [schema])
  })

  const seqsOf = async (id: string) => (await storedLines(url!, schema, id)).map((l) => l.seq)
  /** A store behind the proxy that gives up at the first failed connection (the outcome left unknown). */
  const giveUpAtOnce = () =>
    createPostgresPersistence({
      connectionString: `postgres://postgres@127.0.0.1:${proxy.port}${new URL(url!).pathname}`,
      schema,
      poolSize: 1,
      retryTimeoutMs: 0,
    })

  test('the answer to a committed batch is lost: the retry finds it stored and acknowledges it, once', async () => {
    await store.create({ id: 'answer-lost', createdAt: 1, delegationDepth: 0 })
    await store.append('answer-lost', workerEvents(0, 4, 'w'))
    proxy.cutAfterRequest('spj_append')
    await store.append('answer-lost', workerEvents(4, 10, 'w'))
    expect(proxy.cuts).toBe(1)
    expect(await seqsOf('answer-lost')).toEqual(Array.from({ length: 14 }, (_, i) => i))
    await store.append('answer-lost', workerEvents(14, 1, 'w'))
    expect(await seqsOf('answer-lost')).toHaveLength(15)
    const lines = (await storedLines(url!, schema, 'answer-lost')).map((l) => l.line)
    expect(lines).toEqual(workerEvents(0, 15, 'w').map((e) => sealLine(JSON.stringify(e), 1)))
  })

  test('the batch never reached the server: the retry writes it, once', async () => {
    await store.create({ id: 'request-lost', createdAt: 1, delegationDepth: 0 })
    await store.append('request-lost', workerEvents(0, 4, 'w'))
    proxy.cutBeforeRequest('spj_append')
    await store.append('request-lost', workerEvents(4, 10, 'w'))
    expect(proxy.cuts).toBe(2)
    expect(await seqsOf('request-lost')).toEqual(Array.from({ length: 14 }, (_, i) => i))
  })

  test('the first batch of a new session (its row and lines) answered lost: stored once, appends continue', async () => {
    await store.create({ id: 'first-lost', createdAt: 1, delegationDepth: 0 })
    proxy.cutAfterRequest('WITH created')
    await store.append('first-lost', workerEvents(0, 3, 'w'))
    expect(proxy.cuts).toBe(3)
    await store.append('first-lost', workerEvents(3, 2, 'w'))
    expect(await seqsOf('first-lost')).toEqual([0, 1, 2, 3, 4])
  })

  test('the lock connection cut while the first batch takes the session: retried, stored once', async () => {
    await store.create({ id: 'lock-cut', createdAt: 1, delegationDepth: 0 })
    proxy.cutAfterRequest('pg_try_advisory_lock')
    await store.append('lock-cut', workerEvents(0, 3, 'w'))
    expect(proxy.cuts).toBe(4)
    expect(await seqsOf('lock-cut')).toEqual([0, 1, 2])
  })

  test('a retry that gives up leaves the outcome unknown; retrying the same batch resolves it, never twice', async () => {
    const short = giveUpAtOnce()
    try {
      await short.create({ id: 'gave-up', createdAt: 1, delegationDepth: 0 })
      await short.append('gave-up', workerEvents(0, 2, 'w'))
      proxy.cutAfterRequest('spj_append')
      const batch = workerEvents(2, 5, 'w')
      const first = await codeOf(short.append('gave-up', batch))
      expect(first).toBe('E_IO')
      await short.append('gave-up', batch)
      await short.append('gave-up', batch) // the same batch again is still acknowledged, not stored again
      await short.append('gave-up', workerEvents(7, 1, 'w'))
      expect(await seqsOf('gave-up')).toEqual([0, 1, 2, 3, 4, 5, 6, 7])

      // Given up on a batch that never arrived: the next append finds it absent and continues
      // from the stored length (its own batch at seq 8 is written; the lost one is not).
      proxy.cutBeforeRequest('spj_append')
      const lost = await codeOf(short.append('gave-up', workerEvents(8, 2, 'lost')))
      expect(lost).toBe('E_IO')
      await short.append('gave-up', workerEvents(8, 1, 'w'))
      const lines = await storedLines(url!, schema, 'gave-up')
      expect(lines.map((l) => l.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
      expect(lines[8]?.line).toBe(sealLine(JSON.stringify(workerEvents(8, 1, 'w')[0]), 1))
    } finally {
      await short.end()
    }
  })
  test('the unanswered batch commits only after the retry found it absent: the retry acknowledges it, stored once', async () => {
    const short = giveUpAtOnce()
    const late = new pg.Client({ connectionString: url })
    await late.connect()
    try {
      await short.create({ id: 'late-commit', createdAt: 1, delegationDepth: 0 })
      await short.append('late-commit', workerEvents(0, 2, 'w'))
      proxy.cutBeforeRequest('spj_append')
      const batch = workerEvents(2, 3, 'w')
      const first = await codeOf(short.append('late-commit', batch))
      expect(first).toBe('E_IO')
      // The original attempt, still in flight on the server (e.g. waiting for a synchronous
      // standby): it holds the session's row and commits late.
      const [row] = await sql<{ epoch: string }>(url!, `SELECT writer_epoch::text AS epoch FROM "${schema}".sessions WHERE session_id = $1`, ['late-commit'])
      await late.query('BEGIN')
      await late.query(
        `WITH claim AS (UPDATE "${schema}".sessions SET length = length + 3 WHERE session_id = $1 AND writer_epoch = $2::bigint AND length = 2 RETURNING session_id)
         INSERT INTO "${schema}".events (session_id, seq, line) SELECT claim.session_id, 2 + u.ord - 1, u.line FROM claim, unnest($3::text[]) WITH ORDINALITY AS u(line, ord)`,
        ['late-commit', row!.epoch, batch.map((e) => sealLine(JSON.stringify(e), 1))],
      )
      const retry = codeOf(short.append('late-commit', batch))
      // The retry found it absent and now waits for the row: then the original commits.
      for (;;) {
        const waiting = await sql(url!, `SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%"${schema}".sessions%'`)
        if (waiting.length > 0) break
        await new Promise((r) => setImmediate(r))
      }
      await late.query('COMMIT')
      expect(await retry).toBe('resolved')
      await short.append('late-commit', workerEvents(5, 1, 'w'))
      expect(await seqsOf('late-commit')).toEqual([0, 1, 2, 3, 4, 5])
    } finally {
      await late.end()
      await short.end()
    }
  })

  test('importRaw: the answer to its COMMIT is lost: the session is found ours and stored once, no E_EXISTS; a COMMIT never sent: E_IO, nothing stored, a second importRaw stores it', async () => {
    const raw = (id: string, n: number) => ({ id, headerLine: headerLine({ id, createdAt: 1, delegationDepth: 0 }, 1).slice(0, -1), eventLines: workerEvents(0, n, id).map((e) => sealLine(JSON.stringify(e), 1)) })
    const rows = async (id: string) => (await sql<{ n: number }>(url!, `SELECT count(*)::int AS n FROM "${schema}".sessions WHERE session_id = $1`, [id]))[0]!.n
    const cutsBefore = proxy.cuts
    const lost = raw('import-answer-lost', 12)
    proxy.cutAfterRequest('COMMIT') // the import's transaction commits; its answer never comes back
    expect(await codeOf(store.importRaw(lost))).toBe('resolved')
    expect(proxy.cuts).toBe(cutsBefore + 1)
    expect(await rows(lost.id)).toBe(1)
    expect((await storedLines(url!, schema, lost.id)).map((l) => l.line)).toEqual(lost.eventLines)
    expect((await store.readRaw(lost.id)).eventLines).toEqual(lost.eventLines)
    expect((await store.load(lost.id)).events).toEqual(workerEvents(0, 12, lost.id))
    await store.close(lost.id)

    const short = giveUpAtOnce()
    try {
      const unsent = raw('import-commit-unsent', 5)
      proxy.cutBeforeRequest('COMMIT') // the COMMIT never reaches the server: the transaction rolls back
      expect(await codeOf(short.importRaw(unsent))).toBe('E_IO')
      expect(proxy.cuts).toBe(cutsBefore + 2)
      expect(await rows(unsent.id)).toBe(0)
      await short.importRaw(unsent)
      expect(await rows(unsent.id)).toBe(1)
      expect((await storedLines(url!, schema, unsent.id)).map((l) => l.line)).toEqual(unsent.eventLines)
    } finally {
      await short.end()
    }
  })

  test('the answer to a statement shared by two sessions is lost: each finds its batch stored, once', async () => {
    const shared = createPostgresPersistence({
      connectionString: `postgres://postgres@127.0.0.1:${proxy.port}${new URL(url!).pathname}`,
      schema,
      poolSize: 3,
      appendStatements: 1,
    })
    try {
      for (const id of ['g1', 'g2', 'g3']) {
        await shared.create({ id, createdAt: 1, delegationDepth: 0 })
        await shared.append(id, workerEvents(0, 2, id))
      }
      const cutsBefore = proxy.cuts
      // All three reach the one slot in the same turn of the event loop: g1 goes alone, g2 and
      // g3 share the next statement, whose answer the proxy drops.
      proxy.cutAfterRequest('"g2","g3"')
      await Promise.all(['g1', 'g2', 'g3'].map((id) => shared.append(id, workerEvents(2, 3, id))))
      expect(proxy.cuts).toBe(cutsBefore + 1)
      for (const id of ['g1', 'g2', 'g3']) {
        await shared.append(id, workerEvents(5, 1, id))
        const lines = (await storedLines(url!, schema, id)).map((l) => l.line)
        expect(lines).toEqual(workerEvents(0, 6, id).map((e) => sealLine(JSON.stringify(e), 1)))
      }
    } finally {
      await shared.end()
    }
  })
  test('two stores create one session and send the same first batch: the one that stored nothing gets E_EXISTS, not an acknowledgement', async () => {
    const a = createPostgresPersistence({ connectionString: url!, schema, poolSize: 1, host: 'first-host' })
    const b = createPostgresPersistence({ connectionString: url!, schema, poolSize: 1, host: 'second-host' })
    try {
      const m = { id: 'same-first', createdAt: 1, delegationDepth: 0 }
      await a.create(m)
      await b.create(m) // nothing is stored yet: both register it
      await a.append('same-first', workerEvents(0, 1, 'w'))
      await a.close('same-first')
      // The same lines, the same header: what is stored is not b's (its row carries a's epoch).
      expect(await codeOf(b.append('same-first', workerEvents(0, 1, 'w')))).toBe('E_EXISTS')
      expect(await seqsOf('same-first')).toEqual([0])
      const rows = await sql<{ holder_host: string }>(url!, `SELECT holder_host FROM "${schema}".sessions WHERE session_id = $1`, ['same-first'])
      expect(rows).toEqual([{ holder_host: 'first-host' }])
    } finally {
      await Promise.all([a.end(), b.end()])
    }
  })
})
