// list({ orderBy: 'lastWrite', limit }) on PostgreSQL (§15.4): one query, ordered by the last
// write the append statement records, the limit applied by the server; mtimeMs is that time.
import pg from 'pg'
import { afterAll, describe, expect, test, vi } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('lastw')
let store: PostgresSessionPersistence | undefined
afterAll(async () => {
  await store?.end()
  if (url) await dropSchemas(url, [schema])
})

/** The queries `fn` sends, and what it returns. */
async function queriesOf<T>(fn: () => Promise<T>): Promise<{ result: T; texts: string[]; values: unknown[][] }> {
  const spy = vi.spyOn(pg.Client.prototype, 'query')
  try {
    const result = await fn()
    const calls = spy.mock.calls.map((c) => (typeof c[0] === 'string' ? { text: c[0], values: c[1] } : (c[0] as { text: string; values?: unknown[] })))
    return { result, texts: calls.map((c) => String(c.text)), values: calls.map((c) => (c.values ?? []) as unknown[]) }
  } finally {
    spy.mockRestore()
  }
}

describe.skipIf(!url)('list by last write over PostgreSQL', () => {
  test('newest write first, at most limit, in one query whose LIMIT the server applies; mtimeMs is the row last write', async () => {
    store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 4 })
    const ids = Array.from({ length: 40 }, (_, i) => `s${String(i).padStart(2, '0')}`)
    for (const [i, id] of ids.entries()) {
      await store.create(meta(id, { createdAt: 1_000 + i })) // created in id order: the createdAt order is the reverse
      await store.append(id, turn(0, 1))
      await store.close(id)
    }
    // Written again, in this order: s07 last of all.
    for (const id of ['s30', 's12', 's07']) {
      await store.load(id)
      await store.append(id, turn(4, 2))
      await store.close(id)
    }
    const { result: top, texts, values } = await queriesOf(() => store!.list({ orderBy: 'lastWrite', limit: 5 }))
    expect(texts).toHaveLength(1)
    expect(texts[0]).toMatch(/ORDER BY updated_at DESC/)
    expect(texts[0]).toMatch(/LIMIT \$1/)
    expect(texts[0]).not.toMatch(/events/)
    expect(values[0]?.[0]).toBe(6) // one row more than the limit: whether the last one kept ties with a row cut off
    expect(top.map((l) => l.meta.id)).toEqual(['s07', 's12', 's30', 's39', 's38'])
    const rows = await sql<{ id: string; ms: number }>(
      url!,
      `SELECT session_id AS id, (extract(epoch FROM updated_at) * 1000)::float8 AS ms FROM "${schema}".sessions WHERE session_id = ANY ($1)`,
      [top.map((l) => l.meta.id)],
    )
    for (const l of top) expect(l.mtimeMs).toBe(rows.find((r) => r.id === l.meta.id)!.ms)
    expect(top.map((l) => l.mtimeMs)).toEqual([...top.map((l) => l.mtimeMs)].sort((a, b) => b - a))
    // The whole list by last write is the same order; the limit is its prefix.
    const all = await store.list({ orderBy: 'lastWrite' })
    expect(all).toHaveLength(40)
    expect(all.slice(0, 5)).toEqual(top)
    // Without options: createdAt order, unchanged.
    expect((await store.list()).map((l) => l.meta.id)).toEqual([...ids].reverse())
    expect((await store.list({ limit: 2 })).map((l) => l.meta.id)).toEqual(['s39', 's38'])
    expect(await store.list({ orderBy: 'lastWrite', limit: 0 })).toEqual([])
  })

  test('a bad row is reported and does not count against the limit', async () => {
    store ??= createPostgresPersistence({ connectionString: url!, schema, poolSize: 4 })
    await sql(url!, `UPDATE "${schema}".sessions SET header_line = '{"type":"session"' WHERE session_id = 's12'`)
    const problems: string[] = []
    const top = await store.list({ orderBy: 'lastWrite', limit: 3, onProblem: (p) => problems.push(`${p.path} ${p.code}`) })
    expect(problems).toEqual([`postgres:${schema}/s12 E_CORRUPT`])
    expect(top.map((l) => l.meta.id)).toEqual(['s07', 's30', 's39'])
    // In createdAt order too: s12 among the first rows, the next one read after them (by created_at).
    const byCreation: string[] = []
    const first28 = await store.list({ limit: 28, onProblem: (p) => byCreation.push(p.path) })
    expect(byCreation).toEqual([`postgres:${schema}/s12`])
    expect(first28.map((l) => l.meta.id)).toEqual(Array.from({ length: 29 }, (_, i) => `s${String(39 - i).padStart(2, '0')}`).filter((id) => id !== 's12'))

    // A session written between the first query and the one for more rows moves to the top: the
    // second query starts after the last row it had (s30), so s39 comes next, not s30 again
    // (an offset would count the moved row and list s30 twice).
    const original = pg.Client.prototype.query
    let moved = false
    const spy = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(async function (this: pg.Client, ...args: unknown[]) {
      const result = await (original as (...a: unknown[]) => Promise<unknown>).apply(this, args)
      const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string } | undefined)?.text
      if (!moved && /ORDER BY updated_at DESC/.test(String(text))) {
        moved = true
        await sql(url!, `UPDATE "${schema}".sessions SET updated_at = now() WHERE session_id = 's20'`)
      }
      return result
    })
    try {
      const again = await store.list({ orderBy: 'lastWrite', limit: 3, onProblem: () => {} })
      expect(moved).toBe(true)
      expect(again.map((l) => l.meta.id)).toEqual(['s07', 's30', 's39'])
    } finally {
      spy.mockRestore()
    }
  })

  test('bad options are E_CONFIG', async () => {
    store ??= createPostgresPersistence({ connectionString: url!, schema, poolSize: 4 })
    for (const bad of [{ orderBy: 'size' }, { limit: -1 }, { limit: 2.5 }, { limit: '3' }]) {
      expect(await codeOf(store.list(bad as never))).toBe('E_CONFIG')
    }
  })
})
