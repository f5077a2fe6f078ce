import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import {
  createJsonlPersistence,
  isSessionPersistenceError,
  SessionFormatUnsupportedError,
  SessionPersistenceCorruptionError,
  type SessionEvent,
} from '../src/index.js'
import { HEADER, line, writeRawLog } from './helpers/raw-log.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { rejection } from './helpers/codes.js'

const e = (seq: number, type: string, data?: SessionEvent['data']): SessionEvent =>
  data === undefined ? { seq, type, time: 2000 + seq } : { seq, type, time: 2000 + seq, data }
const turnEnd = (seq: number, turn: number) => e(seq, 'turn/end', { turn, reason: { kind: 'completed' } })

/** Loads and inspects `content`; both must reject alike, the file unchanged and no lock left. */
async function refuse(content: string | Buffer) {
  const root = await tmpRoot()
  const path = await writeRawLog(root, 'bad', content)
  const before = await readFile(path)
  const p = createJsonlPersistence({ root })
  const loadErr = await rejection(p.load('bad'))
  const inspectErr = await rejection(p.inspect('bad'))
  expect(await readFile(path)).toEqual(before)
  expect(await readdir(join(root, '.locks')).catch(() => [])).toEqual([])
  expect(await rejection(p.load('bad'))).toMatchObject({ code: (loadErr as { code: string }).code }) // not left open
  expect(inspectErr).toMatchObject({ code: (loadErr as { code: string }).code })
  return { err: loadErr as SessionPersistenceCorruptionError, path }
}

describe('damage at or before the commit boundary is refused (docs/contract.md §6, rule 3)', () => {
  const t1 = [e(0, 'turn/start', { turn: 1 }), e(1, 'user/message', { content: 'a' }), turnEnd(2, 1)]
  const head = HEADER('bad')
  const offsetOfLine = (lines: string[], n: number) => Buffer.byteLength(lines.slice(0, n - 1).join(''))

  test.each([
    ['a garbage line', '{not json}\n'],
    ['a blank line', '\n'],
    ['invalid UTF-8', Buffer.from([0x22, 0xc3, 0x28, 0x0a]).toString('latin1')],
    ['a seq gap', line(e(5, 'x'))],
    ['an envelope violation', '{"seq":3,"type":"x"}\n'],
  ])('%s in committed history → E_CORRUPT with line, byteOffset, path; file untouched', async (_n, damage) => {
    const lines = [head, ...t1.map(line), damage, line(e(3, 'turn/start', { turn: 2 })), line(turnEnd(4, 2))]
    const content = damage.includes('\uFFFD') ? lines.join('') : Buffer.concat(lines.map((l) => Buffer.from(l, l === damage ? 'latin1' : 'utf8')))
    const { err, path } = await refuse(content)
    expect(err).toBeInstanceOf(SessionPersistenceCorruptionError)
    expect(err.code).toBe('E_CORRUPT')
    expect(err.line).toBe(5)
    expect(err.byteOffset).toBe(offsetOfLine(lines, 5))
    expect(err.path).toBe(path)
    expect(err.sessionId).toBe('bad')
  })

  test('a duplicated turn/end is its own commit boundary, so it is refused, not cut', async () => {
    const lines = [head, ...t1.map(line), line(t1[2]!)]
    const { err } = await refuse(lines.join(''))
    expect(err.code).toBe('E_CORRUPT')
    expect(err.line).toBe(5)
  })

  test('a turn/end line that parses but breaks the envelope is refused', async () => {
    const { err } = await refuse(head + t1.map(line).join('') + '{"type":"turn/end"}\n')
    expect([err.code, err.line]).toEqual(['E_CORRUPT', 5])
  })

  test('a damaged line before a later intact turn/end is refused', async () => {
    const lines = [head, line(t1[0]!), '{"seq":1,"type":"user/mess\n', line(e(2, 'turn/end', {}))]
    const { err } = await refuse(lines.join(''))
    expect([err.code, err.line, err.byteOffset]).toEqual(['E_CORRUPT', 3, offsetOfLine(lines, 3)])
  })
})

describe('invalid headers (docs/contract.md §6)', () => {
  test('a numeric version other than 0 → E_FORMAT_UNSUPPORTED, nothing migrated', async () => {
    const { err } = await refuse('{"type":"session","version":2,"id":"bad","createdAt":1,"delegationDepth":0}\n')
    expect(err).toBeInstanceOf(SessionFormatUnsupportedError)
    expect(err.code).toBe('E_FORMAT_UNSUPPORTED')
  })

  test.each([
    ['no delegationDepth', '{"type":"session","version":0,"id":"bad","createdAt":1}\n'],
    ['a string version', '{"type":"session","version":"1","id":"bad","createdAt":1,"delegationDepth":0}\n'],
    ['not JSON', '{"type":"session",\n'],
    ['another id', HEADER('other')],
    ['no newline', HEADER('bad').trimEnd()],
    ['an empty file', ''],
    ['seedLength without parentSession', '{"type":"session","version":0,"id":"bad","createdAt":1,"seedLength":0,"delegationDepth":0}\n'],
    ['a wrong type', '{"type":"sessio","version":0,"id":"bad","createdAt":1,"delegationDepth":0}\n'],
  ])('%s → E_CORRUPT at line 1, byte 0', async (_n, header) => {
    const { err } = await refuse(header + line(e(0, 'turn/start')))
    expect([err.code, err.line, err.byteOffset]).toEqual(['E_CORRUPT', 1, 0])
  })
})

describe('finding the log', () => {
  test('the same id in two buckets → E_AMBIGUOUS', async () => {
    const root = await tmpRoot()
    const content = HEADER('twice') + line(e(0, 'turn/start', { turn: 1 })) + line(turnEnd(1, 1))
    await writeRawLog(root, 'twice', content)
    await mkdir(join(root, 'cwd-0123456789ab'), { recursive: true })
    await writeFile(join(root, 'cwd-0123456789ab', 'twice.jsonl'), content)
    const p = createJsonlPersistence({ root })
    for (const op of [() => p.load('twice'), () => p.inspect('twice')]) {
      const err = await rejection(op()) // one at a time: a rejection nobody awaits yet is unhandled
      expect(isSessionPersistenceError(err, 'E_AMBIGUOUS')).toBe(true)
    }
    expect((await rejection(p.create({ id: 'twice', createdAt: 1, delegationDepth: 0 }))) as { code: string }).toMatchObject({ code: 'E_EXISTS' })
  })

  test('load finds a log in any bucket, whatever cwd it was written with', async () => {
    const root = await tmpRoot()
    const a = createJsonlPersistence({ root })
    await a.create({ id: 'anywhere', createdAt: 1, delegationDepth: 0, cwd: '/somewhere/else' })
    await a.append('anywhere', [e(0, 'turn/start', { turn: 1 }), turnEnd(1, 1)])
    await a.closeAll()
    const loaded = await createJsonlPersistence({ root }).inspect('anywhere')
    expect(loaded.meta.cwd).toBe('/somewhere/else')
  })
})
