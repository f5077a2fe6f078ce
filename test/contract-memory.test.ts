import { runPersistenceContract } from '../src/contract/index.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'

runPersistenceContract({ name: 'in-memory reference', factory: (dir) => createMemoryPersistence({ name: dir }) })
