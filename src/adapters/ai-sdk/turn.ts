import type { ModelMessage, ToolSet } from 'ai'
import { OpenTurnTracker } from '../../session/closers.js'
import type { JsonValue, SessionEvent } from '../../session/schema.js'
import { SessionPersistenceError } from '../../errors.js'
import type { EventWriter } from './event-writer.js'
import { type EventDraft, messagesToDrafts } from './from-messages.js'
import { toJson } from './json.js'
import { type Fitted, fitDrafts, refusalClosers } from './refused.js'

/** Why a turn ended, as its `turn/end` records it. */
export type TurnEndReason = {
  kind: 'completed' | 'aborted' | 'error' | 'max-tokens' | 'blocked' | 'interrupted'
  [extra: string]: JsonValue
}

/** The parts of the AI SDK callback events the recorder reads (generateText and streamText alike). */
export interface StepStartEvent {
  stepNumber: number
}
export interface ToolCallStartEvent {
  stepNumber?: number | undefined
  toolCall: { toolCallId: string; toolName: string; input: unknown }
}
export interface StepFinishEvent {
  stepNumber?: number | undefined
  response: { messages: readonly ModelMessage[] }
}
export interface FinishEvent {
  finishReason: string
}
export interface ToolExecutionOptions {
  toolCallId: string
}

/**
 * The settings a turn's recorder adds to a `generateText` / `streamText` call: spread them in.
 * `messages` is the session's history plus the turn's input; the callbacks record the run.
 */
export interface AiSdkTurnSettings {
  messages: ModelMessage[]
  experimental_onStepStart: (event: StepStartEvent) => Promise<void>
  experimental_onToolCallStart: (event: ToolCallStartEvent) => Promise<void>
  onStepFinish: (event: StepFinishEvent) => Promise<void>
  onFinish: (event: FinishEvent) => Promise<void>
  /** streamText only (generateText ignores it): an aborted stream ends the turn as `aborted`. */
  onAbort: () => Promise<void>
}

export interface AiSdkTurnOptions {
  /**
   * Make the turn's input durable before the model is first called (one more append per turn).
   * By default it goes with the turn's first durable point: its first tool call, or the end of
   * its first step.
   */
  durableInput?: boolean
}

const END_KIND: Record<string, TurnEndReason['kind']> = {
  length: 'max-tokens',
  'content-filter': 'blocked',
  error: 'error',
}

/**
 * One run of the agent loop, recorded as it happens. Durable points: each tool call (its
 * `tool/call` event, before the tool runs) and each step boundary (the finished step's assistant
 * message, its tool results and `step/end`, written when the next step starts or with the
 * turn's `turn/end`). Events in between wait in memory for the next durable point, so a turn
 * costs one append per step plus one per tool call.
 */
export class AiSdkTurn {
  /** The turn number (`turn/start`'s `turn`), counting from 1 in a session. */
  readonly number: number
  /** Spread into `generateText` / `streamText`, once: one settings object records one run. */
  readonly settings: AiSdkTurnSettings
  readonly #writer: EventWriter
  #buffer: EventDraft[]
  #openStep: number | undefined
  #stepEnded = false // a finished step waits in the buffer
  #consumed = 0 // response messages already recorded (they are cumulative over the run's steps)
  #ended = false
  readonly #recorded = new Set<string>() // calls whose tool/call is durable
  readonly #durableInput: boolean
  #started = false // the turn's first events (turn/start, its input) have been handed to the writer
  readonly #queued = new OpenTurnTracker() // the turn as the events handed to the writer leave it
  #refused: unknown // the refusal that ended the turn, if one did
  readonly #done: Promise<void>
  #settle!: (error?: unknown) => void

