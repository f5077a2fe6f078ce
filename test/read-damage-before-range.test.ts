import { readFile, writeFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence, isSessionPersistenceError, type SessionEvent } from '../src/index.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §15.2: "damage inside the range rejects as load would" — and damage before it does not. The
// JSONL reader's bisection stops up to a window (16 KiB) before the range's first line; it read
// forward from there and refused a damaged line it met before the range (E_CORRUPT for a range
// that does not hold it), and a resume's second read from the tail failed so.

const eventAt = (n: number): SessionEvent => ({ seq: n, type: 'x/tick', time: 1000 + n, data: { n, pad: 'p'.repeat(40 + (n % 17)) } })

/** A version-1 log of `count` events, the bytes of line `seq` (1-based lines: seq + 2) changed inside a string. */
async function damagedLog(count: number, damagedSeq: number) {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 1, sync: 'none' })
  await p.create(meta('s'))
  const events = Array.from({ length: count }, (_, n) => eventAt(n))
  await p.append('s', events)
  await p.close('s')
  const path = p.locate(meta('s')).path
  const lines = (await readFile(path, 'utf8')).split('\n')
  const line = lines[damagedSeq + 1]!
  expect(line.startsWith(`{"seq":${damagedSeq},`)).toBe(true)
  lines[damagedSeq + 1] = line.replace('"pad":"p', '"pad":"q') // valid JSON, wrong checksum
  await writeFile(path, lines.join('\n'))
  return { root, events, p: createJsonlPersistence({ root, formatVersion: 1 }) }
}

async function failure(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise
  } catch (err) {
    if (isSessionPersistenceError(err)) return { code: err.code, message: err.message }
    throw err
  }
  throw new Error('expected a rejection')
}

test('a range that starts just after a damaged line is read; one that holds it is E_CORRUPT naming it', async () => {
  const { events, p } = await damagedLog(1000, 500)
  // From a few lines after the damage (well inside one bisection window) to the end, and a bounded range.
  for (const from of [501, 503, 520]) {
    const got = await p.read('s', { fromSeq: from })
    expect([from, got.firstSeq, got.length, got.events]).toEqual([from, from, 1000, events.slice(from)])
    expect((await p.read('s', { fromSeq: from, toSeq: from + 10 })).events).toEqual(events.slice(from, from + 10))
  }
  expect((await p.read('s', { last: 100 })).events).toEqual(events.slice(900))
  for (const range of [{ fromSeq: 500 }, { fromSeq: 490, toSeq: 501 }, { fromSeq: 0, toSeq: 600 }]) {
    const f = await failure(p.read('s', range))
    expect([JSON.stringify(range), f.code, f.message]).toEqual([JSON.stringify(range), 'E_CORRUPT', expect.stringMatching(/line 502\b/)])
  }
  // load refuses the session as it always did
  expect((await failure(p.load('s'))).code).toBe('E_CORRUPT')
})

test('a watch from just after a damaged line yields the stored events from there', async () => {
  const { events, p } = await damagedLog(600, 300)
  const ac = new AbortController()
  const seen: SessionEvent[] = []
  for await (const e of p.watch('s', { fromSeq: 302, signal: ac.signal })) {
    seen.push(e)
    if (seen.length === 600 - 302) ac.abort()
  }
  expect(seen).toEqual(events.slice(302))
})

