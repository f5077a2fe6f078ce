// One writer per session across processes and hosts: a race for 100 sessions, a killed holder
// taken over at once, and a paused holder fenced by the database when it wakes.
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { workerEvents } from '../src/torture/postgres-worker.js'
import { codeOf } from './helpers/codes.js'
import { meta } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql, storedLines } from './helpers/pg-env.js'
import { PgWorker } from './helpers/pg-worker.js'

const url = pgUrl()
const schemas: string[] = []
const stores: PostgresSessionPersistence[] = []
const workers: PgWorker[] = []

function store(schema: string, host: string): PostgresSessionPersistence {
  const s = createPostgresPersistence({ connectionString: url!, schema, host, poolSize: 4 })
  stores.push(s)
  return s
}

async function worker(schema: string, host: string): Promise<PgWorker> {
  const w = new PgWorker()
  workers.push(w)
  expect((await w.send({ op: 'open', url: url!, schema, host })).ok).toBe(true)
  return w
}

/** Waits, by asking the server, until no backend of `host` is left (its advisory locks went with them). */
async function backendsGone(host: string): Promise<void> {
  for (;;) {
    const rows = await sql(url!, `SELECT 1 FROM pg_stat_activity WHERE application_name = $1`, [`session-persistence-jsonl ${host}`])
    if (rows.length === 0) return
  }
}

afterAll(async () => {
  for (const w of workers) {
    w.kill('SIGKILL')
    await w.exited
  }
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, schemas)
})

describe.skipIf(!url)('one writer per session across hosts (PostgreSQL)', () => {
  let schema: string
  beforeAll(() => {
    schema = freshSchema('writer')
    schemas.push(schema)
  })

  test('two processes of two hosts racing to resume 100 sessions: each session written by exactly one, logs contiguous', async () => {
    const seed = store(schema, 'seeder')
    const ids = Array.from({ length: 100 }, (_, i) => `race-${i}`)
    for (const id of ids) {
      await seed.create({ id, createdAt: 1, delegationDepth: 0 })
      await seed.append(id, workerEvents(0, 2, 'seed'))
      await seed.close(id)
    }
    const [a, b] = await Promise.all([worker(schema, 'host-a'), worker(schema, 'host-b')])
    // Each resumes every session it can, in opposite orders, and holds what it won until the end.
    const race = async (w: PgWorker, tag: string, order: string[]) => {
      const won: string[] = []
      for (const id of order) {
        const loaded = await w.send({ op: 'load', session: id })
        if (!loaded.ok) {
          expect(loaded.code).toBe('E_LOCKED')
          continue
        }
        const appended = await w.send({ op: 'append', session: id, count: 3, tag })
        expect(appended).toMatchObject({ ok: true, seq: 2 })
        won.push(id)
      }
      return won
    }
    const [wonA, wonB] = await Promise.all([race(a, 'host-a', ids), race(b, 'host-b', [...ids].reverse())])
    expect([...wonA, ...wonB].sort()).toEqual([...ids].sort())
    expect(wonA.filter((id) => wonB.includes(id))).toEqual([])
    for (const id of ids) {
      const lines = await storedLines(url!, schema, id)
      expect(lines.map((l) => l.seq)).toEqual([0, 1, 2, 3, 4])
      const tags = new Set(lines.slice(2).map((l) => (JSON.parse(l.line) as { data: { tag: string } }).data.tag))
      expect([...tags]).toEqual([wonA.includes(id) ? 'host-a' : 'host-b'])
    }
    await Promise.all([a.end(), b.end()])
  })

  test('a SIGKILLed holder is taken over at once, without waiting for any lease', async () => {
    const a = await worker(schema, 'killed-host')
    expect((await a.send({ op: 'create', session: 'killed' })).ok).toBe(true)
    expect((await a.send({ op: 'append', session: 'killed', count: 4, tag: 'a' })).ok).toBe(true)
    const b = store(schema, 'survivor')
    expect(await b.load('killed').catch((e: { code: string }) => e.code)).toBe('E_LOCKED')
    a.kill('SIGKILL')
    await a.exited
    await backendsGone('killed-host')
    const loaded = await b.load('killed', { closeOpenTurn: false })
    expect(loaded.events).toHaveLength(4)
    await b.append('killed', workerEvents(4, 2, 'b'))
    expect((await storedLines(url!, schema, 'killed')).map((l) => l.seq)).toEqual([0, 1, 2, 3, 4, 5])
    await b.close('killed')
  })

  test('a paused holder whose connections were terminated is fenced: after SIGCONT its append rejects E_LOCKED and writes nothing', async () => {
    const a = await worker(schema, 'paused-host')
    expect((await a.send({ op: 'create', session: 'paused' })).ok).toBe(true)
    expect((await a.send({ op: 'append', session: 'paused', count: 4, tag: 'a' })).ok).toBe(true)
    const b = store(schema, 'taker')
    const held = await b.load('paused').then(
      () => undefined,
      (e: { code: string; message: string }) => e,
    )
    expect(held).toMatchObject({ code: 'E_LOCKED' })
    expect(held?.message).toContain('paused-host')
    a.kill('SIGSTOP')
    try {
      const killed = await sql(
        url!,
        `SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE application_name = $1`,
        ['session-persistence-jsonl paused-host'],
      )
      expect(killed.length).toBeGreaterThan(0)
      await backendsGone('paused-host')
      await b.load('paused', { closeOpenTurn: false })
      await b.append('paused', workerEvents(4, 3, 'b'))
    } finally {
      a.kill('SIGCONT')
    }
    const before = await storedLines(url!, schema, 'paused')
    const late = await a.send({ op: 'append', session: 'paused', count: 2, tag: 'a-late' })
    expect(late).toMatchObject({ ok: false, code: 'E_LOCKED' })
    expect(late.message).toContain('taker')
    expect(await storedLines(url!, schema, 'paused')).toEqual(before)
    expect(before.map((l) => l.seq)).toEqual([0, 1, 2, 3, 4, 5, 6])
    // The new holder keeps writing.
    await b.append('paused', workerEvents(7, 1, 'b'))
    await b.close('paused')
    await a.end()
  })
  test("after its lock connection dropped, a store's own load or delete of a session it just closed is never E_LOCKED against itself", async () => {
    const a = store(schema, 'selflock-host')
    for (let round = 0; round < 12; round++) {
      const id = `selflock-${round}`
      await a.create(meta(id))
      await a.append(id, workerEvents(0, 1, 'a'))
      // The lock connection's backend is terminated; the store sees it end.
      const lockBackends = await sql<{ pid: number }>(
        url!,
        `SELECT DISTINCT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
          WHERE l.locktype = 'advisory' AND a.application_name = $1`,
        ['session-persistence-jsonl selflock-host'],
      )
      expect(lockBackends.length).toBe(1)
      await sql(url!, 'SELECT pg_terminate_backend($1)', [lockBackends[0]!.pid])
      while ((await sql(url!, 'SELECT 1 FROM pg_stat_activity WHERE pid = $1', [lockBackends[0]!.pid])).length > 0);
      await new Promise((r) => setTimeout(r, 50))
      // This append starts taking the lost lock again in the background; the close and the
      // load or delete right after it must not be refused because of that re-take.
      await a.append(id, workerEvents(1, 1, 'a'))
      await a.close(id)
      if (round % 2 === 0) {
        const loaded = await a.load(id)
        expect(loaded.events.map((e) => e.seq)).toEqual([0, 1])
        await a.close(id)
      } else {
        expect(await codeOf(a.delete(id))).toBe('resolved')
        expect(await storedLines(url!, schema, id)).toEqual([])
      }
    }
  })
})
