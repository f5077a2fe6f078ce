export {
  createFaultInjectingFileSystem,
  type FaultInjectingFileSystem,
  type FaultRule,
  type FsCall,
  type FsOp,
  MUTATING_OPS,
} from './fault-injection.js'
export { createMemoryPersistence, MemoryStore, type MemoryPersistenceOptions } from './memory-persistence.js'
