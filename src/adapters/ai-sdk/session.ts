import type { ModelMessage } from 'ai'
import { z } from 'zod'
import { type CompactionSummary, CompactionSummarySchema } from '../../session/compaction-summary.js'
import { asObject } from '../../session/as-object.js'
import { plainJsonCopy, plainJsonProblem } from '../../session/json-check.js'
import { serializeEvents } from '../../session/prepare-batch.js'
import { describeZodError, type JsonValue, type SessionEvent, type SessionMeta } from '../../session/schema.js'
import { safeParseConfig } from '../../session/read-config.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../../errors.js'
import type { RepairReport, SessionPersistence } from '../../persistence.js'
import { EventWriter } from './event-writer.js'
import { LAST_TURN_FIELD, lastTurnOf } from '../../session/last-turn.js'
import { toAiSdkMessages } from './to-messages.js'
import { AiSdkTurn, type AiSdkTurnOptions } from './turn.js'

// Strict, as the core config is: a misspelt key (`Cwd`, `meta` as `metadata`) would otherwise be
// ignored without a word, and the session created without it.
const OptionsSchema = z.strictObject({
  persistence: z.custom<SessionPersistence>(
    (p) => ['load', 'create', 'append', 'close'].every((m) => typeof asObject(p)?.[m] === 'function'),
    'persistence must implement SessionPersistence (load, create, append, close)',
  ),
  sessionId: z.string().min(1),
  cwd: z.string().optional(),
  meta: z.record(z.string(), z.json()).optional(),
  now: z.custom<() => number>((f) => typeof f === 'function', 'now must be a function').optional(),
})

export interface AiSdkSessionOptions {
  /** Any backend: `createJsonlPersistence`, the in-memory reference, PostgreSQL. */
  persistence: SessionPersistence
  sessionId: string
  /** Absolute path of the project, recorded when the session is created. */
  cwd?: string
  /** Extra header fields recorded when the session is created (e.g. a title). */
  meta?: Record<string, JsonValue>
  /** Clock for event times and `createdAt` (epoch ms); `Date.now` by default. */
  now?: () => number
}

/** What a turn starts with: a user's text, or messages (a user message, client-side tool results). */
export type AiSdkTurnInput = string | ModelMessage | readonly ModelMessage[]

/** A compaction the host made of its context (`history/compact`, docs/contract.md §2.1). */
export interface AiSdkCompaction {
  /** What replaces the history before `firstKeptSeq`: text, or content blocks (text, image, file). */
  summary: CompactionSummary
  /**
   * The seq of the first event whose message stays in the history (e.g. the `turn/start` of the
   * oldest turn to keep, from `events`). Default: the compaction's own seq (nothing is kept).
   */
  firstKeptSeq?: number
}

/**
 * Resumes the session `sessionId` from `persistence`, or creates it when there is none (a
 * `load` that finds nothing, then `create`). A log a crash left open is repaired by the `load`:
 * its interrupted tool calls come back answered (`repair` says what was done). The session is
 * then open for writing in this process (another instance gets `E_LOCKED`) until `close`.
 *
 * The load starts at the last compaction (`from: 'last-compaction'`, docs/contract.md §15.1):
 * with a compaction in force only the log's tail is read, and the history is the same as the
 * whole log's.
 */
export async function openAiSdkSession(options: AiSdkSessionOptions): Promise<AiSdkSession> {
  const parsed = safeParseConfig(OptionsSchema, options, 'the AI SDK session options')
  if (!parsed.success) {
    throw new SessionPersistenceError('E_CONFIG', `invalid AI SDK session options: ${describeZodError(parsed.error)}`, { cause: parsed.error })
  }
  const { persistence, sessionId, cwd, meta } = options
  const now = options.now ?? Date.now
  try {
    const loaded = await persistence.load(sessionId, { from: 'last-compaction' })
    const lastTurn = await lastTurnOf(persistence, sessionId, loaded.events, loaded.firstSeq).catch(async (error: unknown) => {
      await persistence.close(sessionId) // the session must not stay locked by an object nobody holds
      throw error
    })
    return new AiSdkSession(persistence, loaded.meta, loaded.events, loaded.firstSeq, lastTurn, now, loaded.repair)
  } catch (error) {
    if (!isSessionPersistenceError(error, 'E_NOT_FOUND')) throw error
  }
  const created: SessionMeta = { ...meta, id: sessionId, createdAt: now(), delegationDepth: 0, ...(cwd === undefined ? {} : { cwd }) }
  await persistence.create(created)
  return new AiSdkSession(persistence, created, [], 0, 0, now, undefined)
}

/**
 * A session recorded from AI SDK runs: its history as `ModelMessage`s, and `turn()`, whose
 * settings make one `generateText` / `streamText` run durable as it happens.
 */
