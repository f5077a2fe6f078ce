// `list` reads the headers only, in one query, never an event row; bad rows are reported and skipped.
import pg from 'pg'
import { afterAll, describe, expect, test, vi } from 'vitest'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { workerEvents } from '../src/torture/postgres-worker.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('list')
afterAll(async () => {
  vi.restoreAllMocks()
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)('list over PostgreSQL', () => {
  test('one query for 300 sessions, none of it on the events table; sizes are the JSONL sizes; a bad header is skipped', async () => {
    const store = createPostgresPersistence({ connectionString: url!, schema, poolSize: 4 })
    try {
      for (let i = 0; i < 300; i++) {
        const id = `s${String(i).padStart(3, '0')}`
        await store.create({ id, createdAt: 1_000 + (i % 7), delegationDepth: 0 })
        await store.append(id, workerEvents(0, 1 + (i % 3), id))
        await store.close(id)
      }
      await sql(url!, `UPDATE "${schema}".sessions SET header_line = '{"type":"session"' WHERE session_id = 's150'`)
      const spy = vi.spyOn(pg.Client.prototype, 'query')
      const problems: string[] = []
      const listed = await store.list({ onProblem: (p) => problems.push(`${p.path} ${p.code}`) })
      const texts = spy.mock.calls.map((c) => String(typeof c[0] === 'string' ? c[0] : (c[0] as { text?: string }).text))
      spy.mockRestore()
      expect(texts).toHaveLength(1)
      expect(texts[0]).not.toMatch(/events/)
      expect(problems).toEqual([`postgres:${schema}/s150 E_CORRUPT`])
      expect(listed).toHaveLength(299)
      // Newest first, then by id.
      expect(listed[0]?.meta).toEqual({ id: 's006', createdAt: 1_006, delegationDepth: 0 })
      expect(listed.map((l) => l.meta.createdAt)).toEqual([...listed.map((l) => l.meta.createdAt)].sort((a, b) => b - a))
      const raw = await store.readRaw('s001')
      const jsonlSize = [raw.headerLine, ...raw.eventLines].reduce((n, l) => n + Buffer.byteLength(l) + 1, 0)
      expect(listed.find((l) => l.meta.id === 's001')?.sizeBytes).toBe(jsonlSize)
    } finally {
      await store.end()
    }
  })
  test('with a limit, sessions of the same createdAt are cut in UTF-16 order of their ids (as on JSONL), not in byte order', async () => {
    const s = freshSchema('listties')
    const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
    try {
      // U+FF01 sorts before U+1F600 in UTF-8 (EF.. < F0..), after it in UTF-16 (FF01 > D83D).
      const ids = ['a\uff01', 'a\u{1F600}', 'b\uff01', 'b\u{1F600}']
      for (const [i, id] of ids.entries()) {
        await store.create({ id, createdAt: i < 2 ? 2_000 : 1_000, delegationDepth: 0 })
        await store.append(id, workerEvents(0, 1, 'w'))
        await store.close(id)
      }
      const all = (await store.list()).map((l) => l.meta.id)
      expect(all).toEqual(['a\u{1F600}', 'a\uff01', 'b\u{1F600}', 'b\uff01'])
      for (let limit = 1; limit <= 4; limit++) expect((await store.list({ limit })).map((l) => l.meta.id)).toEqual(all.slice(0, limit))
      // A bad row among them is reported and not counted.
      await sql(url!, `UPDATE "${s}".sessions SET header_line = 'not json' WHERE session_id = $1`, ['a\u{1F600}'])
      const problems: string[] = []
      const listed = await store.list({ limit: 2, onProblem: (p) => problems.push(p.code) })
      expect(listed.map((l) => l.meta.id)).toEqual(['a\uff01', 'b\u{1F600}'])
      expect(problems).toEqual(['E_CORRUPT'])
    } finally {
      await store.end()
      await dropSchemas(url!, [s])
    }
  })
})
