import { appendFile, readdir, readFile, stat, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, type FileSystem, type SessionEvent } from '../src/index.js'
import { observedFs } from './helpers/observed-fs.js'
import { codeOf } from './helpers/codes.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §16 redact reads a log as few times as it must: one pass that checks it as a load does (the
// tail's repair planned, the matches counted), then, only when something matched, one pass that
// writes the new log beside it. Counted through the file-system seam: the bytes read from the
// log's path, in passes over the whole file, and the files opened for writing in its bucket.

/** A seam that counts the bytes read from each path and the files opened for writing. */
function countingFs() {
  const bytesRead = new Map<string, number>()
  const opened: { path: string; flags: string }[] = []
  const fs: FileSystem = observedFs({
    onOpen: (path, flags) => opened.push({ path, flags }),
    onRead: (path, _position, _length, got) => bytesRead.set(path, (bytesRead.get(path) ?? 0) + got),
  })
  const reset = () => {
    bytesRead.clear()
    opened.length = 0
  }
  /** Files other than writer locks opened for writing in `bucket`. */
  const writtenIn = (bucket: string) => opened.filter((o) => o.flags !== 'r' && dirname(o.path) === bucket).map((o) => o.path)
  return { fs, bytesRead, reset, writtenIn }
}

const secret = 'sk-live-00c0ffee'
const pad = 'z'.repeat(3_000)

/** A version-1 log of ~6 MiB (six chunks of a pass): 2,000 turns, a secret in every 100th. */
async function bigSession(root: string, id: string): Promise<string> {
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  let seq = 0
  for (let batch = 0; batch < 20; batch++) {
    const events: SessionEvent[] = []
    for (let i = 0; i < 100; i++) {
      const n = batch * 100 + i
      events.push({ seq: seq++, type: 'turn/start', time: 1_000 + n, data: { turn: n } })
      events.push({ seq: seq++, type: 'user/message', time: 1_000 + n, data: { content: `question ${n}${n % 100 === 7 ? ` ${secret}` : ''}` } })
      events.push({ seq: seq++, type: 'tool/result', time: 1_000 + n, data: { turn: n, step: 0, callId: `c${n}`, content: [{ type: 'text', text: pad }] } })
      events.push({ seq: seq++, type: 'turn/end', time: 1_000 + n, data: { turn: n, reason: { kind: 'completed' } } })
    }
    await p.append(id, events)
  }
  await p.close(id)
  return p.locate(meta(id)).path
}

/** Passes over the whole log: the bytes read from its path over its size before the call. */
const passes = (read: number | undefined, size: number) => (read ?? 0) / size

