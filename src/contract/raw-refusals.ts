import { describe, expect, test, type TestContext } from 'vitest'
import type { RawSessionStream, SessionPersistence, SessionStore } from '../persistence.js'
import { MAX_LINE_BYTES } from '../session/prepare-batch.js'
import { MAX_HEADER_BYTES } from '../session/header-line.js'
import { sealLine, unsealString } from '../session/line-codec.js'
import { codeOf, completeTurn, type ContractContext, isStore, meta, storedSession, T0 } from './fixtures.js'

/** The code and message of a rejection (`resolved` when it resolves). */
async function refusal(promise: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await promise
    return { code: 'resolved', message: '' }
  } catch (err) {
    return { code: String((err as { code?: unknown }).code ?? 'foreign error'), message: String((err as Error).message) }
  }
}

/** A version-1 event line at `seq` holding `{ s }`. */
const bigLine = (seq: number, s: string) => sealLine(JSON.stringify({ seq, type: 'x/big', time: T0 + seq, data: { s } }), 1)

/** A version-1 event line at `seq` of exactly `bytes` bytes, its checksum included. */
function lineOfBytes(seq: number, bytes: number): string {
  const line = bigLine(seq, 'x'.repeat(bytes - Buffer.byteLength(bigLine(seq, ''))))
  if (Buffer.byteLength(line) !== bytes) throw new Error(`built a line of ${Buffer.byteLength(line)} bytes, not ${bytes}`)
  return line
}

/** Pages handed out by a source of the caller's: `pages` in turn. */
function pagesOf(...pages: (readonly string[])[]): AsyncIterable<readonly string[]> {
  return (async function* () {
    yield* pages
  })()
}

/**
 * Raw transfer (§13, §15.5) refuses alike on every backend: nothing is stored that could not be
 * loaded back (a line over 64 MiB, a header over 1 MiB), each refusal has one code whatever the
 * backend, a stream is read once and from the session it was opened on, and an import holds its
 * id while its pages come.
 */
