import { runPersistenceContract } from '../src/contract/index.js'
import { createJsonlPersistence } from '../src/index.js'

runPersistenceContract({ name: 'jsonl', factory: (dir) => createJsonlPersistence({ root: dir }) })
