import type { FileSystem } from '../fs/file-system.js'
import type { Logger, SyncMode } from './schema.js'

/** What every storage primitive needs: the seam, the root and the durability mode. */
export interface StoreContext {
  readonly fs: FileSystem
  readonly root: string
  readonly sync: SyncMode
  /**
   * Log files are opened with O_DSYNC (only with sync 'data', and only where the seam supports
   * it): a write is then durable when it returns, and no separate data sync follows it.
   */
  readonly dsyncWrites: boolean
  readonly logger: Logger
  /** Directories this instance created or found, so a first append does not mkdir them again. */
  readonly knownDirs: Set<string>
}

export const DIR_MODE = 0o700
export const FILE_MODE = 0o600
