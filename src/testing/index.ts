export {
  createFaultInjectingFileSystem,
  type FaultInjectingFileSystem,
  type FaultRule,
  type FsCall,
  type FsOp,
  MUTATING_OPS,
} from './fault-injection.js'
export { createMemoryPersistence, MemoryStore, type MemoryPersistenceOptions } from '../memory/memory-persistence.js'
export {
  createReferenceHost,
  type ReferenceHost,
  type ReferenceHostOptions,
  type ReferenceSession,
  type StepScript,
  type ToolCallScript,
  type TurnScript,
} from './reference-host.js'
export {
  type CrashFileSystem,
  type CrashImage,
  type CrashSeam,
  type CrashStates,
  type UnexploredStates,
  contentVariants,
  createCrashFileSystem,
} from './crash-fs.js'
