import { once } from 'node:events'
import { appendFile, mkdtemp, rm } from 'node:fs/promises'
import { createWriteStream } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { writeBigLog } from './helpers/big-log.js'
import { runCliWithHeap } from './helpers/run-cli.js'

// §15.5: `verify` checks every log of a root in one pass over each that keeps no event. Logs
// three times the size of the process's whole heap limit are checked without running out of
// memory: one of complete turns (ok), and one whose single turn, open to the end, spans the
// whole log and ends in a torn line (repairable: the cut and the closers a load would write).
// Over `inspect`, which holds every event of a log at once, this runs out of heap.

const HEAP_MB = 64
const LOG_BYTES = 200 * 1024 * 1024

/**
 * A version-0 log of one turn, open to the end: tool calls each answered by a `bytesPerResult`
 * result, then a step with one call never answered, then a torn line. Written line by line.
 */
async function writeBigOpenTurn(root: string, id: string, bytes: number, bytesPerResult = 20_000): Promise<{ events: number; tornBytes: number; tornAt: number }> {
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

let root: string
let ok: { events: number }
let open: { events: number; tornBytes: number; tornAt: number }
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'spj-cli-verify-big-'))
  ok = await writeBigLog(root, 'huge-ok', LOG_BYTES)
  open = await writeBigOpenTurn(root, 'huge-open', LOG_BYTES)
}, 120_000)
afterAll(() => rm(root, { recursive: true, force: true }))

describe(`verify of a root with two ${LOG_BYTES / 1024 / 1024} MiB logs and a ${HEAP_MB} MiB heap`, () => {
  test('each verdict is what inspect would say; the CLI exits 0', async () => {
    const { code, signal, stdout, stderr } = await runCliWithHeap(HEAP_MB, ['--root', root, 'verify', '--json'])
    expect({ code, signal }, stderr).toEqual({ code: 0, signal: null })
    const report = JSON.parse(stdout)
    expect(report.summary).toEqual({ logs: 2, ok: 1, repairable: 1, corrupt: 0, unsupported: 0, tempFiles: 0 })
    expect(report.logs).toEqual([
      {
        status: 'repairable',
        id: 'huge-open',
        path: join(root, '_no-cwd', 'huge-open.jsonl'),
        events: open.events,
        cutBytes: open.tornBytes,
        cutLines: 1,
        truncateAt: open.tornAt,
        reason: 'torn tail: the last line has no newline',
        closers: 3, // the unanswered call's result, the open step's end, the turn's end
        droppedTurnEnds: 0,
      },
      { status: 'ok', id: 'huge-ok', path: join(root, '_no-cwd', 'huge-ok.jsonl'), events: ok.events },
    ])
  }, 300_000)
})
