import { describe, expect, test } from 'vitest'
import type { SessionEvent } from '../src/index.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { sessionPersistencePlugin } from '../src/plugin/plugin.js'
import { cutAtKeptStarts } from '../src/session/kept-starts.js'
import { toModelHistory } from '../src/session/history.js'
import { type CrashImage, createCrashFileSystem } from '../src/testing/crash-fs.js'
import { createReferenceHost } from '../src/testing/reference-host.js'
import { ev } from './helpers/events.js'

// §15.1: a load from the last compaction gives what a full load gives. A power cut can zero the
// first block of an append's write and keep its later blocks (6.3). A compaction whose kept part
// starts inside such a write would be trusted past zeros the tail load never reads: its repair,
// and every append the resumed session acknowledged next, would go where a full load cuts. The
// plugin appends a kept part on its own, after what precedes it is durable.

const ROOT = '/r'
const ID = 'c'
const long = (n: number) => `${'a long answer '.repeat(80)}${n}`

/** The states a power cut may leave at every step of the plugin's flush of a turn's end plus the next turn's compaction. */
async function crashStatesOfFlush(version: 0 | 1): Promise<{ images: CrashImage[]; appends: number[][] }> {
  const disk = createCrashFileSystem()
  const appends: number[][] = []
  const persistence = createJsonlPersistence({ root: ROOT, fs: disk, formatVersion: version })
  const append = persistence.append.bind(persistence)
  persistence.append = (id: string, events: readonly SessionEvent[]) => (appends.push(events.map((e) => e.seq)), append(id, events))
  const plugin = sessionPersistencePlugin({ persistence, flushDelayMs: 60_000 })
  const host = createReferenceHost({ cwd: '/project' })
  await plugin.apply(host)
  const s = host.startSession({ id: ID })
  s.beginTurn('question 1')
  s.endTurn()
  await plugin.flush(ID)
  // One drain: the rest of turn 2 (past a 4 KiB block), then turn 3 opening with a compaction
  // that keeps only turn 3, emitted before the plugin writes anything of it.
  s.beginTurn('question 2')
  for (let i = 0; i < 6; i++) s.emit('assistant/message', { turn: s.turn, step: i, content: [{ type: 'text', text: long(i) }] })
  s.endTurn()
  s.beginTurn('question 3')
  const kept = s.events.at(-2)!.seq // turn 3's turn/start
  expect(s.events.at(-2)!.type).toBe('turn/start')
  s.emit('history/compact', { summary: 'turns 1 and 2', firstKeptSeq: kept })
  const images: CrashImage[] = []
  disk.onMutation = () => images.push(...disk.crashImages())
  await plugin.flush(ID)
  disk.onMutation = undefined
  images.push(...disk.crashImages())
  await plugin.dispose()
  return { images, appends }
}

const view = (events: readonly SessionEvent[]) => JSON.stringify(toModelHistory(events).messages)

describe.each([0, 1] as const)('version %i: a tail load after a power cut during the plugin\'s flush of a compaction', (version) => {
  test('the kept part is an append of its own; every crash state tail-loads as it fully loads, and what it acknowledges next survives', async () => {
    const { images, appends } = await crashStatesOfFlush(version)
    // turn 1 (0-2), then turn 2 up to its end, then turn 3 from its start.
    expect(appends.map((a) => [a[0], a.at(-1)])).toEqual([[0, 2], [3, 11], [12, 14]])
    expect(images.length).toBeGreaterThan(4)
    let fromCompaction = 0
    for (const image of images) {
      const full = await createJsonlPersistence({ root: ROOT, fs: createCrashFileSystem(image) }).inspect(ID).catch(() => undefined)
      if (!full) continue // the log's name did not survive (its first append in flight)
      const disk = createCrashFileSystem(image)
      const p = createJsonlPersistence({ root: ROOT, fs: disk })
      const tail = await p.load(ID, { from: 'last-compaction' })
      if (tail.firstSeq > 0) fromCompaction++
      expect(view(tail.events)).toBe(view(full.events))
      expect(tail.firstSeq + tail.events.length).toBe(full.events.length)
      expect(tail.repair?.truncatedAtByte).toBe(full.repair?.truncatedAtByte)
      const next = tail.firstSeq + tail.events.length
      await p.append(ID, [ev(next, 'user/message', { content: 'acknowledged after the resume' })])
      await p.closeAll()
      const later = await createJsonlPersistence({ root: ROOT, fs: createCrashFileSystem(disk.currentImage()) }).inspect(ID)
      expect(later.events.some((e) => e.seq === next && e.type === 'user/message')).toBe(true)
    }
    expect(fromCompaction).toBeGreaterThan(0) // some states hold the compaction: the tail load started there
  })
})

describe('cutAtKeptStarts', () => {
  const compact = (seq: number, k: number) => ev(seq, 'history/compact', { summary: 's', firstKeptSeq: k })
  const seqsOf = (parts: (readonly SessionEvent[])[]) => parts.map((p) => p.map((e) => e.seq))
  test('cuts before each kept start inside the batch, past its first event; leaves others whole', () => {
    const plain = [ev(5, 'turn/start'), ev(6, 'user/message')]
    expect(seqsOf(cutAtKeptStarts(plain))).toEqual([[5, 6]])
    expect(seqsOf(cutAtKeptStarts([ev(5, 'a'), ev(6, 'turn/start'), compact(7, 6), ev(8, 'b')]))).toEqual([[5], [6, 7, 8]])
    // Kept parts starting before the batch, at its first event, or at the compaction itself.
    expect(seqsOf(cutAtKeptStarts([ev(5, 'a'), compact(6, 2)]))).toEqual([[5, 6]])
    expect(seqsOf(cutAtKeptStarts([ev(5, 'a'), compact(6, 5)]))).toEqual([[5, 6]])
    expect(seqsOf(cutAtKeptStarts([ev(5, 'a'), ev(6, 'b'), compact(7, 7), ev(8, 'c')]))).toEqual([[5, 6], [7, 8]])
    // Two compactions; a malformed one (firstKeptSeq past it, or not a number) cuts nothing.
    expect(seqsOf(cutAtKeptStarts([ev(1, 'a'), ev(2, 'b'), compact(3, 2), ev(4, 'c'), compact(5, 4), compact(6, 9), ev(7, 'd', { firstKeptSeq: 'x' })]))).toEqual([[1], [2, 3], [4, 5, 6, 7]])
    expect(cutAtKeptStarts([])).toEqual([])
  })
})
