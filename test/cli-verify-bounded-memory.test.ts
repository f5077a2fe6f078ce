import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { writeBigLog, writeBigOpenTurn } from './helpers/big-log.js'
import { runCliWithHeap } from './helpers/run-cli.js'

// §15.5: `verify` checks every log of a root in one pass over each that keeps no event. Logs
// three times the size of the process's whole heap limit are checked without running out of
// memory: one of complete turns (ok), and one whose single turn, open to the end, spans the
// whole log and ends in a torn line (repairable: the cut and the closers a load would write).
// Over `inspect`, which holds every event of a log at once, this runs out of heap.

const HEAP_MB = 64
const LOG_BYTES = 200 * 1024 * 1024

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
