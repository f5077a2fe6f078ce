import { appendFile, readdir, readFile, stat } from 'node:fs/promises'
import { dirname } from 'node:path'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { MAX_LINE_BYTES } from '../src/session/prepare-batch.js'
import { codeOf } from './helpers/codes.js'
import { ev, meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { specSeal } from './helpers/spec-seal.js'

// §15.5: one line of up to 64 MiB (a huge tool result) appends, loads and reads; a longer one is
// refused at append, and a log that holds one anyway is reported, never crashed on or held whole.

/** The checksum field version 1 adds to every line (§16): `,"crc":"` + 8 hex digits + `"`. */
const CRC_FIELD = 17

/** A tool result whose line (in version 1, with its checksum) is exactly `bytes` long. */
function resultOfLineBytes(seq: number, bytes: number) {
  const shell = JSON.stringify({ seq, type: 'tool/result', time: 1, data: { callId: 'c', content: [{ type: 'text', text: '' }] } }) + ' '.repeat(CRC_FIELD)
  return { seq, type: 'tool/result', time: 1, data: { callId: 'c', content: [{ type: 'text', text: 'r'.repeat(bytes - shell.length) }] } }
}

test('a line of exactly 64 MiB appends, loads and reads; one byte more is refused, writing nothing', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('big'))
  await p.append('big', turn(0, 1))
  const path = p.locate(meta('big')).path
  const before = (await stat(path)).size
  const over = resultOfLineBytes(4, MAX_LINE_BYTES + 1)
  expect(await codeOf(p.append('big', [over]))).toBe('E_INVALID_EVENT')
  expect((await stat(path)).size).toBe(before)
  const max = resultOfLineBytes(4, MAX_LINE_BYTES)
  expect(JSON.stringify(max).length + CRC_FIELD).toBe(MAX_LINE_BYTES)
  await p.append('big', [max, ...turn(5, 2)])
  await p.close('big')
  const loaded = await p.load('big')
  expect(loaded.events).toHaveLength(9)
  expect((loaded.events[4]!.data as { content: { text: string }[] }).content[0]!.text).toHaveLength(max.data.content[0]!.text.length)
  await p.close('big')
  const page = await p.read('big', { fromSeq: 3, toSeq: 6 })
  expect(page.events.map((e) => e.seq)).toEqual([3, 4, 5])
  expect((await p.read('big', { last: 2 })).events.map((e) => e.seq)).toEqual([7, 8])
}, 120_000)

test('a log holding a line longer than 64 MiB is E_CORRUPT naming its size, wherever it lies; list and a page before it still work', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('bad'))
  await p.append('bad', turn(0, 1))
  await p.close('bad')
  const path = p.locate(meta('bad')).path
  // written by something other than this package: 70 MiB with no newline until its end
  await appendFile(path, `${JSON.stringify(resultOfLineBytes(4, 70 * 1024 * 1024))}\n`)
  for (const attempt of [() => p.load('bad'), () => p.inspect('bad'), () => p.read('bad', { fromSeq: 2 })]) {
    const err = await attempt().catch((e: unknown) => e)
    expect((err as { code?: string }).code).toBe('E_CORRUPT')
    expect((err as Error).message).toMatch(/a line of 7340\d{4} bytes, longer than/)
    expect((err as { line?: number }).line).toBe(6)
  }
  expect((await p.list()).map((l) => l.meta.id)).toEqual(['bad'])
  // a page that ends before the damage does not read it (§12: a read checks only what it reads)
  expect((await p.read('bad', { fromSeq: 0, toSeq: 3 })).events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'assistant/message'])
}, 120_000)

/** A version-0 event whose line (no checksum) is exactly `bytes` long, its text holding `marker` once. */
function v0ResultOfLineBytes(seq: number, bytes: number, marker = '') {
  const shell = JSON.stringify({ seq, type: 'tool/result', time: 1, data: { callId: 'c', content: [{ type: 'text', text: marker }] } })
  return { seq, type: 'tool/result', time: 1, data: { callId: 'c', content: [{ type: 'text', text: marker + 'r'.repeat(bytes - shell.length) }] } }
}

test('a line a few bytes longer than 64 MiB is refused whatever the read boundaries (it was accepted when its end fell past the start of a read)', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none', formatVersion: 0 })
  await p.create(meta('near'))
  await p.append('near', turn(0, 1))
  await p.close('near')
  const path = p.locate(meta('near')).path
  const start = (await stat(path)).size
  const line = JSON.stringify(v0ResultOfLineBytes(4, MAX_LINE_BYTES + 10))
  expect(line.length).toBe(MAX_LINE_BYTES + 10)
  // Its newline lies well inside a 1 MiB read: before, what was carried into that read (< 64 MiB) was all that was counted.
  expect((start + line.length) % 2 ** 20).toBeGreaterThan(10)
  await appendFile(path, `${line}\n`)
  const err = await p.load('near').then(
    () => undefined,
    (e: unknown) => e as Error & { code?: string; line?: number },
  )
  expect(err).toMatchObject({ code: 'E_CORRUPT', line: 6 })
  expect(err?.message).toContain(`a line of ${MAX_LINE_BYTES + 10} bytes, longer than`)
  // As the last line of the log, a range that reaches it refuses it as load does: the backward
  // look for the log's last event took it as one, and `read`, `show`, `export`, `tail` returned it.
  for (const range of [undefined, { last: 2 }, { fromSeq: 4 }, { fromSeq: 1, toSeq: 6 }]) {
    const got = await p.read('near', range).then(
      (r) => r.events.map((e) => e.seq),
      (e: unknown) => e as Error & { code?: string; line?: number },
    )
    expect(got).toMatchObject({ code: 'E_CORRUPT', line: 6 })
  }
}, 120_000)

