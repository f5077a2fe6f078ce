// What the recorder writes when the backend would refuse an event (docs/adapters.md, What the log
// refuses): a line over 64 MiB (§15.5) or content that is not plain JSON (§4.3). A tool result is
// replaced by an error result naming the refusal; any other event is left out, and the turn is
// closed with the events below.
import type { OpenTurn } from '../../session/closers.js'
import type { SessionEvent } from '../../session/schema.js'
import { isSessionPersistenceError } from '../../errors.js'
import type { EventDraft } from './from-messages.js'

/** Whether `error` is the backend refusing what a batch holds (§4.3: nothing is written then). */
export const isRefusal = (error: unknown): boolean =>
  isSessionPersistenceError(error, 'E_INVALID_EVENT') || isSessionPersistenceError(error, 'E_NOT_JSON')

/** A batch as the writer will take it. */
export interface Fitted {
  /** The drafts, each tool result the backend would refuse replaced by its placeholder. */
  drafts: EventDraft[]
  /** `drafts` without the other events it would refuse. */
  kept: EventDraft[]
  /** The first refusal of an event other than a tool result. */
  refused?: unknown
  /** The events of `drafts` as checked, when nothing had to change. */
  batch?: readonly SessionEvent[]
}

/**
 * Fits `drafts` to what the backend accepts. `prepare` checks drafts as the next batch (`offset`
 * seqs later), throwing the backend's refusal; each event is measured at its own seq, since a
 * placeholder takes its place and leaving events out only lowers the seqs after it.
 */
export function fitDrafts(drafts: EventDraft[], prepare: (drafts: readonly EventDraft[], offset: number) => SessionEvent[]): Fitted {
  try {
    return { drafts, kept: drafts, batch: prepare(drafts, 0) }
  } catch (error) {
    if (!isRefusal(error)) throw error
  }
  let refused: unknown
  const out: EventDraft[] = []
  const kept: EventDraft[] = []
  drafts.forEach((draft, i) => {
    let problem: unknown
    try {
      prepare([draft], i)
    } catch (error) {
      if (!isRefusal(error)) throw error
      problem = error
    }
    const fitting = problem === undefined ? draft : draft.type === 'tool/result' ? notRecorded(draft, problem) : undefined
    if (fitting) kept.push(fitting)
    else refused ??= problem
    out.push(fitting ?? draft)
  })
  return refused === undefined ? { drafts: out, kept } : { drafts: out, kept, refused }
}

const described = (error: unknown) => {
  const e = error as { message?: unknown; code?: unknown }
  return { message: typeof e.message === 'string' ? e.message : String(error), code: typeof e.code === 'string' ? e.code : 'E_INVALID_EVENT' }
}

/**
 * The `tool/result` recorded in place of one the backend would refuse (`problem`): an error
 * result that names the refusal, so the call stays answered and the history balanced.
 */
export function notRecorded(draft: EventDraft, problem: unknown): EventDraft {
  const { message, code } = described(problem)
  const { content: _content, isError: _isError, error: _error, ...rest } = draft.data
  return {
    type: 'tool/result',
    data: {
      ...rest,
      content: [{ type: 'text', text: `Tool result not recorded: ${message}.` }],
      isError: true,
      error: { name: 'SessionPersistenceError', code },
    },
  }
}

/**
 * What closes a turn that a refusal (`error`) ended, `open` being the turn as the events queued
 * leave it: an error result per call on record and not answered, `step/end` for an open step,
 * `turn/end` with reason `error`.
 */
export function refusalClosers(open: OpenTurn | undefined, error: unknown): EventDraft[] {
  if (!open) return []
  const { message, code } = described(error)
  const drafts: EventDraft[] = open.pending.map((call) => ({
    type: 'tool/result',
    data: {
      turn: call.turn,
      step: call.step,
      callId: call.callId,
      content: [{ type: 'text', text: `Tool call not completed: the turn ended because the session log refused one of its events (${message}).` }],
      isError: true,
      error: { name: 'SessionPersistenceError', code },
    },
  }))
  if (open.step) drafts.push({ type: 'step/end', data: { turn: open.step.turn, step: open.step.step } })
  drafts.push({ type: 'turn/end', data: { turn: open.turn, reason: { kind: 'error', message, code } } })
  return drafts
}