test('a range after bytes a crash zeroed (§6.3) reads as before: those end the log', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 1, sync: 'none' })
  await p.create(meta('z'))
  const events = Array.from({ length: 400 }, (_, n) => eventAt(n))
  await p.append('z', events)
  await p.close('z')
  const path = p.locate(meta('z')).path
  const bytes = await readFile(path)
  const text = bytes.toString('latin1')
  const at = text.indexOf('{"seq":200,')
  const end = text.indexOf('\n', text.indexOf('{"seq":202,'))
  bytes.fill(0, at, end + 1) // lines 200–202 zeroed, valid lines after them
  await writeFile(path, bytes)
  const reader = createJsonlPersistence({ root, formatVersion: 1 })
  const inspected = await reader.inspect('z').then(
    (l) => ({ ok: true as const, kept: l.events.length - (l.repair?.closers.length ?? 0) }),
    (err: unknown) => ({ ok: false as const, code: isSessionPersistenceError(err) ? err.code : String(err) }),
  )
  const read = await reader.read('z', { fromSeq: 204 }).then(
    (r) => ({ ok: true as const, length: r.length, events: r.events.length }),
    (err: unknown) => ({ ok: false as const, code: isSessionPersistenceError(err) ? err.code : String(err) }),
  )
  // What a read past zeroed bytes says follows what a load says of them: the log ends there, or it is refused.
  if (inspected.ok) expect(read).toEqual({ ok: true, length: inspected.kept, events: Math.max(0, inspected.kept - 204) })
  else expect(read).toEqual({ ok: false, code: inspected.code })
})

test('a load from the last compaction whose kept part starts just after a damaged line loads the tail', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 1, sync: 'none' })
  await p.create(meta('c'))
  const events = Array.from({ length: 800 }, (_, n) => eventAt(n))
  const compaction: SessionEvent = { seq: 800, type: 'history/compact', time: 5000, data: { summary: 'all before 703', firstKeptSeq: 703 } }
  await p.append('c', [...events, compaction])
  await p.close('c')
  const path = p.locate(meta('c')).path
  const lines = (await readFile(path, 'utf8')).split('\n')
  lines[700 + 1] = lines[700 + 1]!.replace('"pad":"p', '"pad":"q')
  await writeFile(path, lines.join('\n'))
  const reader = createJsonlPersistence({ root, formatVersion: 1 })
  const tail = await reader.load('c', { from: 'last-compaction' })
  expect([tail.firstSeq, tail.events]).toEqual([703, [...events.slice(703), compaction]])
  await reader.closeAll()
})

test('whichever line before the range is damaged, seq digits included, the range reads (versions 0 and 1)', async () => {
  // A damaged line a bisection probe lands on once steered the search below the range, and the
  // read then met the damage: every position in the 300 lines before the range is tried.
  for (const formatVersion of [0, 1] as const) {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, formatVersion, sync: 'none' })
    await p.create(meta('s'))
    const events = Array.from({ length: 2000 }, (_, n) => eventAt(n))
    await p.append('s', events)
    await p.close('s')
    const path = p.locate(meta('s')).path
    const lines = (await readFile(path, 'utf8')).split('\n')
    const failed: string[] = []
    for (let d = 1200; d < 1500; d++) {
      const copy = lines.slice()
      copy[d + 1] = copy[d + 1]!.replace(`{"seq":${d},`, `{"seq":${d}x,`) // no JSON: its seq unreadable
      await writeFile(path, copy.join('\n'))
      const got = await createJsonlPersistence({ root, formatVersion })
        .read('s', { fromSeq: 1500, toSeq: 1510 })
        .then((r) => (r.events.length === 10 && r.events[0]!.seq === 1500 ? 'ok' : `wrong: ${r.events.length}`))
        .catch((err: unknown) => (isSessionPersistenceError(err) ? err.code : String(err)))
      if (got !== 'ok') failed.push(`v${formatVersion} line of seq ${d}: ${got}`)
    }
    expect(failed).toEqual([])
  }
})

