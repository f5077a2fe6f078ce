import type { ModelMessage } from 'ai'
import { expect } from 'vitest'

/** Balanced for a provider: each call answered exactly once, right after its message; no result without its call. */
export function expectBalanced(messages: readonly ModelMessage[]): void {
  const open = new Set<string>()
  const seen = new Set<string>()
  for (const m of messages) {
    if (m.role === 'tool') {
      for (const p of m.content) {
        if (p.type !== 'tool-result') continue
        expect(open.has(p.toolCallId), `result ${p.toolCallId} without an open call`).toBe(true)
        open.delete(p.toolCallId)
      }
      continue
    }
    expect([...open], 'calls left unanswered before the next message').toEqual([])
    if (m.role === 'assistant' && Array.isArray(m.content)) {
      for (const p of m.content) {
        if (p.type !== 'tool-call') continue
        expect(seen.has(p.toolCallId)).toBe(false)
        seen.add(p.toolCallId)
        open.add(p.toolCallId)
      }
    }
  }
  expect([...open]).toEqual([])
}
