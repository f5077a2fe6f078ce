import { z } from 'zod'
import { SessionPersistenceError, type SessionPersistence } from '../../index.js'
import { describeZodError } from '../../session/schema.js'
import { safeParseConfig } from '../../session/read-config.js'
import type { SessionKey } from './types.js'

export interface SessionStoreOptions {
  /** Any backend: the JSONL one, the in-memory reference, PostgreSQL. */
  persistence: SessionPersistence
  /**
   * How long a session stays open (its writer lock held) after its last append; then it is
   * closed, so another process or host can resume it. Default 30000 ms; 0 closes it after each
   * append (each next append then reads the log again).
   */
  idleCloseMs?: number
  /**
   * Called with every append the store rejects (and every failed idle close), besides the
   * rejection the SDK sees: the SDK drops a batch after three rejections. Default: one line on
   * `console.warn`.
   */
  onError?: (error: unknown, key: SessionKey) => void
  /** Clock for event times and `createdAt` (epoch milliseconds); `Date.now` by default. */
  now?: () => number
}

const METHODS = ['create', 'append', 'load', 'inspect', 'list', 'delete', 'close'] as const

// Strict, as the core config is: a misspelt key (`idleCloseMS`) would otherwise be ignored and the
// lock kept for the default 30 s without a word.
const OptionsSchema = z.strictObject({
  persistence: z.custom<SessionPersistence>(
    (v) => typeof v === 'object' && v !== null && METHODS.every((m) => typeof (v as Record<string, unknown>)[m] === 'function'),
    `must implement SessionPersistence (${METHODS.join(', ')})`,
  ),
  idleCloseMs: z.number().int().min(0).max(2 ** 31 - 1).optional(),
  onError: z.custom<(error: unknown, key: SessionKey) => void>((v) => typeof v === 'function', 'must be a function').optional(),
  now: z.custom<() => number>((v) => typeof v === 'function', 'must be a function').optional(),
})

export interface ResolvedOptions {
  persistence: SessionPersistence
  idleCloseMs: number
  onError: (error: unknown, key: SessionKey) => void
  now: () => number
}

export const DEFAULT_IDLE_CLOSE_MS = 30_000

const warn = (error: unknown, key: SessionKey) => {
  const code = typeof (error as { code?: unknown })?.code === 'string' ? ` (${(error as { code: string }).code})` : ''
  console.warn(`session-persistence-jsonl/claude-agent-sdk: append to ${JSON.stringify(key)} failed${code}: ${(error as Error)?.message ?? String(error)}`)
}

/** Validates the options once (`E_CONFIG`, naming the field or the unknown key). */
export function resolveOptions(options: unknown): ResolvedOptions {
  const parsed = safeParseConfig(OptionsSchema, options, 'the createSessionStore options')
  if (!parsed.success) {
    throw new SessionPersistenceError('E_CONFIG', `invalid createSessionStore options: ${describeZodError(parsed.error)}`, { cause: parsed.error })
  }
  return {
    persistence: parsed.data.persistence,
    idleCloseMs: parsed.data.idleCloseMs ?? DEFAULT_IDLE_CLOSE_MS,
    onError: parsed.data.onError ?? warn,
    now: parsed.data.now ?? Date.now,
  }
}
