import type { SessionEvent } from '../index.js'
import { ellipsis, feedJson, feedString, FoldedLine, type Sink } from './bounded-text.js'

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

/** `s` on one line (whitespace runs folded), at most `max` characters; only its start is read. */
function clip(s: string, max: number): string {
  const line = new FoldedLine(max)
  feedString(s, line.add)
  return ellipsis(line.text, max)
}

/** The role of a message as LangChain serializes it (`{lc: 1, type: 'constructor', id: [..., 'AIMessage'], kwargs}`), else undefined. */
function messageRole(v: Obj): string | undefined {
  if (v.lc !== 1 || v.type !== 'constructor' || !Array.isArray(v.id) || !isObj(v.kwargs)) return undefined
  const name = String(v.id.at(-1) ?? '')
  if (!name.endsWith('Message') && !name.endsWith('MessageChunk')) return undefined
  return name.replace(/Message(Chunk)?$/, '').toLowerCase() || 'message'
}

/**
 * Feeds `sink` a parsed value as `valueText` shows it, until the sink is full: JSON, with a
 * LangChain message in one line (`role: text → tool(args)`). True once full.
 */
function feedShown(v: unknown, sink: Sink): boolean {
  if (Array.isArray(v)) {
    if (sink('[')) return true
    for (let i = 0; i < v.length; i++) if ((i > 0 && sink(', ')) || feedShown(v[i], sink)) return true
    return sink(']')
  }
  const role = isObj(v) ? messageRole(v) : undefined
  if (role === undefined) {
    let full = false
    feedJson(v, (piece) => (full = sink(piece)))
    return full
  }
  const k = (v as Obj & { kwargs: Obj }).kwargs
  if (sink(`${role}: `)) return true
  let first = true
  if (typeof k.content === 'string') {
    if (k.content !== '') {
      if (feedString(k.content, sink)) return true
      first = false
    }
  } else {
    let full = false
    feedJson(k.content ?? '', (piece) => (full = sink(piece)))
    if (full) return true
    first = false
  }
  for (const c of Array.isArray(k.tool_calls) ? k.tool_calls.filter(isObj) : []) {
    if (sink(first ? '→ ' : ' → ') || feedString(String(c.name), sink) || sink('(')) return true
    let full = false
    feedJson(c.args ?? {}, (piece) => (full = sink(piece)))
    if (full || sink(')')) return true
    first = false
  }
  return false
}

const isJsonSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09
function skipSpace(t: string, i: number): number {
  while (i < t.length && isJsonSpace(t.charCodeAt(i))) i++
  return i
}

/** Where the string literal opening at `i` ends (after its quote), or -1. */
function stringEnd(t: string, i: number): number {
  for (let from = i + 1; ; ) {
    const q = t.indexOf('"', from)
    if (q < 0) return -1
    let slashes = 0
    while (t.charCodeAt(q - 1 - slashes) === 0x5c) slashes++
    if (slashes % 2 === 0) return q + 1
    from = q + 1
  }
}

/** Where the JSON value starting at `i` ends, by its brackets and quotes (JSON.parse then checks it), or -1. */
function valueEnd(t: string, i: number): number {
  const c = t.charCodeAt(i)
  if (c === 0x22) return stringEnd(t, i)
  if (c === 0x5b || c === 0x7b) {
    let depth = 0
    for (let j = i; j < t.length; ) {
      const ch = t.charCodeAt(j)
      if (ch === 0x22) {
        j = stringEnd(t, j)
        if (j < 0) return -1
        continue
      }
      if (ch === 0x5b || ch === 0x7b) depth++
      else if ((ch === 0x5d || ch === 0x7d) && --depth === 0) return j + 1
      j++
    }
    return -1
  }
  let j = i
  while (j < t.length && !isJsonSpace(t.charCodeAt(j)) && t[j] !== ',' && t[j] !== ']' && t[j] !== '}') j++
  return j > i ? j : -1
}

/**
 * `show(JSON.parse(text))` fed to `sink`, or false when `text` is not JSON. A text that is an array
 * (a channel of messages) is parsed one element at a time, each dropped once shown: a checkpoint
 * of 40 MiB of messages is never held parsed whole. Every element is still parsed, so an invalid
 * text is found wherever its fault is (and shown as text, as before).
 */
