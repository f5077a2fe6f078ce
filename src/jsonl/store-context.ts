import { resolve } from 'node:path'
import { SessionPersistenceError } from '../errors.js'
import type { FileSystem } from './fs/file-system.js'
import { createNodeFileSystem } from './fs/node-file-system.js'
import { defaultLogger } from '../session/logger.js'
import { safeParseConfig } from '../session/read-config.js'
import { describeZodError, type JsonlConfig, JsonlConfigSchema, type Logger, type SessionEvent, type SyncMode } from '../session/schema.js'
import type { FormatVersion } from '../session/line-codec.js'

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
  /** The format version of new logs (§16). */
  readonly formatVersion: FormatVersion
  /** Applied to each event before it is serialized (§16), if configured. */
  readonly redact: ((event: SessionEvent) => SessionEvent) | undefined
  /** Directories this instance created or found, so a first append does not mkdir them again. */
  readonly knownDirs: Set<string>
  /**
   * Whether the last file this instance created with `FILE_MODE` came out exactly that (as its
   * `fstat` showed; only lock and marker records are looked at), so that the log need not be
   * chmod'ed. Creating with 0600 can only lose bits to the umask, never gain any. Unset until
   * a record has been written, false when the seam gives no mode.
   */
  createdFilesExact?: boolean
}

export const DIR_MODE = 0o700
export const FILE_MODE = 0o600

/** Validates a configuration (`E_CONFIG` naming the field) and builds the context. No I/O. */
export function createStoreContext(config: JsonlConfig): { ctx: StoreContext; staleLockMs: number } {
  const parsed = safeParseConfig(JsonlConfigSchema, config, 'the configuration')
  if (!parsed.success) {
    throw new SessionPersistenceError('E_CONFIG', `invalid configuration: ${describeZodError(parsed.error)}`, {
      cause: parsed.error,
    })
  }
  const { root, sync, staleLockMs, logger, fs: given, dsyncWrites, formatVersion, redact } = parsed.data
  const fs = given ?? createNodeFileSystem()
  const ctx: StoreContext = {
    fs,
    root: resolve(root),
    sync,
    // Only 'data' may trade write + fdatasync for an O_DSYNC write; a seam without it keeps the pair.
    dsyncWrites: dsyncWrites && sync === 'data' && fs.supportsDsync === true,
    logger: logger ?? defaultLogger(),
    formatVersion,
    redact,
    knownDirs: new Set(),
  }
  return { ctx, staleLockMs }
}
