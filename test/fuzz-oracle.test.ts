import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import type { SessionEvent } from '../src/session/schema.js'
import type { JsonlSessionPersistence, LoadedSession } from '../src/persistence.js'
import { expectedClosers } from '../src/torture/closers-oracle.js'
import { runFuzz, type Wrap } from '../src/torture/fuzz.js'
import { expectedFileAfterLoad, expectLoad, lineOf, sealJson } from '../src/torture/log-oracle.js'
import { isSessionPersistenceError, SessionPersistenceCorruptionError } from '../src/errors.js'
import { specSeal } from './helpers/spec-seal.js'

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

  test('headers: a numeric version other than 0 and 1 is E_FORMAT_UNSUPPORTED; a torn, foreign or incomplete header is E_CORRUPT', () => {
    expect(expectLoad(Buffer.from(HEADER.replace('"version":0', '"version":2')), 'f')).toMatchObject({ refuse: 'E_FORMAT_UNSUPPORTED', line: 1 })
    expect(expectLoad(Buffer.from(HEADER.replace('"version":0', '"version":1')), 'f')).toMatchObject({ refuse: 'E_CORRUPT', line: 1 }) // version 1 without its checksum
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


// Version 1 (docs/contract.md §16): every line ends with `,"crc":"<CRC-32 of the bytes before it>"}`.
const H1 = { type: 'session', version: 1, id: 'f', createdAt: 5, delegationDepth: 0 }
const e1 = (seq: number, type: string, data?: unknown) => ({ seq, type, time: 100 + seq, ...(data === undefined ? {} : { data }) })
const s1 = (value: unknown) => lineOf(value, 1)
const log1 = (...lines: string[]) => Buffer.from(s1(H1) + lines.join(''))
const start1 = s1(e1(0, 'turn/start', { turn: 1 }))
const end1 = s1(e1(1, 'turn/end', { turn: 1, reason: { kind: 'completed' } }))
const offsetOf = (bytes: Buffer, n: number) => {
  let at = 0
  for (let i = 1; i < n; i++) at = bytes.indexOf(0x0a, at) + 1
  return at
}

describe('the oracle reads version 1', () => {
  test('a sealed line is the JSON text without its closing brace, the checksum field, the brace: CRC-32 of those bytes in 8 lowercase hex digits', () => {
    const json = '{"seq":0,"type":"x","time":1,"data":"é"}'
    expect(sealJson(json)).toBe(specSeal(json))
    expect(sealJson('123456789}')).toBe('123456789,"crc":"cbf43926"}') // CRC-32/ISO-HDLC's check value
  })

  test('readers remove the checksum field, from events and header; the log loads whole', () => {
    const v = expectLoad(log1(start1, end1), 'f')
    if (v.refuse) throw new Error(`refused: ${v.refuse}`)
    expect(v.version).toBe(1)
    expect(v.kept).toEqual([e1(0, 'turn/start', { turn: 1 }), e1(1, 'turn/end', { turn: 1, reason: { kind: 'completed' } })])
    expect(v.cutAt).toBeUndefined()
  })

  test('a header carrying a checksum is checked whatever its version says; version 1 needs one; versions other than 0 and 1 are unsupported', () => {
    const sealed = s1(H1)
    const flipped = sealed.replace('"version":1', '"version":0') // checked: the checksum no longer matches
    expect(expectLoad(Buffer.from(flipped + start1), 'f')).toEqual({ refuse: 'E_CORRUPT', line: 1, byteOffset: 0 })
    expect(expectLoad(Buffer.from(sealed.replace('"version":1', '"version":2') + start1), 'f')).toEqual({ refuse: 'E_CORRUPT', line: 1, byteOffset: 0 })
    expect(expectLoad(Buffer.from(s1({ ...H1, version: 2 }) + start1), 'f')).toEqual({ refuse: 'E_FORMAT_UNSUPPORTED', line: 1, byteOffset: 0 })
    expect(expectLoad(Buffer.from(lineOf(H1, 0) + start1), 'f')).toEqual({ refuse: 'E_CORRUPT', line: 1, byteOffset: 0 })
    const upper = sealed.replace(/"crc":"([0-9a-f]*)"/, (_m, h: string) => `"crc":"${h.toUpperCase()}"`)
    expect(upper).not.toBe(sealed)
    expect(expectLoad(Buffer.from(upper + start1), 'f')).toEqual({ refuse: 'E_CORRUPT', line: 1, byteOffset: 0 })
    // A version-0 header with a field named crc that is not its checksum: checked, refused.
    expect(expectLoad(Buffer.from(upper.replace('"version":1', '"version":0') + start1), 'f')).toEqual({ refuse: 'E_CORRUPT', line: 1, byteOffset: 0 })
  })

  test('a complete line that fails its checksum, or has none, is E_CORRUPT wherever it lies: after the commit boundary too', () => {
    const bad = start1.replace('"turn":1', '"turn":2')
    for (const [tail, line] of [
      [[start1, end1, s1(e1(2, 'note')).replace('note', 'nota')], 4], // mismatch after the last turn/end
      [[start1, end1, lineOf(e1(2, 'note'), 0)], 4], // a line without its checksum
      [[start1, end1, '\n'], 4], // a blank line
      [[start1, end1, 'null\n'], 4],
      [[bad, end1], 2],
      [[start1, s1(e1(1, 'note')).replace(/"crc":"(.)/, '"crc":"$1$1').replace(/.."}\n$/, '"}\n')], 3], // a shorter checksum field
    ] as const) {
      const bytes = log1(...tail)
      expect(expectLoad(bytes, 'f'), JSON.stringify(tail)).toEqual({ refuse: 'E_CORRUPT', line, byteOffset: offsetOf(bytes, line) })
    }
  })

  test('a NUL line starts the torn tail; a damaged complete line after it still refuses the log; a last line without newline is cut', () => {
    const nul = '\u0000\u0000\u0000\n'
    const cut = expectLoad(log1(start1, nul, end1), 'f')
    if (cut.refuse) throw new Error(`refused: ${cut.refuse}`)
    expect(cut.kept).toHaveLength(1)
    expect(cut.droppedTurnEnds).toBe(1)
    const damagedAfter = log1(start1, nul, end1.replace('completed', 'complete!'))
    expect(expectLoad(damagedAfter, 'f')).toEqual({ refuse: 'E_CORRUPT', line: 4, byteOffset: offsetOf(damagedAfter, 4) })
    const torn = expectLoad(log1(start1, end1.slice(0, -1)), 'f') // its checksum is never checked
    if (torn.refuse) throw new Error(`refused: ${torn.refuse}`)
    expect(torn.kept).toHaveLength(1)
    expect(torn.cutAt).toBe(s1(H1).length + start1.length)
  })

  test('a line sealed correctly over an invalid event is a defect as in version 0: cut after the commit boundary, refused at or before it', () => {
    const wrongSeq = s1(e1(7, 'note'))
    const after = expectLoad(log1(start1, end1, wrongSeq), 'f')
    if (after.refuse) throw new Error(`refused: ${after.refuse}`)
    expect(after.kept).toHaveLength(2)
    expect(after.droppedLines).toBe(1)
    const before = log1(start1, s1(e1(5, 'note')), s1(e1(2, 'turn/end', { turn: 1 })))
    expect(expectLoad(before, 'f')).toEqual({ refuse: 'E_CORRUPT', line: 3, byteOffset: offsetOf(before, 3) })
  })

  test('the first defect names the line when it already refuses the log, even with a later checksum failure', () => {
    const bytes = log1(start1, s1(e1(5, 'note')), s1(e1(2, 'note')).replace('note', 'nota'), s1(e1(3, 'turn/end', { turn: 1 })))
    expect(expectLoad(bytes, 'f')).toEqual({ refuse: 'E_CORRUPT', line: 3, byteOffset: offsetOf(bytes, 3) })
  })

  test('the closers of a version-1 log are sealed lines; in a version-0 log a crc field is data, never checked', () => {
    const bytes = log1(start1)
    const v = expectLoad(bytes, 'f')
    if (v.refuse) throw new Error(`refused: ${v.refuse}`)
    const closer = { seq: 1, type: 'turn/end', time: 100, data: { turn: 1, reason: { kind: 'interrupted' } } }
    expect(expectedFileAfterLoad(bytes, v).toString()).toBe(bytes.toString() + s1(closer))
    const v0 = expectLoad(log(`${JSON.stringify({ ...e1(0, 'note'), crc: 'not a checksum' })}\n`), 'f')
    if (v0.refuse) throw new Error(`refused: ${v0.refuse}`)
    expect(v0.kept).toEqual([{ ...e1(0, 'note'), crc: 'not a checksum' }])
  })
})

/** A crash-modelled file system holding `bytes` as the log of session f. */
async function diskWith(bytes: Buffer) {
  const fs = createCrashFileSystem()
  await fs.mkdir('/r', 0o700)
  await fs.mkdir('/r/_no-cwd', 0o700)
  const h = await fs.open('/r/_no-cwd/f.jsonl', 'wx')
  await h.write(bytes, 0, bytes.length, 0)
  await h.close()
  return fs
}

async function refusalOf(p: Promise<unknown>) {
  try {
    await p
    return 'loaded'
  } catch (err) {
    if (!isSessionPersistenceError(err)) throw err
    return err instanceof SessionPersistenceCorruptionError ? { code: err.code, line: err.line, byteOffset: err.byteOffset } : { code: err.code }
  }
}

describe('the package and the oracle write version 1 alike', () => {
  test('a log the package writes in version 1 is, byte for byte, the oracle\'s sealed lines; a torn one is repaired with sealed closers', async () => {
    const fs = createCrashFileSystem()
    const p = createJsonlPersistence({ root: '/r', fs, formatVersion: 1 })
    await p.create({ id: 'f', createdAt: 5, delegationDepth: 0 })
    const events = [e1(0, 'turn/start', { turn: 1 }), e1(1, 'tool/call', { turn: 1, step: 0, callId: 'k', name: 'n', arguments: {} })] as SessionEvent[]
    await p.append('f', events)
    await p.closeAll()
    const h = await fs.open('/r/_no-cwd/f.jsonl', 'r')
    const buf = Buffer.alloc((await h.stat()).size)
    await h.read(buf, 0, buf.length, 0)
    await h.close()
    expect(buf.toString()).toBe(s1(H1) + events.map(s1).join(''))
    const v = expectLoad(buf, 'f')
    if (v.refuse) throw new Error(`refused: ${v.refuse}`)
    const loaded = await createJsonlPersistence({ root: '/r', fs, formatVersion: 0 }).load('f') // a log keeps its version
    expect(loaded.events).toEqual([...v.kept, ...v.closers])
    const h2 = await fs.open('/r/_no-cwd/f.jsonl', 'r')
    const after = Buffer.alloc((await h2.stat()).size)
    await h2.read(after, 0, after.length, 0)
    await h2.close()
    expect(after).toEqual(expectedFileAfterLoad(buf, v))
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

// Found by the fuzzer (version 1, two mutations) and left failing for the owner of src/jsonl/.
describe('version 1: what the package must refuse, and where (regressions found by the fuzzer)', () => {
  test('a header whose version was flipped to 0 and whose checksum field is misspelt is still checked: E_CORRUPT at line 1', async () => {
    // Two bit flips in a version-1 header: '1' -> '0' in the version, one hex digit upper-cased.
    // The header carries a crc field, so it is checked whatever its version says (§16); the
    // package instead reads it as a valid version-0 header and returns the history, its
    // events and meta carrying `crc` fields.
    const header = s1(H1).replace('"version":1', '"version":0').replace(/"crc":"([0-9]*)([a-f])/, (_m, d: string, x: string) => `"crc":"${d}${x.toUpperCase()}`)
    const bytes = Buffer.from(header + start1 + end1)
    expect(expectLoad(bytes, 'f')).toEqual({ refuse: 'E_CORRUPT', line: 1, byteOffset: 0 })
    const p = createJsonlPersistence({ root: '/r', fs: await diskWith(bytes) })
    expect(await refusalOf(p.inspect('f'))).toEqual({ code: 'E_CORRUPT', line: 1, byteOffset: 0 })
    expect(await refusalOf(p.load('f'))).toEqual({ code: 'E_CORRUPT', line: 1, byteOffset: 0 })
  })

  test('a first defect at or before the commit boundary is the line E_CORRUPT names, not a later checksum failure', async () => {
    // Line 3 is sealed correctly but has seq 5 (a duplicated or misplaced line); line 4 fails its
    // checksum; line 5 is a turn/end. The first defect decides (§6 rule 3) and the error names
    // it (line 3); the package names line 4.
    const bytes = log1(start1, s1(e1(5, 'note')), s1(e1(2, 'note')).replace('note', 'nota'), s1(e1(3, 'turn/end', { turn: 1 })))
    const want = { code: 'E_CORRUPT', line: 3, byteOffset: offsetOf(bytes, 3) }
    expect(expectLoad(bytes, 'f')).toEqual({ refuse: 'E_CORRUPT', line: 3, byteOffset: want.byteOffset })
    const p = createJsonlPersistence({ root: '/r', fs: await diskWith(bytes) })
    expect(await refusalOf(p.inspect('f'))).toEqual(want)
    expect(await refusalOf(p.load('f'))).toEqual(want)
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
  test.each([0, 1] as const)('the real backend agrees with the oracle (version %i)', async (version) => {
    const r = await runFuzz({ cases: 1500, seed: 3, version })
    expect(r.failures).toEqual([])
    expect(r.repairedOrIntact + r.refused + r.undetectable).toBe(1500)
  })

  test.each([0, 1] as const)('one changed event in an accepted load is a silent failure, not "undetectable" (version %i)', async (version) => {
    const wrong = liar((l) => (l.events.length > 2 ? { ...l, events: l.events.map((e, i) => (i === 1 ? { ...e, type: `${e.type}x` } : e)) } : l))
    const r = await runFuzz({ cases: 300, seed: 3, wrap: wrong, version })
    expect(r.silent).toBeGreaterThan(0)
  })

  test.each([0, 1] as const)('a dropped last event, or missing closers, is a failure (version %i)', async (version) => {
    const short = liar((l) => (l.events.length > 0 ? { ...l, events: l.events.slice(0, -1) } : l))
    expect((await runFuzz({ cases: 300, seed: 5, wrap: short, version })).silent).toBeGreaterThan(0)
    const noClosers = liar((l) => (l.repair ? { ...l, repair: { ...l.repair, closers: [] } } : l))
    expect((await runFuzz({ cases: 300, seed: 5, wrap: noClosers, version })).failures.length).toBeGreaterThan(0)
  })

  test('a backend that accepts what version 1 refuses fails silently', async () => {
    // A liar that turns every refusal into an empty history: each is a silent failure.
    const accepting: Wrap = (p) =>
      new Proxy(p, {
        get(target, key, receiver) {
          const value = Reflect.get(target, key, receiver) as unknown
          if (key !== 'load' && key !== 'inspect') return typeof value === 'function' ? value.bind(target) : value
          return async (...args: unknown[]) => {
            try {
              return await (value as (...a: unknown[]) => Promise<LoadedSession>).apply(target, args)
            } catch {
              return { meta: { id: 'f', createdAt: 0, delegationDepth: 0 }, events: [] }
            }
          }
        },
      })
    const r = await runFuzz({ cases: 2500, seed: 9, wrap: accepting, version: 1 })
    expect(r.silent).toBeGreaterThan(500)
  })
})
