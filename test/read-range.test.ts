import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import fc from 'fast-check'
import { expect, test } from 'vitest'
import { createJsonlPersistence, createNodeFileSystem, type FileSystem, type SessionEvent } from '../src/index.js'
import { observedFs } from './helpers/observed-fs.js'
import { PROBE_BYTES, WINDOW_BYTES } from '../src/jsonl/seq-search.js'
import { headerLine } from '../src/session/meta.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

const FIXTURE = new URL('./fixtures/appender.mjs', import.meta.url).pathname
const eventAt = (n: number): SessionEvent => ({ seq: n, type: 'x/tick', time: 1000 + n, data: { n, pad: 'p'.repeat(n % 97) } })

/** A seam that records every read: its position and length. */
function countingFs(): { fs: FileSystem; reads: { position: number; length: number }[] } {
  const reads: { position: number; length: number }[] = []
  return { fs: observedFs({ onRead: (_path, position, length) => reads.push({ position, length }) }), reads }
}

async function storedLog(root: string, count: number): Promise<{ path: string; events: SessionEvent[] }> {
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('big'))
  const events = Array.from({ length: count }, (_, n) => eventAt(n))
  for (let i = 0; i < count; i += 5000) await p.append('big', events.slice(i, i + 5000))
  await p.close('big')
  return { path: p.locate(meta('big')).path, events }
}

test('read of random ranges equals the slice of a full load', async () => {
  const root = await tmpRoot()
  const { events } = await storedLog(root, 3000)
  const p = createJsonlPersistence({ root })
  const full = (await p.inspect('big')).events
  expect(full).toEqual(events)
  await fc.assert(
    fc.asyncProperty(fc.nat(3200), fc.nat(400), fc.boolean(), async (from, span, useLast) => {
      const range = useLast ? { last: span } : { fromSeq: from, toSeq: from + span }
      const got = await p.read('big', range)
      const expected = useLast ? full.slice(Math.max(0, full.length - span)) : full.slice(from, from + span)
      expect(got.events).toEqual(expected)
      expect(got.length).toBe(3000)
      if (expected.length > 0) expect(got.firstSeq).toBe(expected[0]!.seq)
    }),
    { numRuns: 200 },
  )
})

test('bisection reads a bounded number of small blocks before the range, whatever the log length', async () => {
  const beforeRange = async (count: number) => {
    const root = await tmpRoot()
    await storedLog(root, count)
    const { fs, reads } = countingFs()
    const p = createJsonlPersistence({ root, fs })
    const target = Math.floor(count * 0.6)
    const page = await p.read('big', { fromSeq: target, toSeq: target + 100 })
    expect(page.events).toEqual(Array.from({ length: 100 }, (_, i) => eventAt(target + i)))
    const size = (await createNodeFileSystem().stat(p.locate(meta('big')).path)).size
    // Where the target's line starts, from the bytes the package writes for each event.
    let offset = Buffer.byteLength(headerLine(meta('big')))
    for (let n = 0; n < target; n++) offset += Buffer.byteLength(JSON.stringify(eventAt(n))) + 1
    const before = reads.filter((r) => r.position < offset)
    const bytesBefore = before.reduce((s, r) => s + Math.min(r.length, offset - r.position), 0)
    return { reads: before.length, bytesBefore, size }
  }
  const small = await beforeRange(20_000)
  const large = await beforeRange(200_000)
  expect(large.size).toBeGreaterThan(small.size * 9)
  // log₂ of the size in probes (the header read, a probe per halving, the window), not the size itself
  for (const r of [small, large]) {
    const probes = Math.ceil(Math.log2(r.size / WINDOW_BYTES)) + 2
    expect(r.reads).toBeLessThanOrEqual(probes + 2)
    expect(r.bytesBefore).toBeLessThanOrEqual((probes + 2) * PROBE_BYTES + WINDOW_BYTES)
  }
  expect(large.reads - small.reads).toBeLessThanOrEqual(5)
}, 120_000)

test('reads a session another process is appending to: contiguous, equal to what it wrote, length never shrinking', async () => {
  const root = await tmpRoot()
  const child = spawn(process.execPath, [FIXTURE, root, 'live', '400', '10', '2'], { stdio: ['ignore', 'pipe', 'inherit'] })
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]()
  expect(JSON.parse((await lines.next()).value as string)).toEqual({ stage: 'first-batch' })
  const p = createJsonlPersistence({ root })
  let lastLength = 0
  let reads = 0
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  let running = true
  void exited.then(() => (running = false))
  while (running || reads === 0) {
    const { length } = await p.read('live', { last: 0 })
    expect(length).toBeGreaterThanOrEqual(lastLength)
    lastLength = length
    const from = Math.floor(Math.random() * Math.max(1, length))
    const got = await p.read('live', { fromSeq: from, toSeq: from + 50 })
    expect(got.events).toEqual(Array.from({ length: got.events.length }, (_, i) => eventAt(from + i)))
    expect(got.events.length).toBe(Math.min(50, Math.max(0, got.length - from)))
    const tail = await p.read('live', { last: 5 })
    expect(tail.events.map((e) => e.seq)).toEqual(Array.from({ length: tail.events.length }, (_, i) => tail.length - tail.events.length + i))
    reads++
  }
  expect(await exited).toBe(0)
  expect(reads).toBeGreaterThan(5)
  expect((await p.read('live')).events).toEqual(Array.from({ length: 4000 }, (_, n) => eventAt(n)))
}, 60_000)
