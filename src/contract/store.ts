import { describe, expect, test, type TestContext } from 'vitest'
import type { SessionEvent } from '../session/schema.js'
import type { SessionPersistence, SessionStore } from '../persistence.js'
import { sealLine, unsealString } from '../session/line-codec.js'
import { codeOf, completeTurn, type ContractContext, ev, meta, storedSession, T0, isStore } from './fixtures.js'

/**
 * What a full backend (`SessionStore`) adds to the seam: `fork` (docs/contract.md §4.7) and the
 * raw-log transfer behind `session-jsonl copy` (§11, §13). A backend that implements only the
 * seam reports these tests as skipped, never as passed.
 */
export function storeTests({ open, openOther }: ContractContext): void {
  const openStore = async (ctx: TestContext, opener: () => Promise<SessionPersistence> = open): Promise<SessionStore> => {
    const p = await opener()
    if (!isStore(p)) ctx.skip()
    return p as SessionStore
  }

  describe('fork', () => {
    test('the child starts with the parent first seedLength events; lineage and depth recorded; the parent unchanged', async (ctx) => {
      const a = await openStore(ctx)
      const events = await storedSession(a, 'parent', 2, { cwd: '/proj', delegationDepth: 2 })
      const child = await a.fork('parent', { id: 'child', seedLength: 4, createdAt: T0 + 1 })
      expect(child).toEqual({ id: 'child', createdAt: T0 + 1, cwd: '/proj', parentSession: 'parent', seedLength: 4, delegationDepth: 2 })
      await a.append('child', completeTurn(4, 5))
      await a.close('child')
      const b = await openStore(ctx)
      expect((await b.inspect('child')).events).toEqual([...events.slice(0, 4), ...completeTurn(4, 5)])
      expect((await b.inspect('parent')).events).toEqual(events)
      const grandchild = await b.fork('child', { id: 'grandchild', seedLength: 8, cwd: '/other' })
      expect([grandchild.parentSession, grandchild.cwd]).toEqual(['child', '/other'])
      await b.closeAll()
    })

    test('bad fork points, unknown parents and existing children are refused and store nothing', async (ctx) => {
      const a = await openStore(ctx)
      await storedSession(a, 'parent', 2)
      expect(await codeOf(a.fork('parent', { id: 'c1', seedLength: 3 }))).toBe('E_BAD_FORK_POINT')
      expect(await codeOf(a.fork('parent', { id: 'c1', seedLength: 12 }))).toBe('E_BAD_FORK_POINT')
      expect(await codeOf(a.fork('nobody', { id: 'c1', seedLength: 0 }))).toBe('E_NOT_FOUND')
      expect(await codeOf(a.fork('parent', { id: 'parent', seedLength: 4 }))).toBe('E_EXISTS')
      expect(await codeOf(a.fork('parent', { id: '', seedLength: 4 }))).toBe('E_INVALID_ID')
      expect(await codeOf(a.fork('parent', null as never))).toBe('E_INVALID_META')
      expect((await a.list()).map((l) => l.meta.id)).toEqual(['parent'])
    })

    test('a fork refuses in one order on every backend: ids, seed length, a child this instance holds, then the parent and the point', async (ctx) => {
      const a = await openStore(ctx)
      await storedSession(a, 'parent', 2)
      await a.create(meta('held'))
      // The child is held here: E_EXISTS before the parent is looked for or the point judged.
      expect(await codeOf(a.fork('nobody', { id: 'held', seedLength: 4 }))).toBe('E_EXISTS')
      expect(await codeOf(a.fork('held', { id: 'held', seedLength: 99 }))).toBe('E_EXISTS')
      // A bad parent id before a bad seed length.
      expect(await codeOf(a.fork('\uD800', { id: 'c2', seedLength: -1 }))).toBe('E_INVALID_ID')
      expect((await a.list()).map((l) => l.meta.id)).toEqual(['parent'])
      await a.closeAll()
    })

    test('the child is held by the forking instance until closed; a fork at 0 stores nothing until its first append', async (ctx) => {
      const a = await openStore(ctx)
      await storedSession(a, 'parent', 1)
      await a.fork('parent', { id: 'seeded', seedLength: 4 })
      const b = await openStore(ctx)
      expect(await codeOf(b.load('seeded'))).toBe('E_LOCKED')
      await a.fork('parent', { id: 'blank', seedLength: 0 })
      expect(await codeOf(b.inspect('blank'))).toBe('E_NOT_FOUND')
      await a.append('blank', completeTurn(0, 3))
      await a.closeAll()
      expect((await b.load('seeded')).events).toHaveLength(4)
      expect((await b.inspect('blank')).meta.seedLength).toBe(0)
      await b.closeAll()
    })
  })

  describe('closeAll', () => {
    test('waits for pending appends and releases every session, idempotently', async (ctx) => {
      const a = await openStore(ctx)
      await a.create(meta('one'))
      await a.create(meta('two'))
      const pending = [a.append('one', completeTurn(0, 1)), a.append('two', completeTurn(0, 2))]
      await Promise.all([a.closeAll(), a.closeAll()])
      await Promise.all(pending)
      expect(await codeOf(a.append('one', completeTurn(4, 3)))).toBe('E_NOT_FOUND')
      const b = await openStore(ctx)
      expect((await b.load('one')).events).toEqual(completeTurn(0, 1))
      expect((await b.load('two')).events).toEqual(completeTurn(0, 2))
      await b.closeAll()
      await b.closeAll()
    })
  })

  describe('raw transfer', () => {
    test('readRaw gives the exact lines: the header, then each event serialized with its keys in the caller order', async (ctx) => {
      const a = await openStore(ctx)
      await a.create(meta('raw', { cwd: '/p', note: 'kept' }))
      const events: SessionEvent[] = [
        { time: T0, type: 'turn/start', seq: 0, data: { turn: 1 } },
        { seq: 1, data: { z: 1, a: [1, 'é', null] }, type: 'x/custom', time: T0 + 0.5, ignorable: true },
        ev(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } }),
      ]
      await a.append('raw', events)
      await a.close('raw')
      const raw = await a.readRaw('raw')
      expect(raw.id).toBe('raw')
      // new logs are version 1 (§16): each line sealed with the CRC-32 of what precedes its checksum
      const header = { type: 'session', version: 1, ...meta('raw', { cwd: '/p', note: 'kept' }) }
      const headerText = unsealString(raw.headerLine)
      expect(headerText, 'a header with a valid checksum').toBeDefined()
      expect(JSON.parse(headerText!)).toEqual(header)
      expect(raw.eventLines).toEqual(events.map((e) => sealLine(JSON.stringify(e), 1)))
      expect(await codeOf(a.readRaw('missing'))).toBe('E_NOT_FOUND')
    })

    test('importRaw into another store is byte-identical and durable; an existing id is E_EXISTS; a mismatched header is refused', async (ctx) => {
      const a = await openStore(ctx)
      await storedSession(a, 'moved', 2, { cwd: '/p' })
      const raw = await a.readRaw('moved')
      const target = await openStore(ctx, openOther)
      await target.importRaw(raw)
      expect(await target.readRaw('moved')).toEqual(raw)
      expect(await target.inspect('moved')).toEqual(await a.inspect('moved'))
      expect(await codeOf(target.importRaw(raw))).toBe('E_EXISTS')
      expect(await codeOf(a.importRaw(raw))).toBe('E_EXISTS')
      const imported = await target.load('moved') // imported sessions are ordinary sessions
      await target.append('moved', completeTurn(imported.events.length, 3))
      await target.close('moved')

      const renamed = { ...raw, id: 'renamed' }
      const refused = await codeOf(target.importRaw(renamed))
      expect(refused).not.toBe('resolved')
      expect(refused).not.toBe('foreign error')
      expect(await codeOf(target.inspect('renamed'))).toBe('E_NOT_FOUND')

      const unsealed = unsealString(raw.headerLine) ?? raw.headerLine
      const newer = { ...raw, id: 'newer', headerLine: unsealed.replace(/"version":\d/, '"version":2').replace('"id":"moved"', '"id":"newer"') }
      expect(await codeOf(target.importRaw(newer))).toBe('E_FORMAT_UNSUPPORTED')
      expect(await codeOf(target.inspect('newer'))).toBe('E_NOT_FOUND')
    })

    test('streamed raw transfer (§15.5): the same lines page by page; a failed or refused stream stores nothing', async (ctx) => {
      const a = await openStore(ctx)
      const target = await openStore(ctx, openOther)
      if (!a.openRawStream || !a.importRawStream || !target.importRawStream) return ctx.skip()
      await storedSession(a, 'paged', 5, { cwd: '/p' })
      const raw = await a.readRaw('paged')
      const stream = await a.openRawStream('paged', { pageLines: 3 })
      expect(stream.headerLine).toBe(raw.headerLine)
      const pages: (readonly string[])[] = []
      for await (const page of stream.eventPages) pages.push(page)
      expect(pages.map((p) => p.length)).toEqual([3, 3, 3, 3, 3, 3, 2])
      expect(pages.flat()).toEqual(raw.eventLines)
      expect(await target.importRawStream(await a.openRawStream('paged', { pageLines: 7 }))).toEqual({ eventLines: 20 })
      expect(await target.readRaw('paged')).toEqual(raw)
      expect(await codeOf(target.importRawStream(await a.openRawStream('paged')))).toBe('E_EXISTS')
      expect(await codeOf(a.openRawStream('missing'))).toBe('E_NOT_FOUND')

      // a source that fails in the middle, and a line that breaks the envelope: nothing is stored
      const failing = {
        id: 'half',
        headerLine: sealLine(unsealString(raw.headerLine)!.replace('"id":"paged"', '"id":"half"'), 1),
        eventPages: (async function* () {
          yield raw.eventLines.slice(0, 4)
          throw new Error('source went away')
        })(),
      }
      expect(await codeOf(target.importRawStream(failing))).not.toBe('resolved')
      expect(await codeOf(target.inspect('half'))).toBe('E_NOT_FOUND')
      const refused = {
        id: 'bad',
        headerLine: sealLine(unsealString(raw.headerLine)!.replace('"id":"paged"', '"id":"bad"'), 1),
        eventPages: (async function* () {
          yield raw.eventLines.slice(0, 4)
          yield [sealLine('{"seq":4,"time":1}', 1)]
        })(),
      }
      expect(await codeOf(target.importRawStream(refused))).toBe('E_INVALID_EVENT')
      expect(await codeOf(target.inspect('bad'))).toBe('E_NOT_FOUND')

      // bad page sizes and streams that are not streams: refused with a code, nothing stored
      for (const options of [{ pageLines: 0 }, { pageLines: -1 }, { pageLines: 1.5 }, { pageBytes: 0 }, { pageLines: '3' }, { pages: 3 }]) {
        expect(await codeOf(a.openRawStream('paged', options as never)), JSON.stringify(options)).toBe('E_CONFIG')
      }
      const header = (id: string) => sealLine(unsealString(raw.headerLine)!.replace('"id":"paged"', `"id":"${id}"`), 1)
      expect(await codeOf(target.importRawStream({ id: 'notastream', headerLine: header('notastream'), eventPages: 5 } as never))).toBe('E_INVALID_META')
      const notArrays = {
        id: 'strings',
        headerLine: header('strings'),
        eventPages: (async function* () {
          yield raw.eventLines[0] as never
        })(),
      }
      expect(await codeOf(target.importRawStream(notArrays))).toBe('E_CORRUPT')
      // a sealed line that holds a crc of its own would not load back (§16: reserved)
      const innerCrc = { id: 'innercrc', headerLine: header('innercrc'), eventLines: [sealLine('{"seq":0,"type":"x","time":1,"crc":"00000000"}', 1)] }
      expect(await codeOf(target.importRaw(innerCrc))).toBe('E_CORRUPT')
      expect((await target.list()).map((l) => l.meta.id)).toEqual(['paged'])
    })
  })
}
