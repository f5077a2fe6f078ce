import type { AgentInputItem } from '@openai/agents'
import { asObject } from '../../session/as-object.js'
import type { SessionEvent } from '../../session/schema.js'
import { classifyItem, itemKey } from './item-kind.js'

/**
 * What the vocabulary already holds, so that a batch repeating it is placed, not written twice:
 * the calls and results of every callId, and the run input `trackToolCalls` wrote ahead of the
 * run's own `addItems` (a multiset, matched by deep equality).
 */
export class RecordedItems {
  readonly #calls = new Set<string>()
  readonly #results = new Set<string>()
  #inputs: string[] = []

  /** Learns the calls and results of a loaded log. */
  scan(events: readonly SessionEvent[]): void {
    for (const e of events) this.note(e)
  }

  note(e: SessionEvent): void {
    const data = asObject(e.data)
    if (e.type === 'tool/result' && typeof data?.callId === 'string') this.#results.add(data.callId)
    if (e.type === 'assistant/message' && Array.isArray(data?.content)) {
      for (const block of data.content) {
        const b = asObject(block)
        if (b?.type === 'tool-call' && typeof b.callId === 'string') this.#calls.add(b.callId)
      }
    }
  }

  hasCall(callId: string): boolean {
    return this.#calls.has(callId)
  }

  hasResult(callId: string): boolean {
    return this.#results.has(callId)
  }

  addInputs(items: readonly AgentInputItem[]): void {
    for (const item of items) {
      const key = itemKey(item)
      if (key !== undefined) this.#inputs.push(key)
    }
  }

  clearInputs(): void {
    this.#inputs = []
  }

  /**
   * A matcher for one batch: true for an item whose vocabulary event exists already. It consumes
   * input matches on a copy; `commit` keeps the consumption once the batch is durable.
   */
  matcher(): { placeOnly: (item: AgentInputItem) => boolean; commit: () => void } {
    const inputs = [...this.#inputs]
    const seenCalls = new Set<string>()
    const seenResults = new Set<string>()
    const placeOnly = (item: AgentInputItem): boolean => {
      const k = classifyItem(item)
      if (k?.kind === 'call') {
        const known = this.#calls.has(k.callId) || seenCalls.has(k.callId)
        seenCalls.add(k.callId)
        return known
      }
      if (k?.kind === 'result') {
        const known = this.#results.has(k.callId) || seenResults.has(k.callId)
        seenResults.add(k.callId)
        return known
      }
      if (inputs.length === 0) return false
      const key = itemKey(item)
      const i = key === undefined ? -1 : inputs.indexOf(key)
      if (i === -1) return false
      inputs.splice(i, 1)
      return true
    }
    return { placeOnly, commit: () => void (this.#inputs = inputs) }
  }
}
