// read on PostgreSQL (§15.2): any range of a stored session equals that slice of a full load,
// with no lock, on a session another store is appending to; damage inside the range is E_CORRUPT.
import fc from 'fast-check'
import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('range')
const stores: PostgresSessionPersistence[] = []
const open = () => {
  const store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 4 })
  stores.push(store)
  return store
}
afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, [schema])
})

const turns = (seq: number, first: number, n: number) => Array.from({ length: n }, (_, i) => turn(seq + 4 * i, first + i)).flat()

describe.skipIf(!url)('read over PostgreSQL', () => {
  test('random ranges and last-n reads equal the slice of a full load; length is the stored count', async () => {
    const a = open()
    await a.create(meta('pages'))
    const events = turns(0, 1, 75)
    await a.append('pages', events)
    await a.close('pages')
    const full = await a.inspect('pages')
    const range = fc.oneof(
      fc.record({ fromSeq: fc.nat(320), toSeq: fc.nat(320) }).map((r) => (r.toSeq < r.fromSeq ? { fromSeq: r.toSeq, toSeq: r.fromSeq } : r)),
      fc.record({ fromSeq: fc.nat(320) }),
      fc.record({ toSeq: fc.nat(320) }),
      fc.record({ last: fc.nat(320) }),
    )
    await fc.assert(
      fc.asyncProperty(range, async (r) => {
        const got = await a.read('pages', r)
        const seqs = r as { fromSeq?: number; toSeq?: number }
        const from = 'last' in r ? Math.max(0, 300 - r.last) : Math.min(seqs.fromSeq ?? 0, Math.min(seqs.toSeq ?? 300, 300))
        const to = 'last' in r ? 300 : Math.min(seqs.toSeq ?? 300, 300)
        expect(got.length).toBe(300)
        expect(got.firstSeq).toBe(from)
        expect(got.events).toEqual(full.events.slice(from, to))
        expect(got.meta).toEqual(full.meta)
      }),
      { numRuns: 80 },
    )
  })

  test('reads a session another store is writing, as of one commit, without its lock', async () => {
    const writer = open()
    const reader = open()
    await writer.create(meta('busy'))
    const events = turns(0, 1, 40)
    await writer.append('busy', events.slice(0, 4))
    const reads: Promise<void>[] = []
    for (let t = 1; t < 40; t++) {
      reads.push(
        reader.read('busy', { last: 6 }).then((r) => {
          // Whatever it caught, it is a consistent prefix: the last events of `length`.
          expect(r.events).toEqual(events.slice(Math.max(0, r.length - 6), r.length))
          expect(r.length % 4).toBe(0)
        }),
      )
      await writer.append('busy', events.slice(t * 4, t * 4 + 4))
    }
    await Promise.all(reads)
    expect(await reader.read('busy')).toMatchObject({ length: 160, firstSeq: 0 })
    expect(await codeOf(reader.load('busy'))).toBe('E_LOCKED') // the writer still holds it: the reads never needed it
    await writer.close('busy')
  })

  test('damage inside the range is E_CORRUPT naming the line; damage outside it is not read', async () => {
    const a = open()
    await a.create(meta('damaged'))
    await a.append('damaged', turns(0, 1, 5))
    await a.close('damaged')
    await sql(url!, `UPDATE "${schema}".events SET line = '{"seq":7,"type":' WHERE session_id = 'damaged' AND seq = 7`)
    const err = await a.read('damaged', { fromSeq: 5, toSeq: 10 }).catch((e: unknown) => e as { code: string; line: number })
    expect(err).toMatchObject({ code: 'E_CORRUPT', line: 9 })
    expect((await a.read('damaged', { fromSeq: 8 })).events.map((e) => e.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i + 8))
    expect((await a.read('damaged', { last: 3 })).events).toHaveLength(3)
  })

  test('bad ranges are E_CONFIG, unknown ids E_NOT_FOUND, bad ids E_INVALID_ID', async () => {
    const a = open()
    await a.create(meta('r'))
    await a.append('r', turns(0, 1, 1))
    await a.close('r')
    for (const bad of [{ fromSeq: -1 }, { toSeq: 1.5 }, { fromSeq: 3, toSeq: 2 }, { last: -2 }, { last: 2, fromSeq: 0 }, { fromSeq: '1' }, { from: 1 }, null, 7]) {
      expect(await codeOf(a.read('r', bad as never))).toBe('E_CONFIG')
    }
    expect(await codeOf(a.read('nope'))).toBe('E_NOT_FOUND')
    expect(await codeOf(a.read(''))).toBe('E_INVALID_ID')
    expect(await codeOf(a.read('nul\u0000'))).toBe('E_INVALID_ID')
  })
})
