import { isAbsolute } from 'node:path'
import { z } from 'zod'
import type { FileSystem } from '../jsonl/fs/file-system.js'

/** The format version of v0.1 and v0.2 (docs/contract.md §2); v0.3 adds version 1 (§16, `line-codec.ts`). */
export const SESSION_FORMAT_VERSION = 0

export const JsonValueSchema = z.json()
export type JsonValue = z.infer<typeof JsonValueSchema>

const safeNonNegativeInt = z.number().int().nonnegative()

const metaShape = {
  id: z.string().min(1),
  createdAt: safeNonNegativeInt,
  cwd: z.string().refine((p) => isAbsolute(p), 'cwd must be an absolute path').optional(),
  parentSession: z.string().min(1).optional(),
  seedLength: safeNonNegativeInt.optional(),
  delegationDepth: safeNonNegativeInt,
}

const seedNeedsParent = (m: { seedLength?: number | undefined; parentSession?: string | undefined }) =>
  m.seedLength === undefined || m.parentSession !== undefined
const seedNeedsParentIssue = { message: 'seedLength requires parentSession', path: ['seedLength'] }

/** Session metadata as a caller gives it (docs/contract.md §2). Extra JSON fields are kept verbatim. */
export const SessionMetaSchema = z
  .object(metaShape)
  .catchall(JsonValueSchema.optional())
  .refine((m) => !('type' in m) && !('version' in m) && !('crc' in m), {
    message: '`type`, `version` and `crc` are reserved header fields',
  })
  .refine(seedNeedsParent, seedNeedsParentIssue)
export type SessionMeta = z.infer<typeof SessionMetaSchema>

const headerShape = { type: z.literal('session'), version: z.union([z.literal(0), z.literal(1)]), ...metaShape }

/** Line 1 of every log (docs/contract.md §3.3). */
export const SessionHeaderSchema = z.object(headerShape).catchall(JsonValueSchema).refine(seedNeedsParent, seedNeedsParentIssue)
export type SessionHeader = z.infer<typeof SessionHeaderSchema>

/**
 * Line 1 as the readers check it: `SessionHeaderSchema`, its extra fields taken as `JSON.parse`
 * returned them, JSON by construction and not walked again (zod's walk is recursive: a header
 * nested some thousand levels deep, which an older release accepted, ran it out of stack).
 */
export const ParsedHeaderSchema = z
  .object(headerShape)
  .catchall(z.custom<JsonValue>(() => true))
  .refine(seedNeedsParent, seedNeedsParentIssue)

/**
 * The event envelope (docs/contract.md §2). The single source of truth for what a line may hold; the load
 * hot path uses `envelopeProblem` (envelope.ts), which a property test holds equal to this.
 */
export const SessionEventSchema = z
  .object({
    seq: safeNonNegativeInt,
    type: z.string().min(1),
    time: z.number(),
    data: JsonValueSchema.optional(),
    ignorable: z.literal(true).optional(),
  })
  // `undefined` extras are allowed and omitted, as JSON.stringify does (docs/contract.md §4.3).
  .catchall(JsonValueSchema.optional())
export type SessionEvent = z.infer<typeof SessionEventSchema>

export const SyncModeSchema = z.enum(['data', 'full', 'none'])
export type SyncMode = z.infer<typeof SyncModeSchema>

/** Where the package reports problems that are not errors of a call (a bad file in `list`). */
export interface Logger {
  warn(message: string, details?: unknown): void
}

/** Config fields that mean the same on every backend, spelled once: each backend's schema names them among its own. */
export const SharedConfigSchema = z.object({
  formatVersion: z
    .union([z.literal(0), z.literal(1)])
    .default(1)
    .describe(
      'Format version of new logs: 1 (default: a checksum on every line) or 0 (for a fleet whose readers are not all upgraded: a release before v0.3 refuses version 1). A log keeps its version for life; a fork is written in its parent\'s.',
    ),
  logger: z
    .custom<Logger>((v) => typeof v === 'object' && v !== null && typeof (v as { warn?: unknown }).warn === 'function', 'logger must have a warn(message) method')
    .optional(),
  /**
   * Applied to each event before it is serialized (§16), so a secret never reaches the disk or
   * the database: returns the event to store (same seq; a different one refuses the batch). Not
   * applied to the closers a repair (a load) writes.
   */
  redact: z.custom<(event: SessionEvent) => SessionEvent>((v) => typeof v === 'function', 'redact must be a function').optional(),
})
const { formatVersion, logger, redact } = SharedConfigSchema.shape

/** The JSON-representable part of the JSONL backend's configuration. */
export const JsonlJsonConfigSchema = z
  .object({
    root: z.string().min(1).describe('Directory that holds every session log (required, no default).'),
    sync: SyncModeSchema.default('data').describe(
      "'data' = fdatasync (default), 'full' = fsync, 'none' = no sync (survives a process crash, not a power loss).",
    ),
    staleLockMs: z
      .number()
      .int()
      .min(1000)
      .default(10_000)
      .describe('A writer lock whose holder cannot be checked is taken over when not refreshed for this long (at least 1000; the holder refreshes every third of it).'),
    formatVersion,
    dsyncWrites: z
      .boolean()
      .default(false)
      .describe(
        "With sync 'data': write each batch with one write on a descriptor opened with O_DSYNC instead of write + fdatasync (one thread-pool trip instead of two). Ignored where O_DSYNC is unavailable.",
      ),
  })
  .strict()

/** What every file-system seam must have (src/jsonl/fs/file-system.ts; `watch` is optional). */
const FS_METHODS = ['mkdir', 'open', 'link', 'unlink', 'readdir', 'stat', 'chmod', 'rename', 'utimes', 'readlink', 'syncDir'] as const

function isFileSystem(v: unknown): boolean {
  return typeof v === 'object' && v !== null && FS_METHODS.every((m) => typeof (v as Record<string, unknown>)[m] === 'function')
}

export const JsonlConfigSchema = JsonlJsonConfigSchema.extend({
  logger,
  redact,
  /** The file-system seam; tests inject the fault-injecting one. Default: Node's fs. */
  fs: z.custom<FileSystem>(isFileSystem, `fs must be a FileSystem: an object with the methods ${FS_METHODS.join(', ')}`).optional(),
}).strict()
export type JsonlConfig = z.input<typeof JsonlConfigSchema>

/** Formats the first zod issue as `field: message`, for `E_CONFIG` / `E_INVALID_META`. */
export function describeZodError(error: z.ZodError): string {
  const issue = error.issues[0]
  if (!issue) return 'invalid value'
  const path = issue.path.map(String).join('.')
  return path ? `${path}: ${issue.message}` : issue.message
}
