// Server crashes (`pg_ctl stop -m immediate`, restart) while writers append: every acknowledged
// batch is stored, byte for byte, exactly once. 5 cycles here; SPJ_PG_CRASH_CYCLES=50 for the long form.
import { sealLine } from '../src/session/line-codec.js'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { isSessionPersistenceError } from '../src/errors.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { startThrowawayPostgres, throwawayPostgresUnavailable, type ThrowawayPostgres } from '../src/torture/postgres-server.js'
import { workerEvents } from '../src/torture/postgres-worker.js'
import { storedLines } from './helpers/pg-env.js'
import { pgRequired } from './helpers/pg-required.js'

// This test crashes its server, so it always starts a private one (never SPJ_PG_URL's).
const unavailable = throwawayPostgresUnavailable()
if (unavailable && pgRequired()) throw new Error(`PostgreSQL crash tests cannot run here and must (CI): ${unavailable}`)
if (unavailable) console.warn(`PostgreSQL crash tests skipped: ${unavailable}`)
const available = unavailable === undefined
const CYCLES = Number(process.env.SPJ_PG_CRASH_CYCLES ?? 5)

describe.skipIf(!available)('server crash cycles while writers append (PostgreSQL)', () => {
  let server: ThrowawayPostgres
  let store: PostgresSessionPersistence
  beforeAll(async () => {
    server = await startThrowawayPostgres()
    store = createPostgresPersistence({ connectionString: server.url, schema: 'crash', poolSize: 8, retryTimeoutMs: 60_000 })
  })
  afterAll(async () => {
    await store?.end()
    await server?.stop()
  })

  test(`${CYCLES} crash cycles: no acknowledged batch lost, none stored twice`, async () => {
    const ids = Array.from({ length: 8 }, (_, i) => `w${i}`)
    const acked = new Map<string, number>(ids.map((id) => [id, 0])) // events acknowledged per session
    const unexpected: string[] = []
    let ackCount = 0
    let waiter: { target: number; resolve: () => void } | undefined
    let stop = false
    const onAck = () => {
      ackCount++
      if (waiter && ackCount >= waiter.target) {
        waiter.resolve()
        waiter = undefined
      }
    }
    const moreAcks = (n: number) => new Promise<void>((resolve) => (waiter = { target: ackCount + n, resolve }))
    for (const id of ids) await store.create({ id, createdAt: 1, delegationDepth: 0 })
    const writers = ids.map(async (id) => {
      while (!stop) {
        const first = acked.get(id)!
        const batch = workerEvents(first, 5, id)
        try {
          await store.append(id, batch)
        } catch (err) {
          // Only an unknown outcome may happen here; the same batch is retried as is.
          if (!isSessionPersistenceError(err, 'E_IO')) unexpected.push(`${id}: ${String(err)}`)
          if (unexpected.length > 0) return
          continue
        }
        acked.set(id, first + batch.length)
        onAck()
      }
    })
    for (let cycle = 0; cycle < CYCLES; cycle++) {
      await moreAcks(16)
      await server.crash()
      await server.start()
    }
    await moreAcks(16) // the writers recovered on their own
    stop = true
    await Promise.all(writers)
    expect(unexpected).toEqual([])
    for (const id of ids) {
      const stored = await storedLines(server.url, 'crash', id)
      const n = acked.get(id)!
      expect(stored.map((l) => l.seq)).toEqual(Array.from({ length: n }, (_, i) => i))
      expect(stored.map((l) => l.line)).toEqual(workerEvents(0, n, id).map((e) => sealLine(JSON.stringify(e), 1)))
    }
  })
})