test('version 1: a line before the range whose seq digits were changed (its checksum fails) is passed over, not trusted', async () => {
  // A line of seq 700 that damage made read `{"seq":709,` (or the target's own seq, or one far past
  // it) still gives a seq from its first bytes: the search took it as a bound or as the target's
  // line, and the read then judged the damage before its range (E_CORRUPT).
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 1, sync: 'none' })
  await p.create(meta('s'))
  const events = Array.from({ length: 1500 }, (_, n) => eventAt(n))
  const compaction: SessionEvent = { seq: 1500, type: 'history/compact', time: 9000, data: { summary: 'all before 705', firstKeptSeq: 705 } }
  await p.append('s', [...events, compaction])
  await p.close('s')
  const path = p.locate(meta('s')).path
  const lines = (await readFile(path, 'utf8')).split('\n')
  const failed: string[] = []
  for (const wrong of [701, 705, 709, 1200, 1499]) {
    const copy = lines.slice()
    copy[700 + 1] = copy[700 + 1]!.replace('{"seq":700,', `{"seq":${wrong},`)
    await writeFile(path, copy.join('\n'))
    const reader = createJsonlPersistence({ root, formatVersion: 1 })
    for (const from of [701, 703, 705, 709]) {
      const got = await reader
        .read('s', { fromSeq: from, toSeq: from + 5 })
        .then((r) => (JSON.stringify(r.events) === JSON.stringify(events.slice(from, from + 5)) ? 'ok' : `wrong: ${r.events.map((e) => e.seq).join(',')}`))
        .catch((err: unknown) => (isSessionPersistenceError(err) ? err.code : String(err)))
      if (got !== 'ok') failed.push(`seq 700 written as ${wrong}, read from ${from}: ${got}`)
    }
    const tail = await reader.load('s', { from: 'last-compaction' }).then(
      (l) => (l.firstSeq === 705 && JSON.stringify(l.events) === JSON.stringify([...events.slice(705), compaction]) ? 'ok' : `wrong from ${l.firstSeq}`),
      (err: unknown) => (isSessionPersistenceError(err) ? err.code : String(err)),
    )
    if (tail !== 'ok') failed.push(`seq 700 written as ${wrong}, tail load: ${tail}`)
    const ac = new AbortController()
    const seen: number[] = []
    const watched = await (async () => {
      for await (const e of reader.watch('s', { fromSeq: 703, signal: ac.signal })) {
        seen.push(e.seq)
        if (seen.length === 10) ac.abort()
      }
      return seen.join(',') === '703,704,705,706,707,708,709,710,711,712' ? 'ok' : `wrong: ${seen.join(',')}`
    })().catch((err: unknown) => (isSessionPersistenceError(err) ? err.code : String(err)))
    if (watched !== 'ok') failed.push(`seq 700 written as ${wrong}, watch from 703: ${watched}`)
    // A range that holds the damaged line is refused, naming it (line 702).
    const f = await failure(reader.read('s', { fromSeq: 699, toSeq: 702 }))
    if (f.code !== 'E_CORRUPT' || !/line 702\b/.test(f.message)) failed.push(`seq 700 written as ${wrong}, range 699–702: ${f.code} ${f.message}`)
    await reader.closeAll()
  }
  expect(failed).toEqual([])
})

test('a damaged line just before a range whose lines are long (tens of KiB) is passed over too (version 1)', async () => {
  // A probe that landed in a damaged line found the next line's start but gave up on it where it
  // crossed the search's bound, so the bound fell inside the damage and the read met it.
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, formatVersion: 1, sync: 'none' })
  await p.create(meta('s'))
  const size = (n: number) => (n % 37 === 5 ? 70_000 : n % 11 === 3 ? 20_000 : 30 + ((n * 13) % 400))
  const events: SessionEvent[] = Array.from({ length: 600 }, (_, n) => ({ seq: n, type: 'x/tick', time: n, data: { pad: 'z'.repeat(size(n)) } }))
  await p.append('s', events)
  await p.close('s')
  const path = p.locate(meta('s')).path
  const lines = (await readFile(path, 'utf8')).split('\n')
  const failed: string[] = []
  for (let d = 280; d < 320; d++) {
    const copy = lines.slice()
    copy[d + 1] = copy[d + 1]!.replace('"pad":"z', '"pad":"y')
    await writeFile(path, copy.join('\n'))
    const reader = createJsonlPersistence({ root, formatVersion: 1 })
    for (const from of [d + 1, d + 2]) {
      const got = await reader
        .read('s', { fromSeq: from, toSeq: from + 3 })
        .then((r) => (JSON.stringify(r.events) === JSON.stringify(events.slice(from, from + 3)) ? 'ok' : 'wrong'))
        .catch((err: unknown) => (isSessionPersistenceError(err) ? err.code : String(err)))
      if (got !== 'ok') failed.push(`line of seq ${d} damaged, read from ${from}: ${got}`)
    }
  }
  expect(failed).toEqual([])
})
