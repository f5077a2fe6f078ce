import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { appendFile, mkdir } from 'node:fs/promises'
import { join } from 'node:path'

/**
 * Writes a version-0 log of complete turns (a user message, a tool call, a `bytesPerResult`
 * tool result, an answer) under `<root>/_no-cwd/<id>.jsonl` until it holds at least `bytes`
 * bytes; returns its path, its size and how many events it holds. Written by hand, line by line,
 * so that making a log bigger than a test's heap costs no memory.
 */
export async function writeBigLog(root: string, id: string, bytes: number, bytesPerResult = 2_000): Promise<{ path: string; size: number; events: number }> {
  const dir = join(root, '_no-cwd')
  await mkdir(dir, { recursive: true })
  const path = join(dir, `${id}.jsonl`)
  const out = createWriteStream(path)
  let size = 0
  let seq = 0
  let turn = 0
  const filler = 'x'.repeat(bytesPerResult)
  const write = async (line: string) => {
    size += Buffer.byteLength(line)
    if (!out.write(line)) await once(out, 'drain')
  }
  await write(`{"type":"session","version":0,"id":"${id}","createdAt":1000,"delegationDepth":0}\n`)
  while (size < bytes) {
    turn++
    const t = 1_000 + seq
    const callId = `call-${turn}`
    const events = [
      { type: 'turn/start', data: { turn } },
      { type: 'user/message', data: { content: `question ${turn}` } },
      { type: 'assistant/message', data: { turn, step: 0, content: [{ type: 'tool-call', callId, name: 'read', arguments: { n: turn } }] } },
      { type: 'tool/result', data: { turn, step: 0, callId, content: [{ type: 'text', text: `${turn} ${filler}` }] } },
      { type: 'assistant/message', data: { turn, step: 1, content: [{ type: 'text', text: `answer ${turn}` }] } },
      { type: 'turn/end', data: { turn, reason: { kind: 'completed' } } },
    ]
    for (const e of events) await write(`${JSON.stringify({ seq: seq++, type: e.type, time: t, data: e.data })}\n`)
  }
  out.end()
  await once(out, 'close')
  return { path, size, events: seq }
}

/**
 * A version-0 log of one turn, open to the end: tool calls each answered by a `bytesPerResult`
 * result, then a step with one call never answered, then a torn line. Written line by line.
 */
export async function writeBigOpenTurn(root: string, id: string, bytes: number, bytesPerResult = 20_000): Promise<{ events: number; tornBytes: number; tornAt: number }> {
  await mkdir(join(root, '_no-cwd'), { recursive: true })
  const path = join(root, '_no-cwd', `${id}.jsonl`)
  const out = createWriteStream(path)
  let size = 0
  let seq = 0
  const filler = 'y'.repeat(bytesPerResult)
  const write = async (e: { type: string; data: unknown }) => {
    const line = `${JSON.stringify({ seq: seq++, type: e.type, time: 5_000 + seq, data: e.data })}\n`
    size += Buffer.byteLength(line)
    if (!out.write(line)) await once(out, 'drain')
  }
  const header = `{"type":"session","version":0,"id":"${id}","createdAt":1000,"delegationDepth":0}\n`
  size += header.length
  out.write(header)
  await write({ type: 'turn/start', data: { turn: 1 } })
  for (let step = 0; size < bytes; step++) {
    const callId = `c-${step}`
    await write({ type: 'assistant/message', data: { turn: 1, step, content: [{ type: 'tool-call', callId, name: 'read', arguments: {} }] } })
    await write({ type: 'tool/result', data: { turn: 1, step, callId, content: [{ type: 'text', text: filler }] } })
  }
  await write({ type: 'step/start', data: { turn: 1, step: 'last' } })
  await write({ type: 'tool/call', data: { turn: 1, step: 'last', callId: 'never-answered', name: 'bash' } })
  out.end()
  await once(out, 'close')
  const torn = '{"seq":'
  await appendFile(path, torn)
  return { events: seq, tornBytes: torn.length, tornAt: size }
}
