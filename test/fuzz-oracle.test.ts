import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import type { SessionEvent } from '../src/session/schema.js'
import type { JsonlSessionPersistence, LoadedSession } from '../src/persistence.js'
import { expectedClosers } from '../src/torture/closers-oracle.js'
import { runFuzz, type Wrap } from '../src/torture/fuzz.js'
import { expectLoad } from '../src/torture/log-oracle.js'

const HEADER = '{"type":"session","version":0,"id":"f","createdAt":5,"delegationDepth":0}\n'
const ev = (seq: number, type: string, data?: unknown) => JSON.stringify({ seq, type, time: 100 + seq, ...(data === undefined ? {} : { data }) })
const log = (...lines: string[]) => Buffer.from(HEADER + lines.join(''))

describe('the oracle: what a load must make of a log, read from its bytes', () => {
  test('a torn last line is cut at its first byte; the open turn gets its closers', () => {
    const bytes = log(`${ev(0, 'turn/start', { turn: 1 })}\n`, '{"seq":1,"ty')
    const v = expectLoad(bytes, 'f')
    if (v.refuse) throw new Error(`refused: ${v.refuse}`)
    expect(v.kept.map((e) => e.type)).toEqual(['turn/start'])
    expect(v.cutAt).toBe(HEADER.length + ev(0, 'turn/start', { turn: 1 }).length + 1)
    expect(v.droppedLines).toBe(1)
    expect(v.closers).toEqual([{ seq: 1, type: 'turn/end', time: 100, data: { turn: 1, reason: { kind: 'interrupted' } } }])
  })

  test('a defect before a complete turn/end refuses with E_CORRUPT at that line and byte', () => {
    const bad = '{"seq":1,"type":"user/mess\n'
    const bytes = log(`${ev(0, 'turn/start', { turn: 1 })}\n`, bad, `${ev(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } })}\n`)
    expect(expectLoad(bytes, 'f')).toEqual({ refuse: 'E_CORRUPT', line: 3, byteOffset: HEADER.length + ev(0, 'turn/start', { turn: 1 }).length + 1 })
  })

  test('a first defect holding a NUL byte starts the torn tail even before a turn/end, which is counted', () => {
    const first = `${ev(0, 'turn/start', { turn: 1 })}\n`
    const bytes = log(first, '\0\0\0\0\n', `${ev(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } })}\n`)
    const v = expectLoad(bytes, 'f')
    if (v.refuse) throw new Error(`refused: ${v.refuse}`)
    expect(v.cutAt).toBe(HEADER.length + first.length)
    expect(v.droppedLines).toBe(2)
    expect(v.droppedTurnEnds).toBe(1)
    expect(v.droppedBytes).toBe(bytes.length - HEADER.length - first.length)
  })

  test('headers: a numeric version other than 0 is E_FORMAT_UNSUPPORTED; a torn, foreign or incomplete header is E_CORRUPT', () => {
    expect(expectLoad(Buffer.from(HEADER.replace('"version":0', '"version":1')), 'f')).toMatchObject({ refuse: 'E_FORMAT_UNSUPPORTED', line: 1 })
    expect(expectLoad(Buffer.from(HEADER.slice(0, -1)), 'f')).toMatchObject({ refuse: 'E_CORRUPT', line: 1, byteOffset: 0 })
    expect(expectLoad(Buffer.from(HEADER), 'g')).toMatchObject({ refuse: 'E_CORRUPT', line: 1 })
    expect(expectLoad(Buffer.from(HEADER.replace(',"delegationDepth":0', '')), 'f')).toMatchObject({ refuse: 'E_CORRUPT', line: 1 })
    expect(expectLoad(Buffer.alloc(0), 'f')).toMatchObject({ refuse: 'E_CORRUPT', line: 1 })
  })

  test('wrong seq, blank line, bad envelope and invalid UTF-8 are defects; with no turn/end after them they are cut', () => {
    for (const bad of [`${ev(5, 'x')}\n`, '\n', '{"seq":1,"type":"","time":1}\n', '{"seq":1,"type":"x","time":1,"ignorable":false}\n', Buffer.from([0x7b, 0xff, 0x7d, 0x0a]).toString('latin1')]) {
      const bytes = Buffer.concat([log(`${ev(0, 'note')}\n`), Buffer.from(bad, 'latin1')])
      const v = expectLoad(bytes, 'f')
      if (v.refuse) throw new Error(`refused ${JSON.stringify(bad)}`)
      expect(v.kept).toHaveLength(1)
      expect(v.cutAt).toBe(HEADER.length + ev(0, 'note').length + 1)
    }
  })

  test('a turn/end line that is not valid UTF-8 is not a commit boundary, before or after the first defect', () => {
    const turnEnd = Buffer.from(`${ev(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } })}\n`)
    const broken = Buffer.concat([turnEnd.subarray(0, turnEnd.length - 8), Buffer.from([0xff]), turnEnd.subarray(turnEnd.length - 8)])
    const bytes = Buffer.concat([log(`${ev(0, 'turn/start', { turn: 1 })}\n`, '\n'), broken])
    const v = expectLoad(bytes, 'f')
    if (v.refuse) throw new Error('refused')
    expect(v.kept).toHaveLength(1)
    expect(v.droppedLines).toBe(2)
  })
})

