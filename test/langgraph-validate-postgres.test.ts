// LangGraph's checkpointer validation suite, unchanged, over the PostgreSQL backend, a fresh
// schema for each checkpointer. Under CI a missing server fails the run (pg-global-setup).
import { afterAll, it } from 'vitest'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'
import { validateOver } from './helpers/langgraph-validate.js'

const url = pgUrl()
const schemas: string[] = []

if (url) {
  afterAll(async () => {
    await dropSchemas(url, schemas)
  })
  validateOver('the PostgreSQL backend', {
    open: async () => {
      const schema = freshSchema('lg_validate')
      schemas.push(schema)
      return createPostgresPersistence({ connectionString: url, schema, poolSize: 2 })
    },
    dispose: async (persistence) => {
      const pg = persistence as PostgresSessionPersistence
      await pg.closeAll()
      await pg.end()
    },
  })
} else {
  it.skip('LangGraph validation over PostgreSQL: no server here (outside CI only)', () => {})
}
