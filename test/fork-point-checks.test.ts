// §4.7, §6, §16: a fork that keeps none of its parent's events (§15.5) still checks what a fork
// that held them checked. The whole parent is scanned as `inspect` reads it, so a version-1 line
// that fails its checksum refuses the fork wherever it lies (in the seed, after it, in the open
// tail); the fork point is checked against the valid events counted (`E_BAD_FORK_POINT`, same
// wording); nothing is written for a refused fork, and the child's id stays free. The parent's
// seed here is over 1 MiB: it is copied in pieces, not read at once.
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { createJsonlPersistence, type JsonlSessionPersistence, SessionPersistenceCorruptionError, type SessionEvent } from '../src/index.js'
import { meta } from './helpers/events.js'

const ID = 'parent'
const FILL = 'q'.repeat(100_000)
const TURNS = 14 // ~1.4 MiB of questions

/** Turn t: turn/start, a 100 kB question, an answer, turn/end; seqs from 4t. */
function turnEvents(t: number): SessionEvent[] {
  const seq = 4 * t
  return [
    { seq, type: 'turn/start', time: 1 + seq, data: { turn: t } },
    { seq: seq + 1, type: 'user/message', time: 2 + seq, data: { content: `${t} ${FILL}` } },
    { seq: seq + 2, type: 'assistant/message', time: 3 + seq, data: { turn: t, step: 0, content: [{ type: 'text', text: `answer ${t}` }] } },
    { seq: seq + 3, type: 'turn/end', time: 4 + seq, data: { turn: t, reason: { kind: 'completed' } } },
  ]
}

let root: string
let p: JsonlSessionPersistence
let parentPath: string
const childPath = () => p.locate(meta('child')).path

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'spj-fork-checks-'))
  p = createJsonlPersistence({ root, formatVersion: 1 })
  await p.create(meta(ID))
  for (let t = 0; t < TURNS; t++) await p.append(ID, turnEvents(t))
  // An open turn at the end: started, asked.
  await p.append(ID, turnEvents(TURNS).slice(0, 2))
  await p.close(ID)
  parentPath = p.locate(meta(ID)).path
})
afterEach(() => rm(root, { recursive: true, force: true }))

/** Flips one byte inside the question of line `line` (1-based; seq s is on line s + 2): valid JSON, a failing checksum. */
async function flipByteInLine(line: number): Promise<void> {
  const bytes = await readFile(parentPath)
  let start = 0
  for (let i = 1; i < line; i++) start = bytes.indexOf(10, start) + 1
  const at = bytes.indexOf('qqqq', start)
  expect(at).toBeGreaterThan(start)
  expect(at).toBeLessThan(bytes.indexOf(10, start))
  bytes[at] = 'r'.charCodeAt(0)
  await writeFile(parentPath, bytes)
}

async function expectNoChild(): Promise<void> {
  await expect(readFile(childPath())).rejects.toMatchObject({ code: 'ENOENT' })
  // No temporary file was left beside where the child would be.
  expect((await readdir(dirname(childPath()))).filter((n) => n.startsWith('.'))).toEqual([])
}

/** The child id was not kept by the refused fork: a fork at a good point makes it. */
async function expectChildIdFree(seedLength: number): Promise<void> {
  await p.fork(ID, { id: 'child', seedLength, createdAt: 7 })
  await p.close('child')
  expect((await p.inspect('child')).events).toHaveLength(seedLength)
}

describe('a damaged version-1 parent: E_CORRUPT naming the line, no child', () => {
  const cases = [
    { where: 'in the seed', seq: 4 * 3 + 1, seedLength: 4 * 10 },
    { where: 'after the seed, committed by a later turn/end', seq: 4 * 12 + 1, seedLength: 4 * 5 },
    { where: 'in the open turn at the end, past every turn/end', seq: 4 * TURNS + 1, seedLength: 4 * 5 },
  ]
  for (const c of cases) {
    test(`a flipped byte ${c.where}`, async () => {
      await flipByteInLine(c.seq + 2)
      const err = await p.fork(ID, { id: 'child', seedLength: c.seedLength }).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(SessionPersistenceCorruptionError)
      expect(err).toMatchObject({ code: 'E_CORRUPT', line: c.seq + 2, reason: expect.stringMatching(/checksum/) })
      await expectNoChild()
      // inspect refuses it at the same line: the fork read the parent as inspect reads it.
      await expect(p.inspect(ID)).rejects.toMatchObject({ code: 'E_CORRUPT', line: c.seq + 2 })
    })
  }
})

describe('the fork point is checked against the valid events counted', () => {
  test('just after an event that is not a turn/end: E_BAD_FORK_POINT, nothing written, the id stays free', async () => {
    for (const seedLength of [4 * 6 + 2, 4 * 6 + 3, 4 * TURNS + 1, 4 * TURNS + 2]) {
      await expect(p.fork(ID, { id: 'child', seedLength })).rejects.toMatchObject({
        code: 'E_BAD_FORK_POINT',
        message: expect.stringContaining(`event ${seedLength - 1} of session '${ID}' is not a turn/end; fork at 0 or just after a turn/end`),
      })
      await expectNoChild()
    }
    await expectChildIdFree(4 * 6)
  })

  test('past the valid events (a torn last line is not one): E_BAD_FORK_POINT with the count', async () => {
    // A torn line after the open turn: left out, not counted.
    await writeFile(parentPath, Buffer.concat([await readFile(parentPath), Buffer.from('{"seq":58,"type":"assistant/mess')]))
    const stored = 4 * TURNS + 2
    for (const seedLength of [stored + 1, stored + 2, 10 ** 9]) {
      await expect(p.fork(ID, { id: 'child', seedLength })).rejects.toMatchObject({
        code: 'E_BAD_FORK_POINT',
        message: expect.stringContaining(`session '${ID}' has ${stored} valid events; cannot fork at ${seedLength}`),
      })
      await expectNoChild()
    }
    // The last turn/end of the torn parent is a fork point; its seed is the parent's bytes.
    await expectChildIdFree(4 * TURNS)
    const parent = await readFile(parentPath)
    const child = await readFile(childPath())
    const seedStart = parent.indexOf(10) + 1
    const seedEnd = parent.indexOf(`{"seq":${4 * TURNS},`)
    expect(Buffer.compare(child.subarray(child.indexOf(10) + 1), parent.subarray(seedStart, seedEnd))).toBe(0)
  })
})
