export {
  ERROR_CODES,
  type ErrorDetails,
  type ErrorCode,
  isSessionPersistenceError,
  SessionFormatUnsupportedError,
  SessionPersistenceCorruptionError,
  SessionPersistenceError,
} from './errors.js'
export {
  type JsonlConfig,
  JsonlConfigSchema,
  JsonlJsonConfigSchema,
  type JsonValue,
  type Logger,
  SESSION_FORMAT_VERSION,
  type SessionEvent,
  SessionEventSchema,
  type SessionHeader,
  SessionHeaderSchema,
  type SessionMeta,
  SessionMetaSchema,
  type SyncMode,
} from './core/schema.js'
export { decodeSessionId, encodeSessionId, MAX_ENCODED_ID_BYTES } from './core/id-encoding.js'
export { bucketName } from './core/paths.js'
export { computeClosers, INTERRUPTED_TOOL_TEXT } from './core/closers.js'
export type {
  ForkChild,
  JsonlSessionPersistence,
  DeleteOptions,
  ListOptions,
  ListProblem,
  LoadedSession,
  LoadOptions,
  RepairReport,
  SessionListing,
  SessionLocation,
  JsonlLocation,
  PostgresLocation,
  RawLogTransfer,
  RawSessionLog,
  SessionPersistence,
  SessionStore,
} from './persistence.js'
export { createJsonlPersistence } from './jsonl-persistence.js'
export { describeLocation, jsonlPath } from './core/location.js'
export {
  type ContentBlock,
  type ModelHistory,
  type ModelMessage,
  isRewoundBy,
  type RewoundRange,
  rewoundRanges,
  toModelHistory,
  UNANSWERED_TOOL_TEXT,
} from './history.js'
export type { DirEntry, FileHandle, FileStat, FileSystem, OpenFlags } from './fs/file-system.js'
export { createNodeFileSystem } from './fs/node-file-system.js'
export { type LockEntry, readLockEntries } from './lock/lock-report.js'
export {
  PLUGIN_NAME,
  type PluginEvents,
  sessionPersistencePlugin,
  type SessionPersistencePlugin,
} from './plugin/plugin.js'
export { type PluginConfig, PluginConfigSchema, PluginJsonConfigSchema } from './plugin/config.js'
export { type AgentHost, HOST_SESSION_EVENT_NAMES, type HostSessionEventName,
  type HostSessionEvents, type LiveSession } from './plugin/host.js'
export { DrainStalledError, EventDroppedError, EventRefusedError } from './plugin/plugin-errors.js'
export type { BackendPluginConfig, JsonlPluginConfig } from './plugin/config.js'
export type { SessionEventSource } from './plugin/host.js'
