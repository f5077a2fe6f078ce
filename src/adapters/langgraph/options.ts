import type { SerializerProtocol } from '@langchain/langgraph-checkpoint'
import { z } from 'zod'
import { SessionPersistenceError } from '../../errors.js'
import type { ListProblem, SessionPersistence } from '../../persistence.js'
import { describeZodError } from '../../session/schema.js'
import { safeParseConfig } from '../../session/read-config.js'

export interface SessionCheckpointSaverOptions {
  /** Any backend: the JSONL one, the in-memory reference, PostgreSQL. */
  persistence: SessionPersistence
  /**
   * How long a thread stays open (its writer lock held, its index in memory) after its last
   * use, in milliseconds; default 30000. Afterwards it is closed, so another process or machine
   * can write it. `0` closes it after every call; `Infinity` keeps it until `close()`;
   * at most 2^31-1 otherwise (setTimeout's limit), `E_CONFIG` above.
   */
  idleMs?: number
  /** LangGraph's serializer for checkpoints and writes; its `JsonPlusSerializer` by default. */
  serde?: SerializerProtocol
  /** Clock for event times and `createdAt` (epoch milliseconds); `Date.now` by default. */
  now?: () => number
  /**
   * Told of each log that `list()` across threads (no `thread_id`) leaves out: one the backend's
   * listing cannot read, or a thread's log that is damaged (`E_CORRUPT`) or of a newer format.
   * By default a warning on stderr. A `list` or `getTuple` of that thread itself still rejects.
   */
  onProblem?: (problem: ListProblem) => void
}

/** setTimeout's largest delay: a larger one fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1

const METHODS = ['create', 'append', 'load', 'inspect', 'list', 'delete', 'close'] as const

// Strict, as the core config is: a misspelt key (`idleMS`) would otherwise be ignored without a word.
const OptionsSchema = z.strictObject({
  persistence: z.custom<SessionPersistence>(
    (v) => typeof v === 'object' && v !== null && METHODS.every((m) => typeof (v as Record<string, unknown>)[m] === 'function'),
    `must implement SessionPersistence (${METHODS.join(', ')})`,
  ),
  // Infinity is allowed (never close an idle thread), which z.number() refuses.
  // Above 2^31-1 ms (setTimeout's limit, ~24.8 days) a timer fires at once: refused, as the Claude store's idleCloseMs is.
  idleMs: z
    .custom<number>(
      (v) => typeof v === 'number' && v >= 0 && (v === Infinity || v <= MAX_TIMER_MS),
      `must be a number from 0 to ${2 ** 31 - 1} (setTimeout's limit), or Infinity: never`,
    )
    .optional(),
  serde: z
    .custom<SerializerProtocol>(
      (v) => typeof v === 'object' && v !== null && ['dumpsTyped', 'loadsTyped'].every((m) => typeof (v as Record<string, unknown>)[m] === 'function'),
      'must have dumpsTyped and loadsTyped',
    )
    .optional(),
  now: z.custom<() => number>((v) => typeof v === 'function', 'must be a function').optional(),
  onProblem: z.custom<(problem: ListProblem) => void>((v) => typeof v === 'function', 'must be a function').optional(),
})

export const DEFAULT_IDLE_MS = 30_000

export function parseOptions(
  options: unknown,
): Required<Omit<SessionCheckpointSaverOptions, 'serde' | 'onProblem'>> & { serde?: SerializerProtocol; onProblem?: (problem: ListProblem) => void } {
  const parsed = safeParseConfig(OptionsSchema, options, 'the SessionCheckpointSaver options')
  if (!parsed.success) {
    throw new SessionPersistenceError('E_CONFIG', `invalid SessionCheckpointSaver options: ${describeZodError(parsed.error)}`, { cause: parsed.error })
  }
  const { persistence, idleMs, serde, now, onProblem } = parsed.data
  return { persistence, idleMs: idleMs ?? DEFAULT_IDLE_MS, now: now ?? Date.now, ...(serde ? { serde } : {}), ...(onProblem ? { onProblem } : {}) }
}
