import type { AgentInputItem } from '@openai/agents'
import { asObject } from '../../session/as-object.js'
import type { JsonValue, SessionEvent } from '../../session/schema.js'
import { classifyItem, itemKey, parseArguments } from './item-kind.js'

/** A recorded call: the turn and seq of its `tool-call` block, what it calls, and the seq of its `tool/result` once answered. */
interface RecordedCall {
  turn: number
  seq: number
  /** The tool's name and its arguments as JSON text (`JSON.stringify` of the block's). */
  what: string
  resultSeq?: number
}

/** What a call calls, comparable between a `tool-call` block and the Agents SDK's call item. */
const callWhat = (name: unknown, args: JsonValue | undefined) => JSON.stringify([name ?? null, args ?? null])

/**
 * What the vocabulary already holds, so that a batch repeating it is placed, not written twice.
 * A call id is not unique in a session (a local model server sends `call_0` in every run): a
 * call is known by its id only while it is open, from its `tool-call` block until its
 * `tool/result` (or until its turn ends `aborted` or `error`), as the history view sees it: a
 * `history/rewind` that takes a call out closes it, one that takes only its result out opens it
 * again (`popItem` of a result). What `trackToolCalls` recorded in
 * the tracked turn (calls, results, the run's input) is kept in lists the run's final `addItems`
 * matches once each; the lists are emptied at each `turn/start` and `turn/end`.
 */
export class RecordedItems {
  /** The open calls: callId → its latest call. */
  readonly #open = new Map<string, RecordedCall>()
  /** The answered calls, by callId, in log order: what a rewind of their results opens again. */
  readonly #answered = new Map<string, RecordedCall[]>()
  /** The calls and results of the tracked turn, by callId (a multiset). */
  #turnCalls: string[] = []
  #turnResults: string[] = []
  /** The run input recorded in the tracked turn (a multiset, matched by deep equality). */
  #inputs: string[] = []

  /** Learns the open calls of a loaded log. */
  scan(events: readonly SessionEvent[]): void {
    for (const e of events) this.note(e)
    this.#clearTurn()
  }

  /** Learns from an event now in the log. */
  note(e: SessionEvent): void {
    const data = asObject(e.data)
    switch (e.type) {
      case 'turn/start':
        this.#clearTurn()
        return
      case 'turn/end': {
        const kind = asObject(data?.reason)?.kind
        // A turn that did not complete will not answer its open calls: a later call may reuse the id.
        if (kind === 'aborted' || kind === 'error') {
          for (const [callId, call] of this.#open) if (call.turn === data?.turn) this.#open.delete(callId)
        }
        this.#clearTurn()
        return
      }
      case 'tool/result': {
        const callId = data?.callId
        const call = typeof callId === 'string' ? this.#open.get(callId) : undefined
        if (call === undefined) return
        this.#open.delete(callId as string)
        call.resultSeq = e.seq
        const answered = this.#answered.get(callId as string)
        if (answered) answered.push(call)
        else this.#answered.set(callId as string, [call])
        return
      }
      case 'history/rewind': {
        const to = data?.to
        if (typeof to === 'number' && Number.isSafeInteger(to) && to >= 0 && to < e.seq) this.#rewind(to)
        return
      }
      case 'assistant/message':
        if (!Array.isArray(data?.content)) return
        for (const block of data.content) {
          const b = asObject(block)
          if (b?.type !== 'tool-call' || typeof b.callId !== 'string') continue
          this.#open.set(b.callId, { turn: typeof data.turn === 'number' ? data.turn : -1, seq: e.seq, what: callWhat(b.name, b.arguments as JsonValue | undefined) })
        }
    }
  }

  /** Seqs from `to` on are out of the history: their calls are gone, a call whose result is gone is open again. */
  #rewind(to: number): void {
    for (const [callId, call] of this.#open) if (call.seq >= to) this.#open.delete(callId)
    for (const [callId, calls] of this.#answered) {
      const kept = calls.filter((c) => c.seq < to)
      const reopened = kept.at(-1)
      if (reopened !== undefined && (reopened.resultSeq as number) >= to) {
        kept.pop()
        delete reopened.resultSeq
        // A later call with the same id still in the history is the open one.
        if (!this.#open.has(callId)) this.#open.set(callId, reopened)
      }
      if (kept.length === 0) this.#answered.delete(callId)
      else this.#answered.set(callId, kept)
    }
  }

  /** True while the latest call `callId` has no result (and its turn did not fail). */
  isOpen(callId: string): boolean {
    return this.#open.has(callId)
  }

  /**
   * True when `call` is the open call of its id, on record already: same id, same tool, same
   * arguments (the call an approval interrupted, which the resumed run now invokes). A call that
   * only reuses the id of an open one (a local model server's `call_0` after the result that
   * answered it was popped) is another call.
   */
  isOpenCall(call: { callId: string; name: string; arguments: string }): boolean {
    const open = this.#open.get(call.callId)
    return open !== undefined && open.what === callWhat(call.name, parseArguments(call.arguments))
  }

  /** A call `trackToolCalls` has on record in the tracked turn (written now, or still open from before). */
  addTurnCall(callId: string): void {
    this.#turnCalls.push(callId)
  }

  addTurnResult(callId: string): void {
    this.#turnResults.push(callId)
  }

  addInputs(items: readonly AgentInputItem[]): void {
    for (const item of items) {
      const key = itemKey(item)
      if (key !== undefined) this.#inputs.push(key)
    }
  }

  /** Forgets what the tracked turn recorded (it ended, or a new one starts). */
  clearTurn(): void {
    this.#clearTurn()
  }

  #clearTurn(): void {
    this.#turnCalls = []
    this.#turnResults = []
    this.#inputs = []
  }

  /**
   * A matcher for one batch written in turn `turn`: true for an item whose vocabulary event
   * exists already. A call or result is placed only if it matches an entry the tracked turn
   * recorded that no earlier item of the batch used; a call also if it repeats a call still open
   * from an earlier turn (the approved call a resumed run hands over). Pure: it works on copies,
   * and the batch's write ends the turn.
   */
  matcher(turn: number): (item: AgentInputItem) => boolean {
    const inputs = [...this.#inputs]
    const calls = [...this.#turnCalls]
    const results = [...this.#turnResults]
    // The open calls (callId → turn) as the batch's own items change them, item by item.
    const open = new Map([...this.#open].map(([callId, call]) => [callId, call.turn]))
    const take = (list: string[], key: string | undefined): boolean => {
      const i = key === undefined ? -1 : list.indexOf(key)
      if (i === -1) return false
      list.splice(i, 1)
      return true
    }
    return (item) => {
      const k = classifyItem(item)
      if (k?.kind === 'call') {
        if (take(calls, k.callId)) return true
        const openIn = open.get(k.callId)
        if (openIn !== undefined && openIn !== turn) return true
        open.set(k.callId, turn)
        return false
      }
      if (k?.kind === 'result') {
        if (take(results, k.callId)) return true
        open.delete(k.callId)
        return false
      }
      return inputs.length > 0 && take(inputs, itemKey(item))
    }
  }
}
