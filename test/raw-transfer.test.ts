import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { FileSystem } from '../src/jsonl/fs/file-system.js'
import type { RawSessionLog } from '../src/persistence.js'
import { createCrashFileSystem } from '../src/testing/crash-fs.js'
import { HEADER, writeRawLog } from './helpers/raw-log.js'
import { meta, turn } from './helpers/events.js'
import { codeOf } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

// Lines no serializer of ours would write but load accepts: key order, spacing, escapes,
// extra fields, U+2028/U+2029 raw, astral characters, escaped and raw non-ASCII.
const ODD_EVENTS = [
  '{"seq":0,"type":"turn/start","time":1,"data":{"turn":0}}',
  '{"type":"user/message","seq":1,"time":2.50,"data":{"content":"caf\\u00e9 \u2028 \u2029 😀 \\ud83d\\ude00 \\"q\\" \\/ tab\\t"},"extra":{"z":1,"a":[]}}',
  '{ "seq" : 2 , "type":"assistant/message","time":3e0,"data":{"content":[{"type":"text","text":"ünïcödé"}]}}',
  '{"seq":3,"type":"turn/end","time":4,"data":{"turn":0,"reason":{"kind":"completed"}},"ignorable":true}',
]
const ODD_HEADER = '{"type":"session","version":0,"id":"odd","createdAt":1000,"delegationDepth":0,"extra":{"b":"\u2028","a":1},"zzz":null}'

describe('readRaw and importRaw copy a session byte for byte', () => {
  test('odd but valid lines come back identical, and an import writes the same bytes', async () => {
    const from = await tmpRoot()
    const original = `${[ODD_HEADER, ...ODD_EVENTS].join('\n')}\n`
    await writeRawLog(from, 'odd', original)
    const raw = await createJsonlPersistence({ root: from }).readRaw('odd')
    expect(raw).toEqual({ id: 'odd', headerLine: ODD_HEADER, eventLines: ODD_EVENTS })
    const to = await tmpRoot()
    const target = createJsonlPersistence({ root: to })
    await target.importRaw(raw)
    expect(await readFile(join(to, '_no-cwd', 'odd.jsonl'), 'utf8')).toBe(original)
    expect(await readdir(join(to, '.locks'))).toEqual([]) // the import's lock is released
    expect(await readdir(join(to, '_no-cwd'))).toEqual(['odd.jsonl']) // no temporary file left
    expect(await target.readRaw('odd')).toEqual(raw)
    expect((await target.load('odd')).events).toHaveLength(4)
    await target.closeAll()
  })

  test('readRaw reads as inspect: a torn tail is left out, no closers are added, nothing is written', async () => {
    const root = await tmpRoot()
    const torn = `${HEADER('torn')}${ODD_EVENTS.slice(0, 2).join('\n')}\n{"seq":2,"ty`
    const path = await writeRawLog(root, 'torn', torn)
    const raw = await createJsonlPersistence({ root }).readRaw('torn')
    expect(raw.eventLines).toEqual(ODD_EVENTS.slice(0, 2))
    expect(await readFile(path, 'utf8')).toBe(torn)
  })

  test('readRaw refuses what inspect refuses, with the same codes', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    expect(await codeOf(p.readRaw('none'))).toBe('E_NOT_FOUND')
    expect(await codeOf(p.readRaw(''))).toBe('E_INVALID_ID')
    await writeRawLog(root, 'future', '{"type":"session","version":2,"id":"future","createdAt":1,"delegationDepth":0}\n')
    expect(await codeOf(p.readRaw('future'))).toBe('E_FORMAT_UNSUPPORTED')
    await writeRawLog(root, 'broken', `${HEADER('broken')}not json\n${ODD_EVENTS[3]!.replace('"seq":3', '"seq":0')}\n`)
    expect(await codeOf(p.readRaw('broken'))).toBe('E_CORRUPT')
  })

  test('a session this instance is writing is read up to what was acknowledged', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('live'))
    await p.append('live', turn(0, 1))
    const raw = await p.readRaw('live')
    expect(raw.eventLines).toHaveLength(4)
    expect(raw.eventLines.map((l) => JSON.parse(l).seq)).toEqual([0, 1, 2, 3])
    await p.closeAll()
  })

  test('importRaw publishes durably: every power cut afterwards keeps the whole log', async () => {
    const disk = createCrashFileSystem()
    const p = createJsonlPersistence({ root: '/r', fs: disk })
    await p.importRaw({ id: 'odd', headerLine: ODD_HEADER, eventLines: ODD_EVENTS })
    for (const image of disk.crashImages()) {
      const after = createJsonlPersistence({ root: '/r', fs: createCrashFileSystem(image) })
      expect((await after.readRaw('odd')).eventLines).toEqual(ODD_EVENTS)
    }
  })
})

