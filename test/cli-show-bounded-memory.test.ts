import { open, readFile, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { writeBigLog } from './helpers/big-log.js'
import { runCliWithHeap } from './helpers/run-cli.js'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'

// §15.5: `show` and `export` stream. A log three times the size of the process's whole heap
// limit is shown and exported without running out of memory, and a page of it (`show --last`)
// is read with a heap far smaller than the log.

const HEAP_MB = 64
const LOG_BYTES = 200 * 1024 * 1024

let root: string
let log: { path: string; size: number; events: number }
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'spj-cli-big-'))
  log = await writeBigLog(root, 'huge', LOG_BYTES)
}, 120_000)
afterAll(() => rm(root, { recursive: true, force: true }))

/** Runs the CLI with a heap limit, its stdout into a file (never into this process's memory). */
async function runTo(heapMb: number, args: string[], stdoutFile: string): Promise<{ code: number | null; signal: string | null; stderr: string }> {
  const out = await open(stdoutFile, 'w')
  try {
    const { code, signal, stderr } = await runCliWithHeap(heapMb, args, out.fd)
    return { code, signal, stderr }
  } finally {
    await out.close()
  }
}

/** The last `n` bytes of a file, as text. */
async function tailOf(path: string, n = 2_000): Promise<string> {
  const { size } = await stat(path)
  const h = await open(path, 'r')
  try {
    const buf = Buffer.alloc(Math.min(n, size))
    await h.read(buf, 0, buf.length, size - buf.length)
    return buf.toString('utf8')
  } finally {
    await h.close()
  }
}

const lastTurn = () => log.events / 6

describe(`show and export of a ${LOG_BYTES / 1024 / 1024} MiB log with a ${HEAP_MB} MiB heap`, () => {
  test('show: the whole transcript, to its last turn', async () => {
    const file = join(root, 'show.txt')
    const r = await runTo(HEAP_MB, ['--root', root, 'show', 'huge'], file)
    expect(r, r.stderr).toMatchObject({ code: 0, signal: null })
    expect((await readFile(file, { encoding: 'utf8', flag: 'r' }).then((s) => s.slice(0, 200))).split('\n')[0]).toBe('session huge')
    const end = await tailOf(file)
    expect(end).toContain(`user: question ${lastTurn()}\n`)
    expect(end.endsWith(`── end of turn ${lastTurn()} (completed)\n`)).toBe(true)
    expect((await stat(file)).size).toBeGreaterThan(lastTurn() * 100) // every turn printed (results cut to one line)
  }, 300_000)

  test('export --format md and --format json: the whole session, to the last event', async () => {
    const md = join(root, 'export.md')
    const r = await runTo(HEAP_MB, ['--root', root, 'export', 'huge', '--format', 'md', '--out', md], join(root, 'md.stdout'))
    expect(r, r.stderr).toMatchObject({ code: 0, signal: null })
    expect((await tailOf(md)).endsWith(`**Assistant:** answer ${lastTurn()}\n\n*Turn ended: completed*\n`)).toBe(true)
    const json = join(root, 'export.json')
    const j = await runTo(HEAP_MB, ['--root', root, 'export', 'huge', '--format', 'json', '--out', json], join(root, 'json.stdout'))
    expect(j, j.stderr).toMatchObject({ code: 0, signal: null })
    const end = await tailOf(json, 400)
    expect(end).toContain(`"seq": ${log.events - 1},`)
    expect(end.endsWith(`  ],\n  "firstSeq": 0,\n  "length": ${log.events}\n}\n`)).toBe(true)
  }, 300_000)

  test('show --last and show --from read a page with a 16 MiB heap', async () => {
    const file = join(root, 'last.txt')
    const r = await runTo(16, ['--root', root, 'show', 'huge', '--last', '6'], file)
    expect(r, r.stderr).toMatchObject({ code: 0, signal: null })
    const text = await readFile(file, 'utf8')
    expect(text).toContain(`showing seqs ${log.events - 6} to ${log.events - 1} of ${log.events} event(s)`)
    expect(text).toContain(`user: question ${lastTurn()}`)
    const mid = Math.floor(log.events / 12) * 6
    const m = await runTo(16, ['--root', root, 'show', 'huge', '--from', String(mid), '--to', String(mid + 2)], file)
    expect(m, m.stderr).toMatchObject({ code: 0, signal: null })
    expect(await readFile(file, 'utf8')).toContain(`user: question ${mid / 6 + 1}`)
  }, 120_000)
})
