import { readFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, INTERRUPTED_TOOL_TEXT, type SessionEvent } from '../src/index.js'
import { HEADER, line, writeRawLog } from './helpers/raw-log.js'
import { tmpRoot } from './helpers/tmp-root.js'

const e = (seq: number, type: string, data?: SessionEvent['data']): SessionEvent =>
  data === undefined ? { seq, type, time: 2000 + seq } : { seq, type, time: 2000 + seq, data }

const committed: SessionEvent[] = [
  e(0, 'turn/start', { turn: 1 }),
  e(1, 'user/message', { content: 'hello' }),
  e(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } }),
]
const openTurn: SessionEvent[] = [
  e(3, 'turn/start', { turn: 2 }),
  e(4, 'step/start', { turn: 2, step: 0 }),
  e(5, 'assistant/message', { turn: 2, step: 0, content: [{ type: 'tool-call', callId: 'c9', name: 'bash', arguments: { cmd: 'ls' } }] }),
]
const closersAfter = (last: SessionEvent): SessionEvent[] => [
  {
    seq: last.seq + 1,
    type: 'tool/result',
    time: last.time,
    data: {
      turn: 2,
      step: 0,
      callId: 'c9',
      content: [{ type: 'text', text: INTERRUPTED_TOOL_TEXT }],
      isError: true,
      error: { name: 'InterruptedError', code: 'interrupted' },
    },
  },
  { seq: last.seq + 2, type: 'step/end', time: last.time, data: { turn: 2, step: 0 } },
  { seq: last.seq + 3, type: 'turn/end', time: last.time, data: { turn: 2, reason: { kind: 'interrupted' } } },
]