describe('importRaw refuses bad logs, writing nothing', () => {
  const good = (): RawSessionLog => ({ id: 'odd', headerLine: ODD_HEADER, eventLines: [...ODD_EVENTS] })
  const cases: [string, (l: RawSessionLog) => unknown, string][] = [
    ['an invalid id', (l) => (l.id = ''), 'E_INVALID_ID'],
    ['a header that is not JSON', (l) => (l.headerLine = '{"type":"session",'), 'E_CORRUPT'],
    ['a header without delegationDepth', (l) => (l.headerLine = l.headerLine.replace(',"delegationDepth":0', '')), 'E_CORRUPT'],
    ['a header of another version', (l) => (l.headerLine = l.headerLine.replace('"version":0', '"version":2')), 'E_FORMAT_UNSUPPORTED'],
    ['a header naming another id', (l) => (l.id = 'other'), 'E_INVALID_META'],
    ['a header with a newline', (l) => (l.headerLine = `${l.headerLine}\n`), 'E_CORRUPT'],
    ['an event line that is not JSON', (l) => (l.eventLines[2] = '{"seq":2,'), 'E_CORRUPT'],
    ['a blank event line', (l) => (l.eventLines[2] = ''), 'E_CORRUPT'],
    ['two events on one line', (l) => (l.eventLines[3] = `${l.eventLines[3]}\n${l.eventLines[3]}`), 'E_CORRUPT'],
    ['a lone surrogate', (l) => (l.eventLines[0] = '{"seq":0,"type":"x","time":1,"data":"\ud800"}'), 'E_CORRUPT'],
    ['an event line that is not a string', (l) => ((l.eventLines as unknown[])[1] = { seq: 1 }), 'E_CORRUPT'],
    ['eventLines that is not an array', (l) => ((l as { eventLines: unknown }).eventLines = 'x'), 'E_CORRUPT'],
    ['a broken envelope', (l) => (l.eventLines[1] = '{"seq":1,"type":"","time":2}'), 'E_INVALID_EVENT'],
    ['a gap in seq', (l) => l.eventLines.splice(1, 1), 'E_SEQ_NOT_CONTIGUOUS'],
    ['a log not starting at seq 0', (l) => l.eventLines.shift(), 'E_SEQ_NOT_CONTIGUOUS'],
  ]
  for (const [what, spoil, code] of cases) {
    test(`${what}: ${code}`, async () => {
      const root = await tmpRoot()
      const log = good()
      spoil(log)
      expect(await codeOf(createJsonlPersistence({ root }).importRaw(log))).toBe(code)
      expect(await readdir(root)).toEqual([])
    })
  }

  test('E_EXISTS when the id is stored in any bucket, or open in this instance; the stored log is untouched', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('odd', { cwd: '/elsewhere' }))
    expect(await codeOf(p.importRaw(good()))).toBe('E_EXISTS') // open here, not yet on disk
    await p.append('odd', turn(0, 1))
    await p.closeAll()
    const before = await readFile(p.locate(meta('odd', { cwd: '/elsewhere' })).path)
    expect(await codeOf(p.importRaw(good()))).toBe('E_EXISTS') // on disk in another bucket
    expect(await readFile(p.locate(meta('odd', { cwd: '/elsewhere' })).path)).toEqual(before)
    expect(await readdir(join(root, '_no-cwd')).catch(() => [])).toEqual([])
  })

  test('E_LOCKED while another instance is creating that id (its lock taken, its log not yet published)', async () => {
    const disk = createCrashFileSystem()
    let atLink!: () => void
    let proceed!: () => void
    const reached = new Promise<void>((r) => (atLink = r))
    const go = new Promise<void>((r) => (proceed = r))
    const creatorFs: FileSystem = {
      ...disk,
      async link(from, to) {
        if (to.endsWith('.jsonl')) {
          atLink()
          await go
        }
        return disk.link(from, to)
      },
    }
    const creator = createJsonlPersistence({ root: '/r', fs: creatorFs })
    await creator.create(meta('odd'))
    const appended = codeOf(creator.append('odd', turn(0, 1)))
    await reached
    const importer = createJsonlPersistence({ root: '/r', fs: disk })
    expect(await codeOf(importer.importRaw(good()))).toBe('E_LOCKED')
    proceed()
    expect(await appended).toBe('resolved')
    expect((await importer.readRaw('odd')).eventLines).toHaveLength(4) // the creator's, not the import's
    await creator.closeAll()
  })
})