export function rawRefusalTests({ open, openOther }: ContractContext): void {
  const openStore = async (ctx: TestContext, opener: () => Promise<SessionPersistence> = open): Promise<SessionStore> => {
    const p = await opener()
    if (!isStore(p)) ctx.skip()
    return p as SessionStore
  }
  const streaming = (ctx: TestContext, ...stores: SessionStore[]) => {
    if (stores.some((s) => !s.openRawStream || !s.importRawStream)) ctx.skip()
    return stores as Required<SessionStore>[]
  }
  /** The header line of the stored session `from`, naming `id` instead (its checksum made again). */
  const renamed = (headerLine: string, from: string, id: string, extra = '') =>
    sealLine(unsealString(headerLine)!.replace(`"id":"${from}"`, `"id":"${id}"`).replace(/\}$/, `${extra}}`), 1)

  describe('raw transfer: refusals alike on every backend', () => {
    test('a line over 64 MiB is refused by importRaw and importRawStream with E_INVALID_EVENT naming its size, nothing stored; a line of exactly 64 MiB imports and loads back', async (ctx) => {
      const a = await openStore(ctx)
      const [s] = streaming(ctx, a)
      await storedSession(a, 'src', 1)
      const raw = await a.readRaw('src')
      let over: string | undefined = lineOfBytes(4, MAX_LINE_BYTES + 1)
      const size = new RegExp(`\\b${MAX_LINE_BYTES + 1} bytes`)
      const whole = await refusal(a.importRaw({ id: 'over', headerLine: renamed(raw.headerLine, 'src', 'over'), eventLines: [...raw.eventLines, over] }))
      expect(whole.code).toBe('E_INVALID_EVENT')
      expect(whole.message).toMatch(size)
      const paged = await refusal(s!.importRawStream({ id: 'over2', headerLine: renamed(raw.headerLine, 'src', 'over2'), eventPages: pagesOf(raw.eventLines, [over]) }))
      expect(paged.code).toBe('E_INVALID_EVENT')
      expect(paged.message).toMatch(size)
      over = undefined
      expect(await codeOf(a.inspect('over'))).toBe('E_NOT_FOUND')
      expect(await codeOf(a.inspect('over2'))).toBe('E_NOT_FOUND')

      const exact = lineOfBytes(4, MAX_LINE_BYTES)
      await a.importRaw({ id: 'exact', headerLine: renamed(raw.headerLine, 'src', 'exact'), eventLines: [...raw.eventLines, exact] })
      const loaded = await a.inspect('exact')
      expect(loaded.events).toHaveLength(5)
      expect((loaded.events[4]!.data as { s: string }).s.length).toBe(MAX_LINE_BYTES - Buffer.byteLength(bigLine(4, '')))
      expect(await s!.importRawStream({ id: 'exact2', headerLine: renamed(raw.headerLine, 'src', 'exact2'), eventPages: pagesOf(raw.eventLines, [exact]) })).toEqual({ eventLines: 5 })
      expect((await a.read('exact2', { fromSeq: 4 })).events[0]!.seq).toBe(4)
      expect((await a.list()).map((l) => l.meta.id).sort()).toEqual(['exact', 'exact2', 'src'])
    })

    test('a header line over 1 MiB is refused by importRaw and importRawStream with E_INVALID_META naming its size, nothing stored', async (ctx) => {
      const a = await openStore(ctx)
      const [s] = streaming(ctx, a)
      await storedSession(a, 'src', 1)
      const raw = await a.readRaw('src')
      const headerLine = renamed(raw.headerLine, 'src', 'wide', `,"note":"${'n'.repeat(MAX_HEADER_BYTES)}"`)
      const size = new RegExp(`\\b${Buffer.byteLength(headerLine) + 1} bytes`)
      const whole = await refusal(a.importRaw({ id: 'wide', headerLine, eventLines: raw.eventLines }))
      expect(whole.code).toBe('E_INVALID_META')
      expect(whole.message).toMatch(size)
      const paged = await refusal(s!.importRawStream({ id: 'wide', headerLine, eventPages: pagesOf(raw.eventLines) }))
      expect(paged.code).toBe('E_INVALID_META')
      expect(paged.message).toMatch(size)
      expect(await codeOf(a.inspect('wide'))).toBe('E_NOT_FOUND')
    })

    test('each refusal of a raw log or stream has one code: no id E_INVALID_ID, a header naming another id E_INVALID_META, no header line or line array E_CORRUPT, a failing source E_IO', async (ctx) => {
      const a = await openStore(ctx)
      const [s] = streaming(ctx, a)
      await storedSession(a, 'src', 1)
      const raw = await a.readRaw('src')
      const header = (id: string) => renamed(raw.headerLine, 'src', id)
      expect(await codeOf(a.importRaw(null as never))).toBe('E_INVALID_ID')
      expect(await codeOf(s!.importRawStream(null as never))).toBe('E_INVALID_ID')
      expect(await codeOf(a.importRaw({ ...raw, id: '' }))).toBe('E_INVALID_ID')
      expect(await codeOf(a.importRaw({ ...raw, id: 'other' }))).toBe('E_INVALID_META')
      expect(await codeOf(s!.importRawStream({ id: 'other', headerLine: raw.headerLine, eventPages: pagesOf(raw.eventLines) }))).toBe('E_INVALID_META')
      expect(await codeOf(a.importRaw({ id: 'other', headerLine: 5, eventLines: [] } as never))).toBe('E_CORRUPT')
      expect(await codeOf(s!.importRawStream({ id: 'other', headerLine: 5, eventPages: pagesOf() } as never))).toBe('E_CORRUPT')
      expect(await codeOf(a.importRaw({ id: 'other', headerLine: header('other'), eventLines: 'lines' } as never))).toBe('E_CORRUPT')
      expect(await codeOf(a.importRaw({ id: 'other', headerLine: header('other'), eventLines: [5] } as never))).toBe('E_CORRUPT')
      const failing = (async function* () {
        yield raw.eventLines.slice(0, 2)
        throw new Error('the source went away')
      })()
      expect(await codeOf(s!.importRawStream({ id: 'other', headerLine: header('other'), eventPages: failing }))).toBe('E_IO')
      expect(await codeOf(a.inspect('other'))).toBe('E_NOT_FOUND')
      expect((await a.list()).map((l) => l.meta.id)).toEqual(['src'])
    })

    test('a stream is read once: iterating its pages again, or importing it once read or imported, is E_CONFIG and stores nothing', async (ctx) => {
      const a = await openStore(ctx)
      const target = await openStore(ctx, openOther)
      const [sa, st] = streaming(ctx, a, target)
      await storedSession(a, 'src', 2)
      const raw = await a.readRaw('src')

      const imported = await sa!.openRawStream('src', { pageLines: 3 })
      expect(await st!.importRawStream(imported)).toEqual({ eventLines: 8 })
      await target.delete('src')
      expect(await codeOf(st!.importRawStream(imported))).toBe('E_CONFIG')
      expect(await codeOf(st!.importRawStream({ id: imported.id, headerLine: imported.headerLine, eventPages: imported.eventPages }))).toBe('E_CONFIG')
      expect(await codeOf(target.inspect('src'))).toBe('E_NOT_FOUND')

      const read = await sa!.openRawStream('src', { pageLines: 3 })
      const pages: string[] = []
      for await (const page of read.eventPages) pages.push(...page)
      expect(pages).toEqual(raw.eventLines)
      const again = async () => {
        for await (const page of read.eventPages) pages.push(...page)
      }
      expect(await codeOf(again())).toBe('E_CONFIG')
      expect(await codeOf(st!.importRawStream(read))).toBe('E_CONFIG')

      const begun = await sa!.openRawStream('src', { pageLines: 3 })
      for await (const page of begun.eventPages) {
        expect(page).toHaveLength(3)
        break // abandoned after one page
      }
      expect(await codeOf(st!.importRawStream(begun))).toBe('E_CONFIG')
      expect(await codeOf(target.inspect('src'))).toBe('E_NOT_FOUND')
      expect(await target.list()).toEqual([])
    })

    test('a session deleted, or deleted and created again, after its stream was opened: its pages reject E_NOT_FOUND, never the new lines under the old header; nothing is imported', async (ctx) => {
      const a = await openStore(ctx)
      const target = await openStore(ctx, openOther)
      const [sa, st] = streaming(ctx, a, target)
      await storedSession(a, 'gone', 1)
      const gone = await sa!.openRawStream('gone')
      await a.delete('gone')
      expect(await codeOf(st!.importRawStream(gone))).toBe('E_NOT_FOUND')

      for (const how of ['import', 'iterate'] as const) {
        const id = `again-${how}`
        await storedSession(a, id, 1)
        const before = await sa!.openRawStream(id)
        await a.delete(id)
        await a.create(meta(id, { createdAt: T0 + 7 }))
        await a.append(id, [...completeTurn(0, 5), ...completeTurn(4, 6)])
        await a.close(id)
        if (how === 'import') {
          expect(await codeOf(st!.importRawStream(before))).toBe('E_NOT_FOUND')
        } else {
          const seen: string[] = []
          const iterate = async () => {
            for await (const page of before.eventPages) seen.push(...page)
          }
          expect(await codeOf(iterate())).toBe('E_NOT_FOUND')
          expect(seen).toEqual([])
        }
      }
      expect(await target.list()).toEqual([])
    })

    test('an importRawStream holds its id while its pages come: importRaw of that id is E_EXISTS from the same instance, E_LOCKED from another; the stream then completes', async (ctx) => {
      const a = await openStore(ctx)
      const target = await openStore(ctx, openOther)
      const rival = await openStore(ctx, openOther)
      const [st] = streaming(ctx, target)
      await storedSession(a, 'held', 1)
      const raw = await a.readRaw('held')
      let reached!: () => void
      const waiting = new Promise<void>((resolve) => (reached = resolve))
      let release!: () => void
      const gate = new Promise<void>((resolve) => (release = resolve))
      const hanging: RawSessionStream = {
        id: 'held',
        headerLine: raw.headerLine,
        eventPages: (async function* () {
          yield raw.eventLines.slice(0, 2)
          reached()
          await gate
          yield raw.eventLines.slice(2)
        })(),
      }
      const importing = st!.importRawStream(hanging)
      await waiting
      expect(await codeOf(target.importRaw(raw))).toBe('E_EXISTS')
      expect(await codeOf(rival.importRaw(raw))).toBe('E_LOCKED')
      release()
      expect(await importing).toEqual({ eventLines: 4 })
      expect(await rival.readRaw('held')).toEqual(raw)
    })
  })
}
