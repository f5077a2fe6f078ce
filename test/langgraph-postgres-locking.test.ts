// Over PostgreSQL, where several machines share one store: a thread held by one saver is
// E_LOCKED for another (reads still answered), and moves to it once released.
import { afterAll, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { checkpoint, codeOf, meta, thread } from './helpers/langgraph-checkpoints.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

const url = pgUrl()
const schema = freshSchema('lg_lock')
afterAll(async () => {
  if (url) await dropSchemas(url, [schema])
})

describe.skipIf(!url)('a thread over PostgreSQL', () => {
  it('is written by one saver at a time and moves on release()', async () => {
    const pa = createPostgresPersistence({ connectionString: url!, schema, poolSize: 2 })
    const pb = createPostgresPersistence({ connectionString: url!, schema, poolSize: 2 })
    const a = new SessionCheckpointSaver({ persistence: pa })
    const b = new SessionCheckpointSaver({ persistence: pb })
    try {
      const c1 = checkpoint({ n: 1 })
      const cfg = await a.put(thread('pg'), c1, meta(0), { n: 1 })
      expect(await codeOf(b.put(cfg, checkpoint({ n: 2 }, { n: 2 }), meta(1), { n: 2 }))).toBe('E_LOCKED')
      expect((await b.getTuple(thread('pg')))?.checkpoint).toEqual(c1)
      await a.release('pg')
      const c2 = checkpoint({ n: 2 }, { n: 2 })
      await b.put(cfg, c2, meta(1), { n: 2 })
      expect((await a.getTuple(thread('pg')))?.checkpoint).toEqual(c2)
      expect(await codeOf(a.deleteThread('pg'))).toBe('E_LOCKED')
      await b.deleteThread('pg')
      expect(await a.getTuple(thread('pg'))).toBeUndefined()
    } finally {
      await a.close()
      await b.close()
      await pa.end()
      await pb.end()
    }
  })
})
