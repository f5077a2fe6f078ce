import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { contentIs, contentLine, contentText, jsonLine, oneLine, printable } from '../src/cli/render.js'
import { renderLangGraphEvent } from '../src/cli/render-langgraph.js'
import { renderClaudeAgentSdkEvent } from '../src/cli/render-claude-agent-sdk.js'
import type { SessionEvent } from '../src/index.js'

// The one-line views build their line from the start of a value (src/cli/bounded-text.ts). The
// line must be the one they printed when they turned the whole value into text first: these
// are those whole-value versions, checked against on values of every shape, with whitespace and
// control characters around the cut and long runs crossing the pieces the new code reads in.

const oldOneLine = (value: unknown, max = 100): string => {
  const s = typeof value === 'string' ? value : JSON.stringify(value)
  const flat = printable((s ?? '').replace(/\s+/g, ' '))
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}
const oldClip = (s: string, max: number) => {
  const flat = s.replace(/\s+/g, ' ')
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}
type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
function oldMessageLine(v: Obj): string | undefined {
  if (v.lc !== 1 || v.type !== 'constructor' || !Array.isArray(v.id) || !isObj(v.kwargs)) return undefined
  const name = String(v.id.at(-1) ?? '')
  if (!name.endsWith('Message') && !name.endsWith('MessageChunk')) return undefined
  const role = name.replace(/Message(Chunk)?$/, '').toLowerCase() || 'message'
  const k = v.kwargs
  const content = typeof k.content === 'string' ? k.content : JSON.stringify(k.content ?? '')
  const calls = Array.isArray(k.tool_calls) ? k.tool_calls.filter(isObj).map((c) => `→ ${String(c.name)}(${JSON.stringify(c.args ?? {})})`) : []
  return `${role}: ${[content, ...calls].filter(Boolean).join(' ')}`
}
function oldJsonValueText(text: string, max = 90): string {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return oldClip(text, max)
  }
  const show = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(show).join(', ')}]`
    if (isObj(v)) return oldMessageLine(v) ?? JSON.stringify(v)
    return JSON.stringify(v) ?? String(v)
  }
  return oldClip(show(parsed), max)
}
const oldFlat = (value: unknown, max: number) => {
  const s = typeof value === 'string' ? value : (JSON.stringify(value) ?? '')
  const one = s.replace(/\s+/g, ' ').trim()
  return one.length > max ? `${one.slice(0, max - 1)}…` : one
}

const piece = fc.constantFrom('a', 'bc', ' ', '  ', '\n', '\t', '\r', '\u000b', '\u001b', '\u00a0', '\u2028', '\u202e', '"', '\\', 'é', '\ud83d\ude00', '\ud83d', '[', ']', '{', ',')
const text = fc.oneof(
  fc.array(piece, { maxLength: 40 }).map((p) => p.join('')),
  // Long runs: across the 1,024-character pieces, and whitespace longer than the line.
  fc.tuple(fc.array(piece, { minLength: 1, maxLength: 6 }), fc.integer({ min: 1, max: 700 }), fc.array(piece, { maxLength: 6 })).map(([a, n, b]) => a.join('').repeat(n) + b.join('')),
)
const message = fc.record({
  lc: fc.constant(1),
  type: fc.constant('constructor'),
  id: fc.constantFrom(['langchain_core', 'messages', 'HumanMessage'], ['langchain_core', 'messages', 'AIMessageChunk'], ['x', 'Other']),
  kwargs: fc.record({ content: fc.oneof(text, fc.constant(''), fc.jsonValue({ maxDepth: 2 })), tool_calls: fc.option(fc.array(fc.record({ name: text, args: fc.jsonValue({ maxDepth: 2 }) }), { maxLength: 2 }), { nil: undefined }) }, { requiredKeys: ['content'] }),
})
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, text, fc.double(), fc.boolean(), fc.constant(null), message, fc.array(tie('v'), { maxLength: 4 }), fc.dictionary(text, tie('v'), { maxKeys: 3 })),
})).v as fc.Arbitrary<unknown>
const max = fc.constantFrom(1, 2, 40, 80, 100, 200)
const block = fc.oneof(
  fc.record({ type: fc.constant('text'), text }),
  fc.record({ type: fc.constantFrom('reasoning', 'tool-call', 'image', 'x\u001b') }),
  value,
)
const content = fc.oneof(text, fc.array(block, { maxLength: 5 }), value)

describe('the one-line views print the line they printed when they read the whole value', () => {
  test('oneLine and jsonLine', () => {
    fc.assert(
      fc.property(value, max, (v, n) => {
        expect(oneLine(v, n)).toBe(oldOneLine(v, n))
        expect(jsonLine(v, n)).toBe(oldOneLine(JSON.stringify(v), n))
      }),
      { numRuns: 500 },
    )
    expect([oneLine(undefined), jsonLine(undefined), oneLine({ a: undefined, b: [undefined, () => 1], d: new Date(0) })]).toEqual(['', '', '{"b":[null,null],"d":"1970-01-01T00:00:00.000Z"}'])
    // A lone high surrogate at a piece's end, a pair right after it: the pair stays whole.
    for (const at of [1021, 1022, 1023, 1024, 1025]) {
      const v = { q: `${' '.repeat(at)}\ud83d\ud83d\ude00` }
      expect(oneLine(v, 80)).toBe(oldOneLine(v, 80))
    }
  })

  test('a message content, and whether it is a given text', () => {
    fc.assert(
      fc.property(content, max, (c, n) => {
        expect(contentLine(c, n)).toBe(oldOneLine(contentText(c), n))
        const whole = contentText(c)
        expect(contentIs(c, whole)).toBe(true)
        expect(contentIs(c, `${whole}x`)).toBe(false)
        if (whole.length > 0) expect(contentIs(c, whole.slice(0, -1))).toBe(false)
      }),
      { numRuns: 500 },
    )
  })

  test('a LangGraph channel value (JSON text, spaced or not, cut or not) and a Claude tool call and result', () => {
    const typedText = fc.tuple(value, fc.constantFrom(undefined, 1, '\t'), fc.integer({ min: 0, max: 3 })).map(([v, indent, cut]) => {
      const json = JSON.stringify(v, null, indent) ?? 'null'
      return cut === 0 ? json.slice(0, Math.floor(json.length / 2)) : cut === 1 ? ` ${json}\n` : json
    })
    fc.assert(
      fc.property(typedText, value, fc.oneof(text, fc.array(block, { maxLength: 3 })), (t, input, result) => {
        const e = { seq: 0, type: 'langgraph/writes', time: 0, data: { checkpoint: 'c', task: 't', writes: [{ channel: 'x', value: { type: 'json', text: t } }, { channel: 'y', value: { type: 'other', text: t } }] } } as SessionEvent
        expect(renderLangGraphEvent(e)!.text.split('\n').slice(1)).toEqual([`    x = ${oldJsonValueText(t)}`, `    y = ${oldClip(t, 90)}`])
        const entry = { seq: 0, type: 'claude/entry', time: 0, claudeEntry: { type: 'assistant', message: { content: [{ type: 'tool_use', id: 'i', name: 'n', input }, { type: 'tool_result', tool_use_id: 'i', content: result }] } } } as unknown as SessionEvent
        const resultText = typeof result === 'string' ? result : result.map((b) => (isObj(b) && b.type === 'text' ? String(b.text ?? '') : `[${String((isObj(b) ? b.type : undefined) ?? '?')}]`)).join('\n')
        expect(renderClaudeAgentSdkEvent(entry)!.text).toBe(`assistant\n  → n ${oldFlat(JSON.stringify(input ?? null), 80)} [i]\n  ← [i] ${oldFlat(resultText, 100)}`)
      }),
      { numRuns: 500 },
    )
  })
})
