import type { SessionEvent } from '../index.js'

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

function clip(s: string, max: number): string {
  const flat = s.replace(/\s+/g, ' ')
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/** A message as LangChain serializes it (`{lc: 1, type: 'constructor', id: [..., 'AIMessage'], kwargs}`), in one line. */
function messageLine(v: Obj): string | undefined {
  if (v.lc !== 1 || v.type !== 'constructor' || !Array.isArray(v.id) || !isObj(v.kwargs)) return undefined
  const name = String(v.id.at(-1) ?? '')
  if (!name.endsWith('Message') && !name.endsWith('MessageChunk')) return undefined
  const role = name.replace(/Message(Chunk)?$/, '').toLowerCase() || 'message'
  const k = v.kwargs
  const content = typeof k.content === 'string' ? k.content : JSON.stringify(k.content ?? '')
  const calls = Array.isArray(k.tool_calls)
    ? k.tool_calls.filter(isObj).map((c) => `→ ${String(c.name)}(${JSON.stringify(c.args ?? {})})`)
    : []
  return `${role}: ${[content, ...calls].filter(Boolean).join(' ')}`
}

/** A stored value, readable: JSON with LangChain messages shown as `role: text`, bytes by their size. */
function valueText(typed: unknown, max = 90): string {
  if (!isObj(typed)) return '?'
  if (typeof typed.base64 === 'string') {
    const padding = typed.base64.endsWith('==') ? 2 : typed.base64.endsWith('=') ? 1 : 0
    return `<${String(typed.type)}, ${Math.floor((typed.base64.length * 3) / 4) - padding} bytes>`
  }
  if (typeof typed.text !== 'string') return '?'
  if (typed.type !== 'json') return clip(typed.text, max)
  let parsed: unknown
  try {
    parsed = JSON.parse(typed.text)
  } catch {
    return clip(typed.text, max)
  }
  const show = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(show).join(', ')}]`
    if (isObj(v)) return messageLine(v) ?? JSON.stringify(v)
    return JSON.stringify(v) ?? String(v)
  }
  return clip(show(parsed), max)
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