function feedParsed(text: string, sink: Sink): boolean {
  let i = skipSpace(text, 0)
  if (text[i] !== '[') {
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return false
    }
    feedShown(parsed, sink)
    return true
  }
  let full = sink('[')
  i = skipSpace(text, i + 1)
  if (text[i] === ']') {
    if (!full) sink(']')
    return skipSpace(text, i + 1) === text.length
  }
  for (let n = 0; ; n++) {
    const end = valueEnd(text, i)
    if (end < 0) return false
    let item: unknown
    try {
      item = JSON.parse(text.slice(i, end))
    } catch {
      return false
    }
    if (!full) full = (n > 0 && sink(', ')) || feedShown(item, sink)
    i = skipSpace(text, end)
    if (text[i] === ',') i = skipSpace(text, i + 1)
    else if (text[i] === ']') {
      if (!full) sink(']')
      return skipSpace(text, i + 1) === text.length
    } else return false
  }
}

/** A stored value, readable: JSON with LangChain messages shown as `role: text`, bytes by their size; at most `max` characters. */
function valueText(typed: unknown, max = 90): string {
  if (!isObj(typed)) return '?'
  if (typeof typed.base64 === 'string') {
    const padding = typed.base64.endsWith('==') ? 2 : typed.base64.endsWith('=') ? 1 : 0
    return `<${String(typed.type)}, ${Math.floor((typed.base64.length * 3) / 4) - padding} bytes>`
  }
  if (typeof typed.text !== 'string') return '?'
  if (typed.type !== 'json') return clip(typed.text, max)
  const line = new FoldedLine(max)
  return feedParsed(typed.text, line.add) ? ellipsis(line.text, max) : clip(typed.text, max)
}

/** LangGraph's own channels (start, branches, tasks): listed by name only. */
const isInternal = (channel: string) => channel.startsWith('__') || channel.startsWith('branch:')

const SPECIAL_WRITES: Record<string, string> = { __interrupt__: 'interrupt', __resume__: 'resume', __error__: 'error', __scheduled__: 'scheduled' }

/** The node a task path names (`~__pregel_pull, agent` → `agent`), else the task id. */
function taskName(d: Obj): string {
  const path = typeof d.path === 'string' ? d.path : ''
  const node = path.split(',').map((s) => s.trim()).at(-1)
  return node && !node.startsWith('~') ? node : String(d.task ?? '?')
}

function checkpointLines(d: Obj): string[] {
  const meta = isObj(d.metadata) ? d.metadata : {}
  const head = [
    `checkpoint ${String(d.id)}`,
    `step ${String(meta.step ?? '?')} (${String(meta.source ?? '?')})`,
    ...(typeof d.ns === 'string' && d.ns !== '' ? [`ns ${d.ns}`] : []),
    ...(typeof d.parent === 'string' ? [`after ${d.parent}`] : []),
  ].join('  ')
  const lines = [`◆ ${head}`]
  const internal: string[] = []
  for (const v of Array.isArray(d.values) ? d.values.filter(isObj) : []) {
    const channel = String(v.channel)
    if (isInternal(channel)) internal.push(channel)
    else lines.push(`    ${channel} @${String(v.version)} = ${v.value === undefined ? '(empty)' : valueText(v.value)}`)
  }
  if (internal.length > 0) lines.push(`    (also ${internal.join(', ')})`)
  return lines
}

function writesLines(d: Obj): string[] {
  const writes = Array.isArray(d.writes) ? d.writes.filter(isObj) : []
  const lines = [`  ↳ ${taskName(d)} wrote to ${String(d.checkpoint)}${typeof d.ns === 'string' && d.ns !== '' ? ` (ns ${d.ns})` : ''}`]
  const internal: string[] = []
  for (const w of writes) {
    const channel = String(w.channel)
    const special = SPECIAL_WRITES[channel]
    if (special) lines.push(`    ${special}: ${valueText(w.value)}`)
    else if (isInternal(channel)) internal.push(channel)
    else lines.push(`    ${channel} = ${valueText(w.value)}`)
  }
  if (internal.length > 0) lines.push(`    (also ${internal.join(', ')})`)
  return lines
}

/**
 * How `show` and `export --format md` print an event that the langgraph adapter writes and the 2.1
 * vocabulary does not cover: a line of text and a Markdown paragraph, or undefined for any other
 * event (the generic rendering then applies). Pure: it never imports the framework.
 */
export function renderLangGraphEvent(event: SessionEvent): { text: string; markdown: string } | undefined {
  const d = event.data
  if (!isObj(d)) return undefined
  let lines: string[]
  if (event.type === 'langgraph/checkpoint') lines = checkpointLines(d)
  else if (event.type === 'langgraph/writes') lines = writesLines(d)
  else return undefined
  const [first, ...rest] = lines
  // Each line on one line in Markdown too: a newline in a stored id or channel name must not start a block.
  const md = (l: string) => l.replace(/[\r\n]+/g, ' ').trim()
  const markdown = [`**${md(first!)}**`, ...rest.map((l) => `- \`${md(l).replace(/`/g, "'")}\``)].join('\n')
  return { text: lines.join('\n'), markdown }
}