describe('the backend reads a log the way its bytes say', () => {
  test('a turn/end line that is not valid UTF-8 after the first defect does not make the log refused', async () => {
    // The oracle and the backend agree on this line when it is the first defect (it is cut);
    // after an earlier defect it must not count as a commit boundary either.
    const turnEnd = Buffer.from(`${ev(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } })}\n`)
    const broken = Buffer.concat([turnEnd.subarray(0, turnEnd.length - 8), Buffer.from([0xff]), turnEnd.subarray(turnEnd.length - 8)])
    const bytes = Buffer.concat([log(`${ev(0, 'turn/start', { turn: 1 })}\n`, '\n'), broken])
    const fs = createCrashFileSystem()
    await fs.mkdir('/r', 0o700)
    await fs.mkdir('/r/_no-cwd', 0o700)
    const h = await fs.open('/r/_no-cwd/f.jsonl', 'wx')
    await h.write(bytes, 0, bytes.length, 0)
    await h.close()
    const p = createJsonlPersistence({ root: '/r', fs })
    const v = expectLoad(bytes, 'f')
    if (v.refuse) throw new Error('the oracle refused')
    const inspected = await p.inspect('f')
    expect(inspected.events).toEqual([...v.kept, ...v.closers])
    expect(inspected.repair?.truncatedAtByte).toBe(v.cutAt)
  })
})

describe('the closers oracle, written from the contract', () => {
  const e = (seq: number, type: string, data: unknown): SessionEvent => ({ seq, type, time: 10 + seq, data: data as SessionEvent['data'] })
  test('pending calls in the order opened (each once), the open step, then the turn', () => {
    const events = [
      e(0, 'turn/start', { turn: 3 }),
      e(1, 'step/start', { turn: 3, step: 1 }),
      e(2, 'assistant/message', { turn: 3, step: 1, content: [{ type: 'text', text: 'x' }, { type: 'tool-call', callId: 'a', name: 'n', arguments: {} }, { type: 'tool-call', callId: 'b', name: 'n', arguments: {} }] }),
      e(3, 'tool/call', { turn: 3, step: 1, callId: 'a', name: 'n', arguments: {} }),
      e(4, 'tool/result', { turn: 3, step: 1, callId: 'b', content: [] }),
      e(5, 'tool/call', { turn: 3, step: 1, callId: 'c', name: 'n', arguments: {} }),
    ]
    const interrupted = (seq: number, callId: string) => ({
      seq,
      type: 'tool/result',
      time: 15,
      data: { turn: 3, step: 1, callId, content: [{ type: 'text', text: 'Tool call interrupted by a crash; no result was recorded.' }], isError: true, error: { name: 'InterruptedError', code: 'interrupted' } },
    })
    expect(expectedClosers(events, 0)).toEqual([
      interrupted(6, 'a'),
      interrupted(7, 'c'),
      { seq: 8, type: 'step/end', time: 15, data: { turn: 3, step: 1 } },
      { seq: 9, type: 'turn/end', time: 15, data: { turn: 3, reason: { kind: 'interrupted' } } },
    ])
  })

  test('a balanced log gets none; tracking starts afresh at each turn/start; nothing kept uses createdAt', () => {
    expect(expectedClosers([e(0, 'turn/start', { turn: 1 }), e(1, 'turn/end', { turn: 1 })], 0)).toEqual([])
    const afresh = expectedClosers([e(0, 'turn/start', { turn: 1 }), e(1, 'tool/call', { callId: 'x' }), e(2, 'turn/start', { turn: 2 })], 0)
    expect(afresh).toEqual([{ seq: 3, type: 'turn/end', time: 12, data: { turn: 2, reason: { kind: 'interrupted' } } }])
    expect(expectedClosers([], 77)).toEqual([])
  })
})

/** A backend that returns something else than the bytes hold: the fuzzer must see it. */
function liar(change: (loaded: LoadedSession) => LoadedSession): Wrap {
  return (p: JsonlSessionPersistence) =>
    new Proxy(p, {
      get(target, key, receiver) {
        const value = Reflect.get(target, key, receiver) as unknown
        if (key !== 'load' && key !== 'inspect') return typeof value === 'function' ? value.bind(target) : value
        return async (...args: unknown[]) => change(await (value as (...a: unknown[]) => Promise<LoadedSession>).apply(target, args))
      },
    })
}

describe('the fuzzer fails a backend that returns other events than the bytes hold', () => {
  test('the real backend agrees with the oracle', async () => {
    const r = await runFuzz({ cases: 1500, seed: 3 })
    expect(r.failures).toEqual([])
    expect(r.repairedOrIntact + r.refused + r.undetectable).toBe(1500)
  })

  test('one changed event in an accepted load is a failure, not "undetectable"', async () => {
    const wrong = liar((l) => (l.events.length > 2 ? { ...l, events: l.events.map((e, i) => (i === 1 ? { ...e, type: `${e.type}x` } : e)) } : l))
    const r = await runFuzz({ cases: 300, seed: 3, wrap: wrong })
    expect(r.failures.length).toBeGreaterThan(0)
  })

  test('a dropped last event, or missing closers, is a failure', async () => {
    const short = liar((l) => (l.events.length > 0 ? { ...l, events: l.events.slice(0, -1) } : l))
    expect((await runFuzz({ cases: 300, seed: 5, wrap: short })).failures.length).toBeGreaterThan(0)
    const noClosers = liar((l) => (l.repair ? { ...l, repair: { ...l.repair, closers: [] } } : l))
    expect((await runFuzz({ cases: 300, seed: 5, wrap: noClosers })).failures.length).toBeGreaterThan(0)
  })
})
