export {
  ERROR_CODES,
  type ErrorDetails,
  type ErrorCode,
  isSessionPersistenceError,
  type LockHolder,
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
} from './session/schema.js'
export { decodeSessionId, encodeSessionId, MAX_ENCODED_ID_BYTES } from './session/id-encoding.js'
export { bucketName } from './jsonl/paths.js'
export { computeClosers, INTERRUPTED_TOOL_TEXT } from './session/closers.js'
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
  MigrateReport,
  RawLogStreaming,
  RawPageOptions,
  RawSessionLog,
  RawSessionStream,
  ReadRange,
  RedactReport,
  TruncateReport,
  SessionPersistence,
  SessionRange,
  WatchOptions,
  SessionStore,
} from './persistence.js'
export { createJsonlPersistence } from './jsonl/jsonl-persistence.js'
export { describeLocation, jsonlPath } from './session/location.js'
export {
  type ContentBlock,
  type ModelHistory,
  type ModelMessage,
  isRewoundBy,
  type RewoundRange,
  rewoundRanges,
  toModelHistory,
  UNANSWERED_TOOL_TEXT,
} from './session/history.js'
export type { DirEntry, FileHandle, FileStat, FileSystem, OpenFlags, PeekedBatch, PeekedFile, PeekOptions } from './jsonl/fs/file-system.js'
export { createNodeFileSystem } from './jsonl/fs/node-file-system.js'
export { type LockEntry, readLockEntries } from './jsonl/lock/lock-report.js'
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
export { DeadlineError, type DeadlineOptions } from './plugin/deadline.js'
export type { BackendPluginConfig, JsonlPluginConfig } from './plugin/config.js'
export type { SeedOptions, SessionEventSource } from './plugin/host.js'