export class AiSdkSession {
  readonly meta: SessionMeta
  /** What `load` repaired when the session was resumed (a crash left a turn open). */
  readonly repair: RepairReport | undefined
  readonly #persistence: SessionPersistence
  readonly #writer: EventWriter
  #turn: AiSdkTurn | undefined
  #lastTurn: number
  #compacting: Promise<void> | undefined
  #closing: Promise<void> | undefined

  /** @internal Use `openAiSdkSession`. */
  constructor(
    persistence: SessionPersistence,
    meta: SessionMeta,
    events: readonly SessionEvent[],
    firstSeq: number,
    lastTurn: number,
    now: () => number,
    repair: RepairReport | undefined,
  ) {
    this.#persistence = persistence
    this.meta = meta
    this.repair = repair
    this.#writer = new EventWriter(persistence, meta.id, events, firstSeq, now)
    this.#lastTurn = lastTurn
  }

  get id(): string {
    return this.meta.id
  }

  /**
   * The durable events the session holds, in seq order, from `firstSeq` on: the log's tail read
   * at resume (all of it when no compaction is in force), then every event written since. After
   * `compact`, from its `firstKeptSeq` on.
   */
  get events(): readonly SessionEvent[] {
    return this.#writer.events
  }

  /** The seq of `events[0]`: 0, or where the tail read at resume (or the last `compact`) starts. */
  get firstSeq(): number {
    return this.#writer.firstSeq
  }