  /** @internal Created by `AiSdkSession.turn`. */
  constructor(writer: EventWriter, turn: number, input: readonly ModelMessage[], options: AiSdkTurnOptions, onSettled: () => void) {
    this.number = turn
    this.#writer = writer
    this.#durableInput = options.durableInput === true
    this.#buffer = [{ type: 'turn/start', data: { turn } }, ...messagesToDrafts(input, { turn, step: -1 })]
    // Refused here, before the turn starts, rather than ending it at its first durable point:
    // a tool result too long for a line becomes the placeholder, anything else throws.
    const fitted = this.#fit(this.#buffer)
    if (fitted.refused) throw fitted.refused
    this.#buffer = fitted.drafts
    this.#done = new Promise<void>((resolve, reject) => {
      this.#settle = (error) => (error === undefined ? resolve() : reject(error))
    }).finally(onSettled)
    this.#done.catch(() => undefined) // a caller who never awaits `done` must not crash the process
    this.settings = {
      messages: [], // set by the session, which computes the history with this turn's input
      experimental_onStepStart: (e) => this.#stepStart(e),
      experimental_onToolCallStart: (e) => this.#toolCallStart(e),
      onStepFinish: (e) => this.#stepFinish(e),
      onFinish: (e) => this.end({ kind: END_KIND[e.finishReason] ?? 'completed', finishReason: e.finishReason }),
      onAbort: () => this.end({ kind: 'aborted' }),
    }
  }

  /** @internal The events the turn starts with (for the history handed to the model). */
  get inputDrafts(): readonly EventDraft[] {
    return this.#buffer
  }

  /**
   * Resolves when the turn's `turn/end` is durable (after `onFinish`, or `end`/`fail`); rejects
   * with the backend's error if any of the turn's appends failed, or with the refusal that ended
   * the turn (an event the backend would refuse, other than a tool result: see `#flush`).
   */
  get done(): Promise<void> {
    return this.#done
  }

  /** Whether `turn/end` has been queued. */
  get ended(): boolean {
    return this.#ended
  }

  /**
   * Ends the turn now (default reason `aborted`): what is still in memory is written with the
   * `turn/end`, closing an open step. For a run that threw or was abandoned; a run that finished
   * ends its turn itself through `onFinish`. Returns `done`; later calls change nothing.
   */
  end(reason: TurnEndReason = { kind: 'aborted' }): Promise<void> {
    if (this.#ended) return this.#done
    // Read before anything changes: a reason that throws as it is read (a getter) rejects this
    // call and leaves the turn open, to be ended again (or as aborted by close()). Thrown with the
    // turn marked ended, it left the turn, done, close() and the lock hanging for ever.
    let stored: JsonValue
    try {
      stored = toJson(reason)
    } catch (error) {
      return Promise.reject(error)
    }
    this.#ended = true
    if (this.#openStep !== undefined) this.#buffer.push({ type: 'step/end', data: { turn: this.number, step: this.#openStep } })
    this.#buffer.push({ type: 'turn/end', data: { turn: this.number, reason: stored } })
    this.#flush(this.#take()).then(
      () => this.#settle(),
      (error: unknown) => this.#settle(error),
    )
    return this.#done
  }

  /**
   * The same tools, each refusing to run unless its call is on record. The AI SDK awaits
   * `experimental_onToolCallStart` before a tool runs but ignores its failure, so without this a
   * tool would still run when the backend could not record its call (a full disk, a lost lock).
   * A refused call reaches the model as a tool error carrying the backend's error.
   */
  guardTools<TOOLS extends ToolSet>(tools: TOOLS): TOOLS {
    const guarded: Record<string, unknown> = {}
    for (const [name, t] of Object.entries(tools)) {
      const execute = t.execute
      guarded[name] =
        typeof execute !== 'function'
          ? t
          : {
              ...t,
              execute: (input: never, options: ToolExecutionOptions) => {
                const failure = this.#writer.failure
                if (failure) throw failure.error
                if (this.#refused !== undefined) throw this.#refused
                if (!this.#recorded.has(options.toolCallId)) {
                  throw new SessionPersistenceError('E_NOT_FOUND', `tool call ${options.toolCallId} was not recorded: spread the turn's settings into the call`)
                }
                return execute.call(t, input, options as never)
              },
            }
    }
    return guarded as TOOLS
  }

  /** Ends the turn because the run threw: reason `aborted` for an abort, `error` otherwise. */
  fail(error: unknown): Promise<void> {
    const e = error as { name?: unknown; message?: unknown } | undefined
    const aborted = e?.name === 'AbortError' || e?.name === 'ResponseAborted'
    const message = typeof e?.message === 'string' ? e.message : String(error)
    return this.end({ kind: aborted ? 'aborted' : 'error', message })
  }

  /**
   * Queues `drafts`. A batch the backend would refuse (an event over the 64 MiB a line holds, or
   * not plain JSON) takes no seq: each tool result refused becomes a placeholder naming why, and
   * the turn goes on; any other event refused is left out and the turn ends with it, its open
   * calls answered and its step closed, its `turn/end` reason `error`; the promise (and `done`)
   * then rejects with the refusal, once that end is durable.
   */
  #flush(drafts: EventDraft[]): Promise<void> {
    let fitted: Fitted
    try {
      fitted = this.#fit(drafts)
    } catch (error) {
      return Promise.reject(error)
    }
    if (fitted.refused === undefined) return this.#enqueue(fitted.drafts, fitted.batch)
    const error = fitted.refused
    this.#ended = true
    this.#refused = error
    // What fits, without the turn's own end (it ends as an error instead), then the closers: the
    // second batch queued right behind the first, its closers computed from what the first leaves.
    const kept = this.#enqueue(fitted.kept.filter((d) => d.type !== 'turn/end'))
    const closed = this.#enqueue(refusalClosers(this.#queued.openTurn(), error))
    const ended = Promise.all([kept, closed]).then(() => Promise.reject(error))
    ended.then(undefined, (e: unknown) => this.#settle(e))
    return ended
  }

  #fit(drafts: EventDraft[]): Fitted {
    return fitDrafts(drafts, (batch, offset) => this.#writer.prepare(batch, offset))
  }

  /** Queues `drafts` (`prepared`: their events, checked just now, if they were). */
  #enqueue(drafts: readonly EventDraft[], prepared?: readonly SessionEvent[]): Promise<void> {
    if (drafts.length === 0) return Promise.resolve()
    let batch: readonly SessionEvent[]
    try {
      batch = prepared ?? this.#writer.prepare(drafts)
    } catch (error) {
      return Promise.reject(error)
    }
    for (const event of batch) this.#queued.add(event)
    return this.#writer.enqueue(batch)
  }

  #take(): EventDraft[] {
    const drafts = this.#buffer
    this.#buffer = []
    this.#stepEnded = false
    this.#started = true
    return drafts
  }

  async #stepStart(event: StepStartEvent): Promise<void> {
    if (this.#ended) return
    this.#openStep = event.stepNumber
    this.#buffer.push({ type: 'step/start', data: { turn: this.number, step: event.stepNumber } })
    if (this.#stepEnded || (this.#durableInput && !this.#started)) await this.#flush(this.#take())
  }

  async #toolCallStart(event: ToolCallStartEvent): Promise<void> {
    if (this.#ended) return
    const { toolCallId, toolName, input } = event.toolCall
    const step = event.stepNumber ?? this.#openStep ?? 0
    this.#buffer.push({
      type: 'tool/call',
      data: { turn: this.number, step, callId: toolCallId, name: toolName, arguments: input === undefined ? {} : toJson(input) },
    })
    await this.#flush(this.#take())
    this.#recorded.add(toolCallId)
  }

  async #stepFinish(event: StepFinishEvent): Promise<void> {
    if (this.#ended) return
    const step = event.stepNumber ?? this.#openStep ?? 0
    const all = event.response.messages
    const fresh = all.slice(this.#consumed)
    this.#consumed = all.length
    this.#buffer.push(...messagesToDrafts(fresh, { turn: this.number, step }), { type: 'step/end', data: { turn: this.number, step } })
    this.#openStep = undefined
    this.#stepEnded = true
  }
}
