import type { AgentInputItem } from '@openai/agents'
import type { JsonValue, SessionEvent } from '../../session/schema.js'
import {
  assistantContent,
  classifyItem,
  isModelOutput,
  isToolResult,
  type ItemKind,
  parseArguments,
  reasoningContent,
  resultContent,
  userContent,
} from './item-kind.js'

/** Extra event field holding the Agents SDK item verbatim. */
export const ITEM_FIELD = 'openaiAgentsItem'
/**
 * Extra event field marking what `trackToolCalls` wrote before the run handed its items over:
 * such an event gives an item only when its turn did not complete (the run crashed or failed).
 */
export const PROVISIONAL_FIELD = 'openaiAgentsProvisional'
/** Ignorable event type for an item that has no place in the vocabulary, or that is already there. */
export const ITEM_EVENT = 'openai-agents/item'
/**
 * Extra field of an ITEM_EVENT that `popItem` wrote to place an item again after its rewind: the
 * seq of the earlier event holding the item's vocabulary (where the history view shows it).
 */
export const ITEM_FROM_FIELD = 'openaiAgentsItemFrom'

/** An event without its `seq` and `time`, which the writer stamps. */
export type EventDraft = Omit<SessionEvent, 'seq' | 'time'>

/**
 * The open turn, as the writer tracks it. Steps are inferred from the items replayed into the
 * turn: the first model output, and the first one after tool results, start a step. A batch that
 * replays steps already written (the run's final `addItems` after `trackToolCalls`) reuses them.
 */
export interface TurnState {
  readonly turn: number
  /** Highest step started in this turn (0: none). */
  readonly step: number
  readonly stepOpen: boolean
  /** The step the replayed items are in, and whether results followed its outputs. */
  readonly replayStep: number
  readonly replayAfterResults: boolean
  /** The step each call of this turn was opened in. */
  readonly callSteps: Readonly<Record<string, number>>
}

export function openTurn(turn: number): { state: TurnState; draft: EventDraft } {
  return {
    state: { turn, step: 0, stepOpen: false, replayStep: 0, replayAfterResults: false, callSteps: {} },
    draft: { type: 'turn/start', data: { turn } },
  }
}

/** A batch replays its run from the start: its steps are matched against those already written. */
export function restartReplay(state: TurnState): TurnState {
  return { ...state, replayStep: 0, replayAfterResults: false }
}

export type TurnEndKind = 'completed' | 'aborted' | 'error'

export function closeTurn(state: TurnState, kind: TurnEndKind): EventDraft[] {
  const drafts: EventDraft[] = []
  if (state.stepOpen) drafts.push({ type: 'step/end', data: { turn: state.turn, step: state.step } })
  drafts.push({ type: 'turn/end', data: { turn: state.turn, reason: { kind } } })
  return drafts
}

export interface EncodeOptions {
  /** Mark every event as written ahead of the run's `addItems` (see PROVISIONAL_FIELD). */
  provisional?: boolean
  /** Items whose vocabulary event is already written: they get an ITEM_EVENT placing them only. */
  placeOnly?: (item: AgentInputItem, index: number) => boolean
  /**
   * Items whose vocabulary event is the one at the seq returned (placed again after a rewind):
   * they get an ITEM_EVENT placing them only, with that seq (ITEM_FROM_FIELD).
   */
  placedFrom?: (item: AgentInputItem, index: number) => number | undefined
}

/**
 * Maps items to events (pure): one event per item, carrying the item verbatim, plus the step
 * boundaries the items imply. Returns the drafts and the turn's new state.
 */
export function encodeItems(
  items: readonly AgentInputItem[],
  start: TurnState,
  options: EncodeOptions = {},
): { drafts: EventDraft[]; state: TurnState } {
  let s: TurnState = { ...start, callSteps: { ...start.callSteps } }
  const callSteps = s.callSteps as Record<string, number>
  const drafts: EventDraft[] = []
  items.forEach((item, index) => {
    const k = classifyItem(item)
    if (!k) {
      // Not an object: it cannot be an item; the writer refuses the batch before this.
      return
    }
    if (isModelOutput(k)) {
      let { replayStep, step, stepOpen } = s
      if (replayStep === 0 || s.replayAfterResults) replayStep++
      if (replayStep > step) {
        if (stepOpen) drafts.push({ type: 'step/end', data: { turn: s.turn, step } })
        drafts.push({ type: 'step/start', data: { turn: s.turn, step: replayStep } })
        step = replayStep
        stepOpen = true
      }
      s = { ...s, replayStep, step, stepOpen, replayAfterResults: false }
    } else if (isToolResult(k) && s.replayStep > 0) {
      s = { ...s, replayAfterResults: true }
    }
    if (k.kind === 'call' && callSteps[k.callId] === undefined) callSteps[k.callId] = s.replayStep
    const from = options.placedFrom?.(item, index)
    const draft: EventDraft =
      from !== undefined || options.placeOnly?.(item, index) ? placeDraft(k) : vocabularyDraft(k, s.turn, s.replayStep, callSteps)
    if (from !== undefined) draft[ITEM_FROM_FIELD] = from
    draft[ITEM_FIELD] = item as unknown as JsonValue
    if (options.provisional) draft[PROVISIONAL_FIELD] = true
    drafts.push(draft)
  })
  return { drafts, state: s }
}

function placeDraft(k: ItemKind): EventDraft {
  const itemType = k.item.type
  return { type: ITEM_EVENT, ignorable: true, data: { itemType: typeof itemType === 'string' ? itemType : 'message' } }
}

function vocabularyDraft(k: ItemKind, turn: number, step: number, callSteps: Record<string, number>): EventDraft {
  switch (k.kind) {
    case 'user':
      return { type: 'user/message', data: { content: userContent(k.item.content) } }
    case 'system':
      return { type: 'system/message', data: { content: userContent(k.item.content) } }
    case 'assistant':
      return { type: 'assistant/message', data: { turn, step, content: assistantContent(k.item.content) } }
    case 'reasoning':
      return { type: 'assistant/message', data: { turn, step, content: reasoningContent(k.item.content) } }
    case 'call':
      return {
        type: 'assistant/message',
        data: {
          turn,
          step,
          content: [{ type: 'tool-call', callId: k.callId, name: k.name, arguments: parseArguments(k.item.arguments) }],
        },
      }
    case 'result': {
      const data: { [key: string]: JsonValue } = {
        turn,
        step: callSteps[k.callId] ?? step,
        callId: k.callId,
        content: resultContent(k.item.output),
      }
      if (k.item.status === 'incomplete') data.isError = true
      return { type: 'tool/result', data }
    }
    case 'other':
      return placeDraft(k)
  }
}
