import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { mkdir, mkdtemp, open, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { runCliWithHeap } from './helpers/run-cli.js'

// §15.5: one line of up to 64 MiB is read with peak memory above baseline at most 4× its size,
// and `show`, `export` and `tail` stream. Where they print a value cut to one line (a LangGraph
// channel, a tool result, an unknown event's data, a Claude tool call), they must build that
// line from the start of the value, not turn all of it into text first: `show` of a checkpoint
// of 40 MiB of messages took 829 MB when it did. Each log here holds one value of ~40 MiB and
// is shown under a heap of 128 MiB (it needed more than 300).

const HEAP_MB = 128
const MiB = 1024 * 1024

let root: string
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'spj-cli-huge-value-'))
  await mkdir(join(root, '_no-cwd'))
}, 60_000)
afterAll(() => rm(root, { recursive: true, force: true }))

/** Writes a version-0 log by hand (`extra` are top-level fields besides seq, type, time, data). */
async function writeLog(id: string, events: { type: string; data?: unknown; extra?: Record<string, unknown> }[]): Promise<void> {
  const out = createWriteStream(join(root, '_no-cwd', `${id}.jsonl`))
  out.write(`{"type":"session","version":0,"id":"${id}","createdAt":1000,"delegationDepth":0}\n`)
  let seq = 0
  for (const e of events) {
    if (!out.write(`${JSON.stringify({ seq, type: e.type, time: 2_000 + seq, ...(e.data === undefined ? {} : { data: e.data }), ...e.extra })}\n`)) await once(out, 'drain')
    seq++
  }
  out.end()
  await once(out, 'close')
}

/** Runs the CLI under the heap limit, its stdout into a file; returns its exit and that output. */
async function run(args: string[]): Promise<{ code: number | null; signal: string | null; stderr: string; stdout: string }> {
  const file = join(root, `out-${args.join('-').replace(/[^\w-]/g, '_')}.txt`)
  const out = await open(file, 'w')
  try {
    const { code, signal, stderr } = await runCliWithHeap(HEAP_MB, ['--root', root, ...args], out.fd)
    return { code, signal, stderr, stdout: await readFile(file, 'utf8') }
  } finally {
    await out.close()
  }
}

/** About 40 MiB of LangChain messages, as the langgraph adapter's serde writes a channel. */
function messagesText(): string {
  const parts: string[] = []
  let bytes = 0
  for (let i = 0; bytes < 40 * MiB; i++) {
    const part = JSON.stringify({ lc: 1, type: 'constructor', id: ['langchain_core', 'messages', 'HumanMessage'], kwargs: { content: `${'hello world '.repeat(50)}${i}` } })
    parts.push(part)
    bytes += part.length + 1
  }
  return `[${parts.join(',')}]`
}

const turn = (events: { type: string; data?: unknown; extra?: Record<string, unknown> }[]) => [{ type: 'turn/start', data: { turn: 1 } }, ...events, { type: 'turn/end', data: { turn: 1, reason: { kind: 'completed' } } }]

// Whitespace of every kind (folded to one space), a carriage return and an escape (shown escaped),
// and a run of whitespace megabytes long before the end.
const BIG = `${'a \n\t b\r\u001b\u00a0'.repeat(2 * MiB)}${' '.repeat(4 * MiB)}end`
// What the views print of it: a result's text made printable (\r, \x1b) and then folded; the
// JSON of arguments and data (\n, \t, \r, \u001b escaped by JSON) folded.
const RESULT = `${'a b\\r\\x1b '.repeat(9)}a b\\r\\x1b…`
const CALL = `{"path":"${'a \\n\\t b\\r\\u001b '.repeat(4)}a …`
// The Claude renderer cuts the result's text to 100 characters (its \r folded as whitespace), then
// the view makes it printable.
const CLAUDE_RESULT = `${'a b \\x1b '.repeat(16)}a b…`
const BLOB = `{"blob":"${'a \\n\\t b\\r\\u001b '.repeat(4)}a …`

const HELLO = 'hello world '.repeat(6) // what 90 characters of the messages' start hold

