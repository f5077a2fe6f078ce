import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

// SPEC §4.7: a fork reads its seed as inspect reads it. A seed line that fails its checksum is
// E_CORRUPT, as on JSONL, and no child is created: copying it would make a session nobody can load.
const url = pgUrl()
const schema = freshSchema('forkseed')
const stores: PostgresSessionPersistence[] = []
afterAll(async () => {
  for (const s of stores) await s.end()
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)('fork of a parent whose seed is damaged', () => {
  test('regression: E_CORRUPT, as inspect of the parent says, and no child stored', async () => {
    const p = createPostgresPersistence({ connectionString: url!, schema })
    stores.push(p)
    await p.create(meta('par'))
    await p.append('par', [...turn(0, 1), ...turn(4, 2)])
    await p.closeAll()
    await sql(url!, `UPDATE "${schema}".events SET line = replace(line, 'question', 'questiox') WHERE session_id = 'par' AND seq = 1`)
    expect(await codeOf(p.inspect('par'))).toBe('E_CORRUPT')
    expect(await codeOf(p.fork('par', { id: 'kid', seedLength: 4 }))).toBe('E_CORRUPT')
    expect(await codeOf(p.inspect('kid'))).toBe('E_NOT_FOUND')
    expect((await p.list()).map((l) => l.meta.id)).toEqual(['par'])
    // A fork point before the damage reads only what it copies: it goes ahead.
    await sql(url!, `UPDATE "${schema}".events SET line = replace(line, 'questiox', 'question') WHERE session_id = 'par' AND seq = 1`)
    await sql(url!, `UPDATE "${schema}".events SET line = replace(line, 'question', 'questiox') WHERE session_id = 'par' AND seq = 5`)
    expect((await p.fork('par', { id: 'kid', seedLength: 4 })).id).toBe('kid')
    expect((await p.inspect('kid')).events).toHaveLength(4)
  }, 120_000)
})
