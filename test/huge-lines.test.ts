import { appendFile, stat } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { MAX_LINE_BYTES } from '../src/session/prepare-batch.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

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