describe('redact: how many times the log is read', () => {
  test('with matches: two passes (check and count, then write), the tail repaired in the new log; the old log never written to', async () => {
    const root = await tmpRoot()
    const path = await bigSession(root, 'big')
    await appendFile(path, '{"seq":8000,"type":"turn/st') // a torn tail: cut as a load would
    const size = (await stat(path)).size
    expect(size).toBeGreaterThan(6 * 1024 * 1024)
    const seam = countingFs()
    const p = createJsonlPersistence({ root, fs: seam.fs })
    const report = await p.redact('big', { pattern: 'sk-live-[0-9a-f]+' })
    expect(report).toMatchObject({ matches: 20, rewritten: true, seqs: Array.from({ length: 20 }, (_, i) => (i * 100 + 7) * 4 + 1) })
    const n = passes(seam.bytesRead.get(path), size)
    // The check-and-count pass and the writing pass, plus the header read (under 1% here): the
    // full load, the count and the write of a redact built on a load read it three times.
    expect(n).toBeGreaterThanOrEqual(1.99)
    expect(n).toBeLessThan(2.01)
    // Written: one temporary file in the bucket, renamed over the log; the log itself never opened to write.
    const written = seam.writtenIn(dirname(path))
    expect(written).toHaveLength(1)
    expect(written[0]).not.toBe(path)
    expect((await readdir(dirname(path))).filter((f) => f.startsWith('.'))).toEqual([])
    const text = await readFile(path, 'utf8')
    expect(text).not.toContain(secret)
    expect(text).not.toContain('"turn/st"')
    const loaded = await createJsonlPersistence({ root }).load('big')
    expect(loaded.repair).toBeUndefined()
    expect(loaded.events).toHaveLength(8001)
    expect(loaded.events[8000]).toMatchObject({ seq: 8000, type: 'log/redacted', data: { matches: 20, seqs: report.seqs } })
  }, 60_000)

  test('no match, or a dry run: one pass, nothing written (no temporary file), the log byte for byte as it was, its torn tail too', async () => {
    const root = await tmpRoot()
    const path = await bigSession(root, 'big')
    await appendFile(path, '{"seq":8000,"type":"turn/st')
    const size = (await stat(path)).size
    const before = await readFile(path)
    const seam = countingFs()
    const p = createJsonlPersistence({ root, fs: seam.fs })
    for (const call of [
      () => p.redact('big', { pattern: 'no-such-secret' }),
      () => p.redact('big', { pattern: 'sk-live-[0-9a-f]+', dryRun: true }),
    ]) {
      seam.reset()
      const report = await call()
      expect(report.rewritten).toBe(false)
      const n = passes(seam.bytesRead.get(path), size)
      expect(n).toBeGreaterThanOrEqual(0.99)
      expect(n).toBeLessThan(1.01)
      expect(seam.writtenIn(dirname(path))).toEqual([])
      expect((await readFile(path)).equals(before)).toBe(true) // (toEqual on 7 MB buffers takes a minute)
    }
    expect(await p.redact('big', { pattern: 'sk-live-[0-9a-f]+', dryRun: true })).toMatchObject({ matches: 20, rewritten: false })
    expect(await p.redact('big', { pattern: 'no-such-secret' })).toMatchObject({ matches: 0, seqs: [], rewritten: false })
    expect((await readdir(dirname(path))).filter((f) => f.startsWith('.'))).toEqual([])
  }, 60_000)

  test('a corrupt log is refused with E_CORRUPT, untouched and with nothing written beside it, on a dry run too', async () => {
    const root = await tmpRoot()
    const path = await bigSession(root, 'big')
    const text = await readFile(path, 'utf8')
    const damaged = text.replace('"question 3"', '"question 4"') // a checksum mismatch before the commit boundary
    expect(damaged).not.toBe(text)
    await writeFile(path, damaged)
    const seam = countingFs()
    const p = createJsonlPersistence({ root, fs: seam.fs })
    expect(await codeOf(p.redact('big', { pattern: 'sk-live-[0-9a-f]+' }))).toBe('E_CORRUPT')
    expect(await codeOf(p.redact('big', { pattern: 'sk-live-[0-9a-f]+', dryRun: true }))).toBe('E_CORRUPT')
    expect(seam.writtenIn(dirname(path))).toEqual([])
    expect(await readFile(path, 'utf8')).toBe(damaged)
    expect((await readdir(dirname(path))).filter((f) => f.startsWith('.'))).toEqual([])
  }, 60_000)

  test('an open turn (no torn line) is closed in the new log before the record, and its closers are redacted like any event', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('o'))
    await p.append('o', [
      { seq: 0, type: 'turn/start', time: 10, data: { turn: 1 } },
      { seq: 1, type: 'user/message', time: 11, data: { content: `use ${secret}` } },
      { seq: 2, type: 'assistant/message', time: 12, data: { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'c', name: 'read', arguments: {} }] } },
    ])
    await p.close('o')
    const path = p.locate(meta('o')).path
    // A load closes the turn with an interrupted tool/result (§6.1: its text says "crash") and a
    // turn/end; a redact of "crash" replaces it there too, as in a log a load had repaired.
    const report = await p.redact('o', { pattern: `${secret}|crash` })
    expect(report).toMatchObject({ matches: 2, seqs: [1, 3], rewritten: true })
    const loaded = await p.load('o')
    await p.close('o')
    expect(loaded.repair).toBeUndefined()
    expect(loaded.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'assistant/message', 'tool/result', 'turn/end', 'log/redacted'])
    expect(loaded.events[3]).toMatchObject({ seq: 3, data: { callId: 'c', content: [{ type: 'text', text: 'Tool call interrupted by a [REDACTED]; no result was recorded.' }] } })
    expect(loaded.events[4]).toMatchObject({ seq: 4, data: { turn: 1, reason: { kind: 'interrupted' } } })
    expect(loaded.events[5]).toMatchObject({ seq: 5, type: 'log/redacted', ignorable: true, data: { matches: 2, seqs: [1, 3] } })
    expect(await readFile(path, 'utf8')).not.toContain(secret)
  })
})
