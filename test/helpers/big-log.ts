import { once } from 'node:events'
import { createWriteStream } from 'node:fs'
import { mkdir } from 'node:fs/promises'
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