describe('torn tail repair (docs/contract.md §6, §6.1)', () => {
  test('a last record cut at every byte offset repairs to the same valid prefix plus the exact closers', async () => {
    const root = await tmpRoot()
    const prefix = HEADER('t') + [...committed, ...openTurn].map(line).join('')
    const lastRecord = line(e(6, 'turn/end', { turn: 2, reason: { kind: 'completed' } }))
    const expectedEvents = [...committed, ...openTurn, ...closersAfter(openTurn[2]!)]
    const repairedBytes = prefix + closersAfter(openTurn[2]!).map(line).join('')
    for (let k = 0; k < lastRecord.length; k++) {
      const path = await writeRawLog(root, 't', prefix + lastRecord.slice(0, k))
      const p = createJsonlPersistence({ root })
      const loaded = await p.load('t')
      expect(loaded.events).toEqual(expectedEvents)
      expect(loaded.repair).toEqual({
        persisted: true,
        ...(k > 0
          ? { truncatedAtByte: Buffer.byteLength(prefix), droppedBytes: k, droppedLines: 1, reason: 'torn tail: the last line has no newline' }
          : { droppedBytes: 0, droppedLines: 0 }),
        droppedTurnEnds: 0,
        closers: closersAfter(openTurn[2]!),
      })
      await p.close('t')
      expect(await readFile(path, 'utf8')).toBe(repairedBytes)
      const again = await p.load('t')
      expect(again.repair).toBeUndefined()
      expect(again.events).toEqual(expectedEvents)
      await p.close('t')
    }
  })

  test('inspect computes the same repair in memory and never writes', async () => {
    const root = await tmpRoot()
    const content = HEADER('i') + [...committed, ...openTurn].map(line).join('') + '{"seq":6,"ty'
    const path = await writeRawLog(root, 'i', content)
    const p = createJsonlPersistence({ root })
    const inspected = await p.inspect('i')
    expect(await readFile(path, 'utf8')).toBe(content)
    const loaded = await p.load('i')
    expect(inspected).toEqual({ ...loaded, repair: { ...loaded.repair, persisted: false } })
    await p.closeAll()
  })

  test('closeOpenTurn: false cuts the torn tail but writes no closers', async () => {
    const root = await tmpRoot()
    const path = await writeRawLog(root, 'o', HEADER('o') + [...committed, ...openTurn].map(line).join('') + '{"seq')
    const p = createJsonlPersistence({ root })
    const loaded = await p.load('o', { closeOpenTurn: false })
    expect(loaded.events).toEqual([...committed, ...openTurn])
    expect(loaded.repair).toMatchObject({ persisted: true, droppedBytes: 5, droppedLines: 1, closers: [] })
    await p.closeAll()
    expect(await readFile(path, 'utf8')).toBe(HEADER('o') + [...committed, ...openTurn].map(line).join(''))
  })

  test.each([
    ['a blank line', '\n'],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d, 0x0a])],
    ['a seq that does not continue', line(e(9, 'x'))],
    ['a duplicated non-turn/end line', line(committed[1]!)],
    ['an envelope violation', '{"seq":3,"type":"","time":1}\n'],
    ['zero bytes with the size extended', Buffer.alloc(300)],
  ])('%s after the last turn/end is a torn tail', async (_name, tail) => {
    const root = await tmpRoot()
    const good = HEADER('x') + committed.map(line).join('')
    const path = await writeRawLog(root, 'x', Buffer.concat([Buffer.from(good), Buffer.from(tail)]))
    const p = createJsonlPersistence({ root })
    const loaded = await p.load('x')
    expect(loaded.events).toEqual(committed)
    expect(loaded.repair?.truncatedAtByte).toBe(Buffer.byteLength(good))
    expect(loaded.repair?.closers).toEqual([])
    await p.closeAll()
    expect(await readFile(path, 'utf8')).toBe(good)
  })

  test('a NUL block inside older history starts the torn tail; droppedTurnEnds says what was cut', async () => {
    const root = await tmpRoot()
    const first = HEADER('z') + committed.map(line).join('')
    const zeroed = Buffer.alloc(4096) // a block that was never synced came back as zeros
    const laterLines = [e(7, 'turn/start', { turn: 3 }), e(8, 'turn/end', { turn: 3, reason: { kind: 'completed' } }), e(9, 'turn/start', { turn: 4 }), e(10, 'turn/end', { turn: 4, reason: { kind: 'completed' } })]
    const later = laterLines.map(line).join('')
    const content = Buffer.concat([Buffer.from(first), zeroed, Buffer.from(`\n${later}`)])
    const path = await writeRawLog(root, 'z', content)
    const p = createJsonlPersistence({ root })
    const inspected = await p.inspect('z')
    expect(inspected.repair).toMatchObject({ persisted: false, truncatedAtByte: Buffer.byteLength(first), droppedTurnEnds: 2, droppedLines: 5 })
    expect(inspected.repair?.reason).toMatch(/NUL/)
    const loaded = await p.load('z')
    expect(loaded.events).toEqual(committed)
    expect(loaded.repair?.droppedBytes).toBe(content.length - Buffer.byteLength(first))
    await p.closeAll()
    expect(await readFile(path, 'utf8')).toBe(first)
  })

  test('a crash between the truncation and the closers is repaired the same way by the next load', async () => {
    const root = await tmpRoot()
    const prefix = HEADER('c') + [...committed, ...openTurn].map(line).join('')
    const path = await writeRawLog(root, 'c', prefix) // what a crash right after the truncation leaves
    const p = createJsonlPersistence({ root })
    const loaded = await p.load('c')
    expect(loaded.repair?.closers).toEqual(closersAfter(openTurn[2]!))
    await p.closeAll()
    expect(await readFile(path, 'utf8')).toBe(prefix + closersAfter(openTurn[2]!).map(line).join(''))
  })

  test('appends after a repair continue after the closers', async () => {
    const root = await tmpRoot()
    await writeRawLog(root, 'a', HEADER('a') + [...committed, ...openTurn].map(line).join('') + '{"se')
    const p = createJsonlPersistence({ root })
    const loaded = await p.load('a')
    const next = loaded.events.length
    await p.append('a', [e(next, 'turn/start', { turn: 3 }), e(next + 1, 'turn/end', { turn: 3, reason: { kind: 'completed' } })])
    await p.closeAll()
    const again = await p.load('a')
    expect(again.events.map((x) => x.seq)).toEqual(Array.from({ length: next + 2 }, (_, i) => i))
    expect(again.repair).toBeUndefined()
    await p.closeAll()
  })
})