describe(`a value of ~40 MiB, shown cut to a line, under a ${HEAP_MB} MiB heap`, () => {
  test('show and tail of a LangGraph checkpoint and its writes of 40 MiB of messages', async () => {
    const text = messagesText()
    const messages = { type: 'json', text }
    await writeLog(
      'graph',
      turn([
        { type: 'langgraph/checkpoint', data: { id: 'cp1', metadata: { step: 0, source: 'loop' }, values: [{ channel: 'messages', version: 1, value: messages }, { channel: 'n', version: 1, value: { type: 'json', text: '0' } }] } },
        { type: 'langgraph/writes', data: { checkpoint: 'cp1', task: 't1', path: '~__pregel_pull, agent', writes: [{ channel: 'messages', value: messages }] } },
      ]),
    )
    const line = `[human: ${HELLO}hello wor…`
    const show = await run(['show', 'graph'])
    expect({ code: show.code, signal: show.signal }, show.stderr).toEqual({ code: 0, signal: null })
    expect(show.stdout.split('\n').slice(3)).toEqual([
      '── turn 1 ──',
      '◆ checkpoint cp1  step 0 (loop)',
      `    messages @1 = ${line}`,
      '    n @1 = 0',
      '  ↳ agent wrote to cp1',
      `    messages = ${line}`,
      '── end of turn 1 (completed)',
      '',
    ])
    const tail = await run(['tail', 'graph', '-n', '2'])
    expect({ code: tail.code, signal: tail.signal }, tail.stderr).toEqual({ code: 0, signal: null })
    expect(tail.stdout).toBe(`#2  ↳ agent wrote to cp1 messages = ${line}\n#3 ── end of turn 1 (completed)\n`)
    const md = await run(['export', 'graph', '--format', 'md'])
    expect({ code: md.code, signal: md.signal }, md.stderr).toEqual({ code: 0, signal: null })
    expect(md.stdout).toContain(`**◆ checkpoint cp1  step 0 (loop)**\n- \`messages @1 = ${line}\`\n- \`n @1 = 0\`\n\n**↳ agent wrote to cp1**\n- \`messages = ${line}\`\n`)
  }, 120_000)

  test('show of a Claude Agent SDK entry whose tool call and result hold 40 MiB', async () => {
    await writeLog('claude', [
      { type: 'claude/entry', extra: { claudeEntry: { type: 'assistant', message: { content: [{ type: 'tool_use', id: 't1', name: 'Read', input: { path: BIG } }] } } } },
      { type: 'claude/entry', extra: { claudeEntry: { type: 'user', message: { content: [{ type: 'tool_result', tool_use_id: 't1', content: BIG }] } } } },
    ])
    const show = await run(['show', 'claude'])
    expect({ code: show.code, signal: show.signal }, show.stderr).toEqual({ code: 0, signal: null })
    expect(show.stdout.split('\n').slice(2)).toEqual(['assistant', `  → Read ${CALL} [t1]`, 'user', `  ← [t1] ${CLAUDE_RESULT}`, ''])
  }, 120_000)

  test('show and tail of a tool result of 40 MiB', async () => {
    await writeLog(
      'result',
      turn([
        { type: 'assistant/message', data: { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'c1', name: 'read', arguments: {} }] } },
        { type: 'tool/result', data: { turn: 1, step: 0, callId: 'c1', content: [{ type: 'text', text: BIG }] } },
      ]),
    )
    const show = await run(['show', 'result'])
    expect({ code: show.code, signal: show.signal }, show.stderr).toEqual({ code: 0, signal: null })
    expect(show.stdout.split('\n').slice(3)).toEqual(['── turn 1 ──', 'assistant', '  → read {} [c1]', `  ← [c1] ${RESULT}`, '── end of turn 1 (completed)', ''])
    const tail = await run(['tail', 'result', '-n', '2'])
    expect({ code: tail.code, signal: tail.signal }, tail.stderr).toEqual({ code: 0, signal: null })
    expect(tail.stdout).toBe(`#2 ← [c1] ${RESULT}\n#3 ── end of turn 1 (completed)\n`)
  }, 120_000)

  test('show of tool call arguments and of an unknown event of 40 MiB', async () => {
    await writeLog(
      'other',
      turn([
        { type: 'assistant/message', data: { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'c1', name: 'read', arguments: { path: BIG } }] } },
        { type: 'x/blob', data: { blob: BIG } },
      ]),
    )
    const show = await run(['show', 'other'])
    expect({ code: show.code, signal: show.signal }, show.stderr).toEqual({ code: 0, signal: null })
    expect(show.stdout.split('\n').slice(3)).toEqual(['── turn 1 ──', 'assistant', `  → read ${CALL} [c1]`, '    ⚠ no result recorded', `(x/blob) ${BLOB}`, '── end of turn 1 (completed)', ''])
  }, 120_000)
})
