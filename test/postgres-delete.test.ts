// PostgreSQL delete within one instance: the id is taken while the delete runs, as in the JSONL
// backend, and a close or end waits for it.
import { afterAll, describe, expect, test } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'

const url = pgUrl()
const schemas: string[] = []
const stores: PostgresSessionPersistence[] = []
const open = () => {
  const s = freshSchema('del')
  schemas.push(s)
  const store = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
  stores.push(store)
  return { store, s }
}
const codeOf = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code ?? String(e))

afterAll(async () => {
  await Promise.all(stores.map((s) => s.end()))
  if (url) await dropSchemas(url, schemas)
})

describe.skipIf(!url)('PostgreSQL delete in one instance', () => {
  test('while the id is deleted, a load or second delete is E_SESSION_LIVE and a create E_EXISTS; afterwards it is gone', async () => {
    const { store, s } = open()
    await store.create(meta('busy'))
    await store.append('busy', turn(0, 1))
    await store.close('busy')
    const deleting = store.delete('busy')
    const during = await Promise.all([
      codeOf(store.load('busy')),
      codeOf(store.create(meta('busy'))),
      codeOf(store.delete('busy')),
    ])
    expect(during).toEqual(['E_SESSION_LIVE', 'E_EXISTS', 'E_SESSION_LIVE'])
    await deleting
    expect(await codeOf(store.load('busy'))).toBe('E_NOT_FOUND')
    expect(await sql(url!, `SELECT 1 FROM "${s}".events WHERE session_id = 'busy'`)).toHaveLength(0)
  })

  test('a refused delete leaves the id free in the instance: the session loads after E_NOT_FOUND or E_LOCKED', async () => {
    const { store, s } = open()
    expect(await codeOf(store.delete('never'))).toBe('E_NOT_FOUND')
    await store.create(meta('never'))
    await store.append('never', turn(0, 1))
    await store.close('never')
    const other = createPostgresPersistence({ connectionString: url!, schema: s, poolSize: 2 })
    stores.push(other)
    await other.load('never') // another instance holds it
    expect(await codeOf(store.delete('never'))).toBe('E_LOCKED')
    await other.close('never')
    expect((await store.load('never')).events).toHaveLength(4)
  })

  test('end() during a delete waits for it: the session is deleted, not half done', async () => {
    const { store, s } = open()
    await store.create(meta('last'))
    await store.append('last', turn(0, 1))
    await store.close('last')
    const deleting = store.delete('last')
    await store.end()
    await deleting
    expect(await codeOf(store.delete('last'))).toBe('E_DISPOSED')
    expect(await sql(url!, `SELECT 1 FROM "${s}".sessions WHERE session_id = 'last'`)).toHaveLength(0)
    expect(await sql(url!, `SELECT 1 FROM "${s}".events WHERE session_id = 'last'`)).toHaveLength(0)
  })
})
