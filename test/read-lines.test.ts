import { appendFile, mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, expect, test } from 'vitest'
import { forEachLine } from '../src/jsonl/read-lines.js'
import { createJsonlPersistence } from '../src/index.js'
import { createCrashFileSystem } from '../src/testing/index.js'
import { tmpRoot } from './helpers/tmp-root.js'

async function linesOf(content: Buffer, chunkBytes: number, options: { decode?: boolean; stopAtShortRead?: boolean } = {}) {
  const fs = createCrashFileSystem()
  const h = await fs.open('/f', 'wx')
  await h.write(content, 0, content.length, 0)
  const seen: [string, number, boolean][] = []
  await forEachLine(h, (buf, start, end, offset, complete) => void seen.push([buf.toString('latin1', start, end), offset, complete]), { chunkBytes, ...options })
  return seen
}

describe('the streaming line reader', () => {
  test('property: lines, offsets and the torn last line are the same for every chunk size', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.string({ maxLength: 12 }), { maxLength: 8 }), fc.boolean(), fc.integer({ min: 1, max: 17 }), async (parts, torn, chunk) => {
        const text = parts.map((p) => `${p.replace(/\n/g, '')}\n`).join('') + (torn ? 'tail' : '')
        const content = Buffer.from(text, 'latin1')
        const expected: [string, number, boolean][] = []
        let offset = 0
        for (const piece of text.split('\n').slice(0, torn ? undefined : -1)) {
          const complete = offset + piece.length < text.length
          expected.push([piece, offset, complete])
          offset += piece.length + 1
        }
        expect(await linesOf(content, chunk)).toEqual(expected)
        // Lines longer than a chunk are found to their end, then read whole: the same with the
        // decoding fast path and with a reader that stops at the first short read.
        expect(await linesOf(content, chunk, { decode: true })).toEqual(expected)
        expect(await linesOf(content, chunk, { stopAtShortRead: true })).toEqual(expected)
      }),
      { numRuns: 400 },
    )
  })
})

test('a log over 512 MiB loads (no whole-file string), and its tail is repaired', { timeout: 180_000 }, async () => {
  const root = await tmpRoot()
  await mkdir(join(root, '_no-cwd'))
  const path = join(root, '_no-cwd', 'huge.jsonl')
  await writeFile(path, '{"type":"session","version":0,"id":"huge","createdAt":1,"delegationDepth":0}\n')
  const text = 'x'.repeat(1 << 20)
  const events = 540 // 540 events of 1 MiB: over 512 MiB, more than one string may hold
  for (let from = 0; from < events; from += 60) {
    let chunk = ''
    for (let seq = from; seq < Math.min(events, from + 60); seq++) chunk += `{"seq":${seq},"type":"tool/output","time":${seq},"data":{"text":"${text}"}}\n`
    await appendFile(path, chunk)
  }
  await appendFile(path, '{"seq":540,"type":"turn/end","time":540,"data":{"turn":1,"reason":{"kind":"completed"}}}\n{"seq":541,"ty')
  const p = createJsonlPersistence({ root })
  const loaded = await p.load('huge')
  expect(loaded.events).toHaveLength(541)
  expect((loaded.events[539]?.data as { text: string }).text.length).toBe(1 << 20)
  expect(loaded.repair?.droppedBytes).toBe(14)
  await p.closeAll()
})
