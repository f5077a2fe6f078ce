import { readFile, writeFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence, SessionPersistenceCorruptionError, type SessionEvent } from '../src/index.js'
import { sealLine } from '../src/session/line-codec.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A load of a version-1 log checks each line's checksum before the chunk is decoded and turns
// the checksum field into whitespace in its read buffer (§16; scan-log.ts): what it returns, and
// what it refuses, must be what a line-by-line check gives, and the file must stay as written.

/** Events of about `bytes` each: a log of a few MiB spans several 1 MiB reads, lines across them. */
function events(count: number, bytes: number): SessionEvent[] {
  return Array.from({ length: count }, (_, seq) => ({
    seq,
    type: seq % 50 === 49 ? 'turn/end' : 'assistant/chunk',
    time: 1_700_000_000_000 + seq,
    data: { turn: 1, text: `é${'x'.repeat(bytes + (seq % 97))}`, nested: { crc: seq } }, // a nested crc is an ordinary field
  }))
}

async function written(list: SessionEvent[]) {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('s'))
  for (let i = 0; i < list.length; i += 500) await p.append('s', list.slice(i, i + 500))
  await p.closeAll()
  return { root, path: p.locate(meta('s')).path }
}

test('a version-1 log of several reads loads exactly the events appended, none with a crc field, the file untouched', async () => {
  const list = events(3000, 1500) // ~4.6 MiB
  const { root, path } = await written(list)
  const before = await readFile(path)
  expect(before.toString('latin1', 0, 200)).toContain('"version":1')
  const p = createJsonlPersistence({ root, sync: 'none' })
  const loaded = await p.load('s')
  expect(loaded.events).toEqual(list)
  expect(loaded.events.some((e) => 'crc' in e)).toBe(false)
  expect(loaded.repair).toBeUndefined()
  await p.closeAll()
  expect((await readFile(path)).equals(before)).toBe(true)
  // A second load (the read buffers are reused) gives the same.
  const again = createJsonlPersistence({ root, sync: 'none' })
  expect((await again.load('s')).events).toEqual(list)
  await again.closeAll()
})

/** Replaces line `lineNo` (1-based) of the file with `text` + `\n`, and returns that line's byte offset. */
async function replaceLine(path: string, lineNo: number, text: string): Promise<number> {
  const lines = (await readFile(path, 'utf8')).split('\n')
  lines[lineNo - 1] = text
  await writeFile(path, lines.join('\n'))
  return Buffer.byteLength(lines.slice(0, lineNo - 1).map((l) => `${l}\n`).join(''))
}

async function refusal(root: string) {
  const p = createJsonlPersistence({ root, sync: 'none' })
  try {
    await p.load('s')
  } catch (err) {
    return err
  } finally {
    await p.closeAll()
  }
  throw new Error('loaded')
}

test('a line in the middle of a read whose checksum fails is refused at its own line and byte; the lines around it do not shift', async () => {
  const list = events(3000, 1500)
  for (const lineNo of [2, 700, 1800, 2999]) {
    const { root, path } = await written(list)
    const lines = (await readFile(path, 'utf8')).split('\n')
    const damaged = lines[lineNo - 1]!.replace('"turn":1', '"turn":2') // the checksum no longer matches
    const offset = await replaceLine(path, lineNo, damaged)
    const bytes = await readFile(path)
    const err = await refusal(root)
    expect(err).toBeInstanceOf(SessionPersistenceCorruptionError)
    const e = err as SessionPersistenceCorruptionError
    expect([e.code, e.line, e.byteOffset, e.reason]).toEqual(['E_CORRUPT', lineNo, offset, 'checksum mismatch'])
    expect((await readFile(path)).equals(bytes)).toBe(true)
  }
})

test('a sealed line that carries a crc field of its own inside is refused, however its checksum reads', async () => {
  const list = events(1200, 1500)
  const { root, path } = await written(list)
  const inner = JSON.stringify({ seq: 600, crc: 'deadbeef', type: 'assistant/chunk', time: 1, data: { turn: 1 } })
  const offset = await replaceLine(path, 602, sealLine(inner, 1))
  const err = await refusal(root)
  expect(err).toBeInstanceOf(SessionPersistenceCorruptionError)
  const e = err as SessionPersistenceCorruptionError
  expect([e.line, e.byteOffset, e.reason]).toEqual([602, offset, 'a reserved crc field inside the line'])
})