  /** The history to hand the model: `toAiSdkMessages` of the durable events. */
  get messages(): ModelMessage[] {
    return toAiSdkMessages(this.#writer.events)
  }

  /** The turn being recorded, if one has not ended yet. */
  get currentTurn(): AiSdkTurn | undefined {
    return this.#turn
  }

  /**
   * Starts recording a turn. `input` is what the user adds (text, or messages); a turn with no
   * input continues the conversation as it stands, e.g. after a crash. Spread `settings` into
   * one `generateText` / `streamText` call; await `done` for the turn's end to be durable.
   * `E_SESSION_LIVE` while the previous turn has not ended, `E_DISPOSED` after `close`, the
   * backend's error once an append has failed; `E_INVALID_EVENT` / `E_NOT_JSON` for input the
   * backend would refuse (a message over the 64 MiB a line holds, or not plain JSON: a tool result
   * over it is recorded as an error result naming the refusal instead). The turn does not start then.
   */
  turn(input?: AiSdkTurnInput, options: AiSdkTurnOptions = {}): AiSdkTurn {
    if (this.#closing) throw new SessionPersistenceError('E_DISPOSED', `session ${this.id} is closed`, { sessionId: this.id })
    const failure = this.#writer.failure
    if (failure) throw failure.error
    this.#refuseWhileBusy()
    const parsedOptions = safeParseConfig(TurnOptionsSchema, options, 'the turn options')
    if (!parsedOptions.success) {
      throw new SessionPersistenceError('E_CONFIG', `invalid turn options: ${describeZodError(parsedOptions.error)}`, { cause: parsedOptions.error })
    }
    const messages = inputMessages(input)
    // Throws for input the backend would refuse (a message over the 64 MiB a line holds, or not
    // plain JSON): the turn does not start, and the session is as before.
    const turn = new AiSdkTurn(this.#writer, this.#lastTurn + 1, messages, parsedOptions.data, () => {
      if (this.#turn === turn) this.#turn = undefined
    })
    this.#lastTurn = turn.number
    turn.settings.messages = toAiSdkMessages(this.#writer.preview(turn.inputDrafts))
    this.#turn = turn
    return turn
  }

  /**
   * Records that the host compacted its context: appends `history/compact {summary,
   * firstKeptSeq}` and resolves when it is durable. From then on `messages` (and every later
   * turn's `settings.messages`) start with `summary` as a user message (none for an empty
   * summary), followed by the messages
   * of the events from `firstKeptSeq` on; a resume reads the log from there. Between turns only:
   * `E_SESSION_LIVE` while a turn (or another `compact`) is being recorded. `E_INVALID_EVENT` for
   * a summary that is neither a string nor an array of blocks with a string `type`, or a
   * `firstKeptSeq` that is not an integer from 0 to the compaction's own seq; `E_NOT_JSON` for
   * a summary that is not plain JSON. Nothing is written then.
   */
  async compact(compaction: AiSdkCompaction): Promise<void> {
    if (this.#closing) throw new SessionPersistenceError('E_DISPOSED', `session ${this.id} is closed`, { sessionId: this.id })
    const failure = this.#writer.failure
    if (failure) throw failure.error
    this.#refuseWhileBusy()
    const seq = this.#writer.nextSeq
    const parsed = CompactionSchema.safeParse(compaction)
    if (!parsed.success) {
      throw new SessionPersistenceError('E_INVALID_EVENT', `compact: ${describeZodError(parsed.error)}`, { sessionId: this.id, cause: parsed.error })
    }
    const firstKeptSeq = parsed.data.firstKeptSeq ?? seq
    if (firstKeptSeq > seq) {
      throw new SessionPersistenceError('E_INVALID_EVENT', `compact: firstKeptSeq ${firstKeptSeq} is after the compaction's own seq ${seq}`, {
        sessionId: this.id,
      })
    }
    const problem = plainJsonProblem(compaction.summary, 'summary')
    if (problem) throw new SessionPersistenceError('E_NOT_JSON', `compact: ${problem}`, { sessionId: this.id })
    const summary = plainJsonCopy(compaction.summary as JsonValue)
    if (summary === undefined) throw new SessionPersistenceError('E_NOT_JSON', 'compact: summary is nested too deeply to write', { sessionId: this.id })
    // Refused here, before anything is read or queued (the writer would refuse it too, taking no
    // seq). Measured as version 1 writes it (the longer line: a version-0 log refuses up to 17 bytes early).
    serializeEvents(this.id, [{ seq, type: 'history/compact', time: Date.now(), data: { summary, firstKeptSeq }, [LAST_TURN_FIELD]: this.#lastTurn }], 1)
    const run = this.#recordCompaction(summary, firstKeptSeq)
    this.#compacting = run.finally(() => {
      this.#compacting = undefined
    }).catch(() => undefined)
    return run
  }

  async #recordCompaction(summary: JsonValue, firstKeptSeq: number): Promise<void> {
    // Keeping messages from before the events held (a tail) needs them: read them back.
    const held = this.#writer.firstSeq
    let earlier: readonly SessionEvent[] = []
    if (firstKeptSeq < held) {
      earlier = (await this.#persistence.read(this.id, { fromSeq: firstKeptSeq, toSeq: held })).events
      if (earlier.length !== held - firstKeptSeq) {
        throw new SessionPersistenceError('E_CORRUPT', `compact: events ${firstKeptSeq} to ${held} of session ${this.id} could not be read`, {
          sessionId: this.id,
        })
      }
    }
    // With the last turn number (LAST_TURN_FIELD): a resume from this compaction's tail continues
    // the numbers without reading before the tail.
    const batch = this.#writer.prepare([{ type: 'history/compact', data: { summary, firstKeptSeq } }])
    for (const event of batch) event[LAST_TURN_FIELD] = this.#lastTurn
    await this.#writer.enqueue(batch)
    // The history no longer depends on anything before firstKeptSeq (§7): let it go.
    this.#writer.rebase(firstKeptSeq, earlier)
  }

  /**
   * Ends a turn still open (reason `aborted`), waits for every append, and closes the session in
   * the backend, releasing its lock. Idempotent.
   */
  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#compacting
      await this.#turn?.end().catch(() => undefined)
      await this.#writer.append([]).catch(() => undefined)
      await this.#persistence.close(this.id)
    })()
    return this.#closing
  }

  /** `close`, for `await using session = await openAiSdkSession(…)`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close()
  }

  #refuseWhileBusy(): void {
    if (this.#turn) {
      throw new SessionPersistenceError('E_SESSION_LIVE', `turn ${this.#turn.number} of session ${this.id} has not ended`, {
        sessionId: this.id,
      })
    }
    if (this.#compacting) {
      throw new SessionPersistenceError('E_SESSION_LIVE', `a compaction of session ${this.id} is being recorded`, { sessionId: this.id })
    }
  }
}

const CompactionSchema = z.strictObject({
  summary: CompactionSummarySchema,
  firstKeptSeq: z.number().int().nonnegative().optional(),
})

const TurnOptionsSchema = z.strictObject({ durableInput: z.boolean().optional() })

const Part = z.looseObject({ type: z.string() })
// The shape the mapping relies on; the AI SDK validates the parts themselves when the run starts.
const InputMessageSchema = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('system'), content: z.string() }),
  z.looseObject({ role: z.literal('user'), content: z.union([z.string(), z.array(Part)]) }),
  z.looseObject({ role: z.literal('assistant'), content: z.union([z.string(), z.array(Part)]) }),
  z.looseObject({ role: z.literal('tool'), content: z.array(Part) }),
])

function inputMessages(input: AiSdkTurnInput | undefined): ModelMessage[] {
  if (input === undefined) return []
  if (typeof input === 'string') return [{ role: 'user', content: input }]
  const list: readonly unknown[] = Array.isArray(input) ? input : [input]
  list.forEach((m, i) => {
    const parsed = InputMessageSchema.safeParse(m)
    if (!parsed.success) {
      const issue = parsed.error.issues[0]
      throw new SessionPersistenceError('E_INVALID_EVENT', `turn input [${i}] is not an AI SDK ModelMessage: ${issue?.path.join('.') || 'message'}: ${issue?.message}`, {
        cause: parsed.error,
      })
    }
  })
  return [...(list as ModelMessage[])]
}
