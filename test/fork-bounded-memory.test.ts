// §4.7, §15.5: a fork's memory is bounded by a constant plus the longest line, whatever the
// parent's length. The parent is scanned keeping no event (only their count and where the seed
// ends) and the seed is copied from the scanned descriptor into the child a bounded chunk at a
// time. A fork that kept the parent's events runs out of a heap smaller than the parent (the
// first test); one that read the whole seed into one buffer reads and writes it in one piece,
// which the second test sees at the file system.
import { closeSync, openSync, writeSync } from 'node:fs'
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createJsonlPersistence, type FileHandle, type FileSystem } from '../src/index.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { headerLine } from '../src/session/meta.js'
import { meta } from './helpers/events.js'
import { runCliWithHeap } from './helpers/run-cli.js'
import { specSeal } from './helpers/spec-seal.js'
import { withRead } from './helpers/observed-fs.js'

const HEAP_MB = 32
const PARENT_BYTES = 64 * 1024 * 1024 // twice the heap: a fork that holds the parent's events cannot
const MESSAGE_BYTES = 256 * 1024
const ID = 'big'

/** Version-1 lines of complete turns (turn/start, a `MESSAGE_BYTES` question, turn/end) from `seq`, sealed by §16's formula. */
function turnLines(seq: number, turn: number, fill: string): string {
  const events = [
    { seq, type: 'turn/start', time: 1_700_000_000_000 + seq, data: { turn } },
    { seq: seq + 1, type: 'user/message', time: 1_700_000_000_001 + seq, data: { content: `${turn} ${fill}` } },
    { seq: seq + 2, type: 'turn/end', time: 1_700_000_000_002 + seq, data: { turn, reason: { kind: 'completed' } } },
  ]
  return events.map((e) => `${specSeal(JSON.stringify(e))}\n`).join('')
}

/**
 * A version-1 parent written by hand, a turn at a time (it costs this process no memory): complete
 * turns until `bytes`, then an open turn (started, its question asked). Returns its path, the
 * length of its header line and the fork point: just after its last turn/end.
 */
function writeParent(path: string, bytes: number): { headerBytes: number; seedLength: number } {
  const fd = openSync(path, 'w')
  try {
    const header = headerLine(meta(ID), 1)
    let size = writeSync(fd, header)
    const fill = 'q'.repeat(MESSAGE_BYTES)
    let seq = 0
    for (let turn = 0; size < bytes; turn++, seq += 3) size += writeSync(fd, turnLines(seq, turn, fill))
    const seedLength = seq
    const open = [
      { seq, type: 'turn/start', time: 1_800_000_000_000, data: { turn: 1e6 } },
      { seq: seq + 1, type: 'user/message', time: 1_800_000_000_001, data: { content: 'still open' } },
    ]
    writeSync(fd, open.map((e) => `${specSeal(JSON.stringify(e))}\n`).join(''))
    return { headerBytes: Buffer.byteLength(header), seedLength }
  } finally {
    closeSync(fd)
  }
}

let dir: string
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'spj-fork-big-'))
})
afterAll(() => rm(dir, { recursive: true, force: true }))

describe(`fork of a ${PARENT_BYTES / 1024 / 1024} MiB parent with a ${HEAP_MB} MiB heap`, () => {
  test('the CLI forks it near its end: the child is its header and the parent\'s seed bytes, byte for byte', async () => {
    const root = join(dir, 'root')
    const parentPath = createJsonlPersistence({ root }).locate(meta(ID)).path
    await mkdir(dirname(parentPath), { recursive: true })
    const { headerBytes, seedLength } = writeParent(parentPath, PARENT_BYTES)

    const { code, signal, stdout, stderr } = await runCliWithHeap(HEAP_MB, ['--root', root, 'fork', ID, '--at', String(seedLength), '--id', 'child', '--json'])
    expect({ code, signal }, stderr).toEqual({ code: 0, signal: null })
    const childMeta = JSON.parse(stdout)
    expect(childMeta).toEqual({ id: 'child', createdAt: expect.any(Number), parentSession: ID, seedLength, delegationDepth: 0 })

    const parent = await readFile(parentPath)
    const child = await readFile(createJsonlPersistence({ root }).locate(childMeta).path)
    const childHeader = Buffer.from(headerLine(childMeta, 1)) // the parent's version
    // The seed: every line of the parent after its header up to its last turn/end (the open turn is not copied).
    const seedEnd = parent.lastIndexOf('{"seq":' + seedLength + ',') // the open turn's first line
    expect(seedEnd).toBeGreaterThan(PARENT_BYTES - 1024 * 1024)
    expect(child.length).toBe(childHeader.length + seedEnd - headerBytes)
    expect(child.subarray(0, childHeader.length).equals(childHeader)).toBe(true)
    expect(Buffer.compare(child.subarray(childHeader.length), parent.subarray(headerBytes, seedEnd))).toBe(0)
  }, 120_000)
})

/** The crash seam (in memory), with the longest single read and write any handle was asked for. */
function measuredFs(): { fs: FileSystem; longest: { read: number; write: number } } {
  const base = createCrashFileSystem()
  const longest = { read: 0, write: 0 }
  const measured = (h: FileHandle): FileHandle => ({
    ...withRead(h, (buffer, offset, length, position) => ((longest.read = Math.max(longest.read, length)), h.read(buffer, offset, length, position))),
    write: (buffer, offset, length, position) => ((longest.write = Math.max(longest.write, length)), h.write(buffer, offset, length, position)),
  })
  return { fs: { ...base, open: async (path, flags, mode) => measured(await base.open(path, flags, mode)) }, longest }
}

describe('the seed is copied in bounded pieces', () => {
  test('a fork with an 8 MiB seed reads and writes no piece of more than 2 MiB, and the child loads the seed', async () => {
    const { fs, longest } = measuredFs()
    const p = createJsonlPersistence({ root: '/root', fs, formatVersion: 1 })
    await p.create(meta(ID))
    const fill = 'q'.repeat(MESSAGE_BYTES)
    let seq = 0
    for (let turn = 0; seq < 3 * 32; turn++, seq += 3) {
      await p.append(ID, [
        { seq, type: 'turn/start', time: 1, data: { turn } },
        { seq: seq + 1, type: 'user/message', time: 2, data: { content: `${turn} ${fill}` } },
        { seq: seq + 2, type: 'turn/end', time: 3, data: { turn, reason: { kind: 'completed' } } },
      ])
    }
    await p.append(ID, [{ seq, type: 'turn/start', time: 4, data: { turn: 99 } }])
    await p.close(ID)
    const parentBytes = (await fs.stat(p.locate(meta(ID)).path)).size
    expect(parentBytes).toBeGreaterThan(8 * 1024 * 1024)

    longest.read = 0
    longest.write = 0
    await p.fork(ID, { id: 'child', seedLength: seq, createdAt: 5 })
    await p.close('child')
    // The fork read the seed and wrote the child (1 MiB pieces), never in one piece.
    expect(longest.read).toBeGreaterThan(0)
    expect(longest.write).toBeGreaterThan(0)
    expect(longest.read).toBeLessThanOrEqual(2 * 1024 * 1024)
    expect(longest.write).toBeLessThanOrEqual(2 * 1024 * 1024)

    const childLog = await p.inspect('child')
    expect(childLog.meta).toEqual({ id: 'child', createdAt: 5, parentSession: ID, seedLength: seq, delegationDepth: 0 })
    const parentLog = await p.inspect(ID)
    expect(childLog.events).toEqual(parentLog.events.slice(0, seq))
    expect(childLog.repair).toBeUndefined()
  })
})
