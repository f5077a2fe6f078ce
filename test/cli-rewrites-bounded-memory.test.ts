import { mkdtemp, open, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { writeBigOpenTurn } from './helpers/big-log.js'
import { runCliWithHeap } from './helpers/run-cli.js'

// The operator's rewrites (§16) of a log that is one long open turn, in a process whose whole
// heap is a third of the log: `migrate` (dry run and real) and `redact` (dry run and real) plan
// the repair of the torn tail and the open turn's closers from one pass that keeps no event
// (an OpenTurnTracker follows the turn), so none runs out of memory. Keeping the open turn's
// events, as they did, held the whole log.

const HEAP_MB = 64
const LOG_BYTES = 200 * 1024 * 1024

let root: string
let open1: { events: number; tornBytes: number; tornAt: number }
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'spj-cli-rewrites-big-'))
  open1 = await writeBigOpenTurn(root, 'huge-open', LOG_BYTES)
}, 120_000)
afterAll(() => rm(root, { recursive: true, force: true }))

/** The last `n` lines of a file (its last 64 KiB read). */
async function lastLines(path: string, n: number): Promise<string[]> {
  const h = await open(path, 'r')
  try {
    const { size } = await h.stat()
    const buf = Buffer.alloc(Math.min(size, 64 * 1024))
    await h.read(buf, 0, buf.length, size - buf.length)
    return buf.toString('utf8').split('\n').slice(-n - 1, -1)
  } finally {
    await h.close()
  }
}

test('migrate and redact of a log of one open turn three times the heap: the repair planned and made, the closers right', async () => {
  const path = join(root, '_no-cwd', 'huge-open.jsonl')
  const json = async (args: string[]) => {
    const { code, signal, stdout, stderr } = await runCliWithHeap(HEAP_MB, ['--root', root, ...args, '--json'])
    expect({ code, signal }, stderr).toEqual({ code: 0, signal: null })
    return JSON.parse(stdout)
  }
  // redact, dry run: the call id matches twice (the call and the closer that answers it)
  const dryRedact = await json(['redact', 'huge-open', '--pattern', 'never-answered', '--dry-run'])
  expect(dryRedact.redact).toEqual([expect.objectContaining({ id: 'huge-open', status: 'would-do', matches: 2, seqs: [open1.events - 1, open1.events] })])

  // migrate, dry run: what a load would cut and write
  const dry = await json(['migrate', 'huge-open', '--dry-run'])
  expect(dry.migrate).toEqual([expect.objectContaining({ id: 'huge-open', status: 'would-do', events: open1.events + 3 })])

  // migrate: the torn tail cut, the three closers sealed after the last event
  const done = await json(['migrate', 'huge-open'])
  expect(done.migrate).toEqual([expect.objectContaining({ id: 'huge-open', status: 'done', events: open1.events + 3, fromVersion: 0 })])
  const closers = (await lastLines(path, 3)).map((l) => JSON.parse(l))
  expect(closers.map((c) => [c.seq, c.type, c.crc !== undefined])).toEqual([
    [open1.events, 'tool/result', true],
    [open1.events + 1, 'step/end', true],
    [open1.events + 2, 'turn/end', true],
  ])
  expect(closers[0].data).toMatchObject({ callId: 'never-answered', isError: true })

  // redact: the id replaced in the call and in its closer; the record appended
  const redacted = await json(['redact', 'huge-open', '--pattern', 'never-answered'])
  expect(redacted.redact).toEqual([expect.objectContaining({ id: 'huge-open', status: 'done', matches: 2, seqs: [open1.events - 1, open1.events] })])
  const tail = (await lastLines(path, 4)).map((l) => JSON.parse(l))
  expect(tail.map((e) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end', 'log/redacted'])
  expect(tail[0].data.callId).toBe('[REDACTED]')
  expect((await readFile(path, 'utf8')).includes('never-answered')).toBe(false)
}, 300_000)
