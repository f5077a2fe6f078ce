import { runPersistenceContract } from '../src/contract/index.js'
import { createMemoryPersistence } from '../src/testing/memory-persistence.js'

runPersistenceContract({ name: 'in-memory reference', factory: (dir) => createMemoryPersistence({ name: dir }) })