test('migrate refuses a version-0 line that its checksum would make longer than 64 MiB; redact one that its replacement would: E_INVALID_EVENT, the log untouched and loading', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none', formatVersion: 0 })
  await p.create(meta('m'))
  await p.append('m', [...turn(0, 1), v0ResultOfLineBytes(4, MAX_LINE_BYTES - 5, 'sk-secret'), ...turn(5, 2)])
  await p.close('m')
  const path = p.locate(meta('m')).path
  const bytes = await readFile(path)
  const redact = (dryRun: boolean) => () => p.redact('m', { pattern: 'sk-secret', replacement: '[REDACTED SECRET KEY]', dryRun })
  for (const attempt of [() => p.migrate('m', { dryRun: true }), () => p.migrate('m'), redact(true), redact(false)]) {
    const err = await attempt().then(() => undefined, (e: unknown) => e as Error & { code?: string })
    expect(err?.code).toBe('E_INVALID_EVENT')
    expect(err?.message).toMatch(/seq 4\) .* would be rewritten as a line of \d+ bytes; a line holds at most 67108864/)
    expect((await readFile(path)).equals(bytes)).toBe(true)
  }
  expect((await readdir(dirname(path))).filter((n) => n.startsWith('.'))).toEqual([])
  expect((await p.load('m')).events).toHaveLength(9)
  await p.close('m')
  // A version-1 log is left alone by migrate: its long line (checksum included) is not judged as one to seal.
  const v1 = createJsonlPersistence({ root, sync: 'none' })
  await v1.create(meta('v1'))
  await v1.append('v1', [...turn(0, 1), resultOfLineBytes(4, MAX_LINE_BYTES - 5)])
  await v1.close('v1')
  expect(await v1.migrate('v1', { dryRun: true })).toMatchObject({ fromVersion: 1, migrated: false })
  expect(await v1.migrate('v1')).toMatchObject({ fromVersion: 1, migrated: false })
}, 120_000)

test('a range that ends with a long last line (read once, its event taken from the backward look) equals the slice of a load, a torn tail after it left out, damage after it refused', async () => {
  for (const version of [0, 1] as const) {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, sync: 'none', formatVersion: version })
    await p.create(meta('long'))
    const big = { seq: 4, type: 'tool/result', time: 1, data: { callId: 'c', content: [{ type: 'text', text: 'é'.repeat(1_500_000) }] } }
    await p.append('long', [...turn(0, 1), big])
    await p.close('long')
    const full = (await p.inspect('long')).events.slice(0, 5) // inspect closes the open turn in memory
    const path = p.locate(meta('long')).path
    for (const range of [{ last: 1 }, { last: 3 }, { fromSeq: 0 }, { fromSeq: 4 }, {}]) {
      const r = await p.read('long', range)
      expect([version, range, r.length, r.firstSeq]).toEqual([version, range, 5, range.fromSeq ?? (range.last ? 5 - range.last : 0)])
      expect(r.events).toEqual(full.slice(r.firstSeq))
    }
    await appendFile(path, '{"seq":5,"type":"turn/e') // a torn tail: not returned, not refused
    expect((await p.read('long', { last: 1 })).events).toEqual([big])
    // A whole line after it that a load refuses: refused here too.
    const sealed = version === 1 ? specSeal('{"seq":5,"type":"turn/end","time":1,"data":{"turn":1}}') : '{"seq":5,"type":"turn/end","time":1,"data":{"turn":1}}'
    const damaged = sealed.replace('"turn":1', '"turn":2')
    const { writeFile, truncate } = await import('node:fs/promises')
    await truncate(path, (await stat(path)).size - 23)
    await appendFile(path, `${damaged}\n`)
    // Version 1: the backward look passes over the damaged line to the long one; what follows it is checked.
    if (version === 1) expect(await codeOf(p.read('long', { last: 1 }))).toBe('E_CORRUPT')
    else expect((await p.read('long', { last: 1 })).events.map((e) => e.seq)).toEqual([5]) // no checksum: a valid line
    await appendFile(path, `${sealed.replace('"seq":5', '"seq":6')}\n`)
    if (version === 1) expect(await codeOf(p.read('long', { last: 3 }))).toBe('E_CORRUPT')
    else expect((await p.read('long', { last: 3 })).events.map((e) => e.seq)).toEqual([4, 5, 6])
    await writeFile(path, '')
  }
}, 60_000)

test('a tail load across a line longer than the backward reads (read again whole) equals the full load', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('t'))
  const big = (seq: number) => ({ seq, type: 'tool/result', time: 1, data: { turn: 2, step: 0, callId: `c${seq}`, content: [{ type: 'text', text: 'x'.repeat(3_000_000) }] } })
  await p.append('t', [...turn(0, 1), ev(4, 'turn/start', { turn: 2 }), ev(5, 'assistant/message', { turn: 2, step: 0, content: [{ type: 'tool-call', callId: 'c6', name: 'sh', arguments: {} }] }), big(6), ev(7, 'history/compact', { summary: 'turn 1', firstKeptSeq: 4 }), ev(8, 'turn/end', { turn: 2, reason: { kind: 'completed' } })])
  await p.close('t')
  const full = await p.load('t')
  await p.close('t')
  const tail = await p.load('t', { from: 'last-compaction' })
  await p.close('t')
  expect(tail.firstSeq).toBe(4)
  expect(tail.events).toEqual(full.events.slice(4))
}, 60_000)
