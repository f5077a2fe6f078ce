// A line of (almost) 64 MiB on PostgreSQL (§15.5): it appends (alone in its statement, never
// grouped into a bigger one), loads, reads, tail-loads and is watched like any other; the line
// stored is the JSONL line exactly. A bigger one is refused at append, nothing written.
import { sealLine } from '../src/session/line-codec.js'
import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import type { SessionEvent } from '../src/session/schema.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('huge')
let store: PostgresSessionPersistence | undefined
afterAll(async () => {
  await store?.end()
  if (url) await dropSchemas(url, [schema])
})

const MIB = 1024 * 1024

describe.skipIf(!url)('a 64 MiB line over PostgreSQL', () => {
  test('appends, loads, reads, tail-loads and is watched; stored as its JSONL line; a longer one is refused', async () => {
    store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 4 })
    const other = createPostgresPersistence({ connectionString: url!, schema, poolSize: 2 })
    try {
      await store.create(meta('big'))
      const first = turn(0, 1)
      await store.append('big', first)
      const text = 'x'.repeat(64 * MIB - 300)
      const huge: SessionEvent = {
        seq: 4,
        type: 'tool/result',
        time: 5,
        data: { turn: 2, step: 0, callId: 'c', content: [{ type: 'text', text }] },
      }
      const compact: SessionEvent = { seq: 5, type: 'history/compact', time: 6, data: { summary: 'before the big one', firstKeptSeq: 4 } }
      // Another session's small batches in flight at once: the huge one must not wait for, nor drag, them.
      await other.create(meta('small'))
      await Promise.all([store.append('big', [huge, compact]), other.append('small', turn(0, 1))])
      const tooBig = { ...huge, seq: 6, data: { content: [{ type: 'text', text: `${text}${'y'.repeat(400)}` }] } }
      expect(await store.append('big', [tooBig]).catch((e: { code: string }) => e.code)).toBe('E_INVALID_EVENT')
      await store.close('big')

      const stored = await sql<{ bytes: number }>(url!, `SELECT octet_length(line) AS bytes FROM "${schema}".events WHERE session_id = 'big' AND seq = 4`)
      expect(stored[0]!.bytes).toBe(Buffer.byteLength(sealLine(JSON.stringify(huge), 1)))
      expect((await sql(url!, `SELECT 1 FROM "${schema}".events WHERE session_id = 'big'`)).length).toBe(6)

      const loaded = await store.load('big', { closeOpenTurn: false })
      expect(loaded.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5])
      expect((loaded.events[4]!.data as { content: { text: string }[] }).content[0]!.text.length).toBe(text.length)
      await store.close('big')
      const tail = await store.load('big', { from: 'last-compaction', closeOpenTurn: false })
      expect(tail.firstSeq).toBe(4)
      expect(tail.events[0]).toEqual(huge)
      await store.close('big')
      const range = await store.read('big', { last: 2 })
      expect(range.events).toEqual([huge, compact])
      const stop = new AbortController()
      const watched: number[] = []
      for await (const e of other.watch('big', { fromSeq: 3, signal: stop.signal })) {
        watched.push(e.seq)
        if (e.seq === 5) stop.abort()
      }
      expect(watched).toEqual([3, 4, 5])
      await other.close('small')
    } finally {
      await other.end()
    }
  }, 180_000)
})
