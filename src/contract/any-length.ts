import { describe, expect, test } from 'vitest'
import type { SessionEvent } from '../session/schema.js'
import { toModelHistory } from '../session/history.js'
import { codeOf, completeTurn, type ContractContext, ev, meta, T0 } from './fixtures.js'

/** `n` complete turns from seq `seq` on, numbered from `firstTurn`. */
function turns(seq: number, firstTurn: number, n: number): SessionEvent[] {
  return Array.from({ length: n }, (_, i) => completeTurn(seq + i * 4, firstTurn + i)).flat()
}

/** Reads every event of an async iterable until `count` are in, with a deadline. */
async function take(iterable: AsyncIterable<SessionEvent>, count: number, ms = 10_000): Promise<SessionEvent[]> {
  const out: SessionEvent[] = []
  const iterator = iterable[Symbol.asyncIterator]()
  const deadline = Date.now() + ms
  while (out.length < count) {
    const next = await Promise.race([
      iterator.next(),
      new Promise<'late'>((resolve) => setTimeout(() => resolve('late'), Math.max(0, deadline - Date.now()))),
    ])
    if (next === 'late') throw new Error(`only ${out.length} of ${count} events within ${ms} ms`)
    if (next.done) break
    out.push(next.value)
  }
  return out
}

/** A session of 3 turns, a compaction keeping from seq 8, a request header again, one more turn. */
function compactedLog(): SessionEvent[] {
  const events = [ev(0, 'request/header', { header: { model: 'm1' }, reason: 'initial' }), ...turns(1, 1, 3)]
  // seq 13: the compaction (turn 3 starts at seq 9; keep from there)
  events.push(ev(13, 'history/compact', { summary: 'turns 1 and 2 in short', firstKeptSeq: 9 }))
  events.push(ev(14, 'request/header', { header: { model: 'm1' }, reason: 'change' }))
  events.push(...turns(15, 4, 1))
  return events
}

/** Sessions of any length (docs/contract.md §15): tail loads, ranges, watching, listing by last write, line sizes. */
export function anyLengthTests({ open }: ContractContext): void {
  describe('load from the last compaction', () => {
    test('reads from the earliest of firstKeptSeq, the last request header and an open turn; the history view is the full one', async () => {
      const a = await open()
      await a.create(meta('tail'))
      const events = compactedLog()
      await a.append('tail', events)
      await a.close('tail')
      const full = await a.inspect('tail')
      const tail = await a.load('tail', { from: 'last-compaction' })
      expect(tail.firstSeq).toBe(9)
      expect(tail.events.map((e) => e.seq)).toEqual(events.slice(9).map((e) => e.seq))
      expect(tail.events).toEqual(events.slice(9))
      expect(toModelHistory(tail.events)).toEqual(toModelHistory(full.events))
      expect(toModelHistory(tail.events).messages[0]).toMatchObject({ role: 'user', seq: 13, compaction: true, content: 'turns 1 and 2 in short' })
      // appends continue at firstSeq + events.length
      expect(await codeOf(a.append('tail', [ev(tail.events.length, 'x')]))).toBe('E_SEQ_NOT_CONTIGUOUS')
      await a.append('tail', turns(19, 5, 1))
      await a.close('tail')
      expect((await a.inspect('tail')).events.map((e) => e.seq)).toEqual(Array.from({ length: 23 }, (_, i) => i))
    })

    test('with no compaction in force it is a full load; a rewind over a compaction undoes it', async () => {
      const a = await open()
      await a.create(meta('plain'))
      await a.append('plain', turns(0, 1, 2))
      await a.close('plain')
      const plain = await a.load('plain', { from: 'last-compaction' })
      expect(plain.firstSeq).toBe(0)
      expect(plain.events).toHaveLength(8)
      await a.close('plain')

      await a.create(meta('undone'))
      const events = [...turns(0, 1, 2), ev(8, 'history/compact', { summary: 'first turn', firstKeptSeq: 4 }), ev(9, 'history/rewind', { to: 8 }), ...turns(10, 3, 1)]
      await a.append('undone', events)
      await a.close('undone')
      const full = await a.inspect('undone')
      const tail = await a.load('undone', { from: 'last-compaction' })
      expect(tail.firstSeq).toBe(0)
      expect(toModelHistory(tail.events)).toEqual(toModelHistory(full.events))
      expect(toModelHistory(tail.events).messages.some((m) => m.compaction)).toBe(false)
      await a.close('undone')
    })

    test('an open turn is read from its start and closed as a full load closes it', async () => {
      const a = await open()
      await a.create(meta('open-tail'))
      const events = [
        ev(0, 'request/header', { header: { model: 'm' }, reason: 'initial' }),
        ...turns(1, 1, 2),
        ev(9, 'history/compact', { summary: 's', firstKeptSeq: 9 }),
        ev(10, 'request/header', { header: { model: 'm' }, reason: 'change' }),
        ev(11, 'turn/start', { turn: 3 }),
        ev(12, 'user/message', { content: 'run it' }),
        ev(13, 'step/start', { turn: 3, step: 0 }),
        ev(14, 'assistant/message', { turn: 3, step: 0, content: [{ type: 'tool-call', callId: 'c1', name: 'sh', arguments: {} }] }),
      ]
      await a.append('open-tail', events)
      await a.close('open-tail')
      const inspected = await a.inspect('open-tail')
      const tail = await a.load('open-tail', { from: 'last-compaction' })
      expect(tail.firstSeq).toBe(9)
      expect(tail.repair?.closers).toEqual(inspected.repair?.closers)
      expect(tail.repair?.closers.map((c) => c.seq)).toEqual([15, 16, 17])
      expect(tail.events.at(-1)?.type).toBe('turn/end')
      expect(toModelHistory(tail.events)).toEqual(toModelHistory(inspected.events))
      await a.close('open-tail')
      expect((await a.inspect('open-tail')).events).toHaveLength(18)
    })

    test('a turn still open that started before the kept part and the last request header starts the tail, though its closers end it', async () => {
      const a = await open()
      await a.create(meta('early-open'))
      const events = [
        ...turns(0, 1, 1),
        ev(4, 'turn/start', { turn: 2 }),
        ev(5, 'user/message', { content: 'c' }),
        ev(6, 'request/header', { header: { model: 'm' }, reason: 'change' }),
        ev(7, 'assistant/message', { turn: 2, step: 0, content: [{ type: 'text', text: 'd' }] }),
        ev(8, 'history/compact', { summary: 'turn 1 in short', firstKeptSeq: 7 }),
        ev(9, 'user/message', { content: 'e' }),
      ]
      await a.append('early-open', events)
      await a.close('early-open')
      const inspected = await a.inspect('early-open')
      const tail = await a.load('early-open', { from: 'last-compaction' })
      expect(tail.firstSeq).toBe(4)
      expect(tail.events.map((e) => e.seq)).toEqual([4, 5, 6, 7, 8, 9, 10])
      expect(tail.repair?.closers.map((c) => c.type)).toEqual(['turn/end'])
      expect(toModelHistory(tail.events)).toEqual(toModelHistory(inspected.events))
      await a.close('early-open')
    })

    test("a bad 'from' is E_CONFIG and leaves the session neither open nor locked", async () => {
      const a = await open()
      await a.create(meta('bad-from'))
      await a.append('bad-from', turns(0, 1, 1))
      await a.close('bad-from')
      expect(await codeOf(a.load('bad-from', { from: 'middle' as never }))).toBe('E_CONFIG')
      expect(await codeOf(a.load('bad-from', { from: null as never }))).toBe('E_CONFIG')
      const b = await open()
      expect((await b.load('bad-from')).events).toHaveLength(4)
      await b.close('bad-from')
    })
  })

  describe('read', () => {
    test('returns the slice asked for, the last events, and the stored length', async () => {
      const a = await open()
      await a.create(meta('pages'))
      const events = turns(0, 1, 25)
      await a.append('pages', events)
      await a.close('pages')
      const mid = await a.read('pages', { fromSeq: 37, toSeq: 45 })
      expect(mid).toMatchObject({ firstSeq: 37, length: 100 })
      expect(mid.meta.id).toBe('pages')
      expect(mid.events).toEqual(events.slice(37, 45))
      expect((await a.read('pages', { last: 3 })).events).toEqual(events.slice(97))
      expect((await a.read('pages', { last: 500 })).events).toEqual(events)
      expect((await a.read('pages')).events).toEqual(events)
      expect((await a.read('pages', { fromSeq: 98 })).events).toEqual(events.slice(98))
      const past = await a.read('pages', { fromSeq: 150, toSeq: 160 })
      expect(past).toMatchObject({ events: [], length: 100 })
      expect((await a.read('pages', { fromSeq: 5, toSeq: 5 })).events).toEqual([])
    })

    test('needs no lock: it reads a session another instance is writing, up to what is acknowledged', async () => {
      const a = await open()
      const b = await open()
      await a.create(meta('busy'))
      await a.append('busy', turns(0, 1, 2))
      const seen = await b.read('busy', { last: 2 })
      expect(seen.length).toBe(8)
      expect(seen.events.map((e) => e.seq)).toEqual([6, 7])
      await a.append('busy', turns(8, 3, 1))
      expect((await b.read('busy', { fromSeq: 8 })).events).toEqual(turns(8, 3, 1))
      await a.close('busy')
    })

    test('bad ranges are E_CONFIG, unknown ids E_NOT_FOUND, bad ids E_INVALID_ID', async () => {
      const a = await open()
      await a.create(meta('r'))
      await a.append('r', turns(0, 1, 1))
      await a.close('r')
      for (const bad of [{ fromSeq: -1 }, { toSeq: 1.5 }, { fromSeq: 3, toSeq: 2 }, { last: -2 }, { last: 2, fromSeq: 0 }, { fromSeq: '1' }, null]) {
        expect(await codeOf(a.read('r', bad as never))).toBe('E_CONFIG')
      }
      expect(await codeOf(a.read('nope'))).toBe('E_NOT_FOUND')
      expect(await codeOf(a.read(''))).toBe('E_INVALID_ID')
      // A key given as undefined is a key not given (a caller spreading optional options).
      expect((await a.read('r', { last: 1, fromSeq: undefined, toSeq: undefined })).events.map((e) => e.seq)).toEqual([3])
      expect((await a.read('r', { fromSeq: 2, toSeq: undefined, last: undefined })).events.map((e) => e.seq)).toEqual([2, 3])
    })
  })

  describe('watch', () => {
    test('yields the stored events from fromSeq, then each new one as another instance appends, once and in order', async () => {
      const a = await open()
      const b = await open()
      await a.create(meta('live-w'))
      await a.append('live-w', turns(0, 1, 2))
      const stop = new AbortController()
      const fromStart = take(b.watch('live-w', { signal: stop.signal }), 16)
      const fromMiddle = take(b.watch('live-w', { fromSeq: 6, signal: stop.signal }), 10)
      await new Promise((r) => setTimeout(r, 50))
      await a.append('live-w', turns(8, 3, 1))
      await a.append('live-w', turns(12, 4, 1))
      const all = turns(0, 1, 4)
      expect(await fromStart).toEqual(all)
      expect(await fromMiddle).toEqual(all.slice(6))
      stop.abort()
      await a.close('live-w')
    })

    test('waits for a session that does not exist yet and ends when it is deleted', async () => {
      const a = await open()
      const b = await open()
      const seen: SessionEvent[] = []
      const ended = (async () => {
        for await (const e of b.watch('later')) seen.push(e)
        return 'ended'
      })()
      await new Promise((r) => setTimeout(r, 50))
      await a.create(meta('later'))
      await a.append('later', turns(0, 1, 1))
      await a.close('later')
      for (let i = 0; i < 200 && seen.length < 4; i++) await new Promise((r) => setTimeout(r, 25))
      expect(seen).toEqual(turns(0, 1, 1))
      await a.delete('later')
      expect(await Promise.race([ended, new Promise((r) => setTimeout(() => r('still running'), 10_000))])).toBe('ended')
    })

    test('ends without yielding any of another session re-created under the id while its consumer is busy', async () => {
      const a = await open()
      const b = await open()
      const first = turns(0, 1, 1)
      await a.create(meta('again'))
      await a.append('again', first)
      await a.close('again')
      const seen: SessionEvent[] = []
      let reached!: () => void
      const atFirst = new Promise<void>((r) => (reached = r))
      let release!: () => void
      const gate = new Promise<void>((r) => (release = r))
      const stop = new AbortController()
      const ended = (async () => {
        for await (const e of b.watch('again', { signal: stop.signal })) {
          seen.push(e)
          if (e.seq === 0) {
            reached()
            await gate // busy while the session is deleted and re-created
          }
        }
        return 'ended'
      })()
      await atFirst
      await a.delete('again')
      // Another session: other meta, and more events than the first had.
      await a.create(meta('again', { createdAt: T0 + 1 }))
      await a.append('again', Array.from({ length: 6 }, (_, seq) => ev(seq, 'x/second')))
      await a.close('again')
      release()
      const outcome = await Promise.race([ended, new Promise((r) => setTimeout(() => r('still running'), 10_000))])
      stop.abort() // a watch that did not end stops here
      expect(outcome).toBe('ended')
      expect(seen.filter((e) => e.type === 'x/second')).toEqual([])
      expect(seen).toEqual(first.slice(0, seen.length))
    })

    test('ends when its signal aborts; bad options are E_CONFIG', async () => {
      const a = await open()
      await a.create(meta('quiet'))
      await a.append('quiet', turns(0, 1, 1))
      const stop = new AbortController()
      const seen: number[] = []
      const ended = (async () => {
        for await (const e of a.watch('quiet', { signal: stop.signal })) {
          seen.push(e.seq)
          if (seen.length === 4) stop.abort()
        }
        return 'ended'
      })()
      expect(await Promise.race([ended, new Promise((r) => setTimeout(() => r('still running'), 10_000))])).toBe('ended')
      expect(seen).toEqual([0, 1, 2, 3])
      await a.close('quiet')
      const iterate = async (options: unknown) => {
        for await (const _ of a.watch('quiet', options as never)) break
      }
      expect(await codeOf(iterate({ fromSeq: -1 }))).toBe('E_CONFIG')
      expect(await codeOf(iterate({ signal: 'stop' }))).toBe('E_CONFIG')
      // An unknown key is refused, as read refuses one, naming it (`from` is not `fromSeq`).
      expect(await codeOf(iterate({ from: 3 }))).toBe('E_CONFIG')
      expect(((await iterate({ from: 3 }).catch((e: unknown) => e)) as Error).message).toMatch(/\bfrom\b/)
      // A key given as undefined is a key not given.
      const undefinedKeys = [] as number[]
      for await (const e of a.watch('quiet', { fromSeq: 3, signal: undefined, from: undefined } as never)) {
        undefinedKeys.push(e.seq)
        break
      }
      expect(undefinedKeys).toEqual([3])
    })
  })

  describe('list by last write', () => {
    test('orders by last write, newest first, and keeps at most limit', async () => {
      const a = await open()
      for (const id of ['old', 'mid', 'new']) {
        await a.create(meta(id, { createdAt: 1_000 }))
        await a.append(id, turns(0, 1, 1))
        await a.close(id)
        await new Promise((r) => setTimeout(r, 20))
      }
      // 'old' is written again last
      await a.load('old')
      await a.append('old', turns(4, 2, 1))
      await a.close('old')
      const byWrite = await a.list({ orderBy: 'lastWrite' })
      expect(byWrite.map((l) => l.meta.id)).toEqual(['old', 'new', 'mid'])
      expect(byWrite[0]!.mtimeMs).toBeGreaterThanOrEqual(byWrite[1]!.mtimeMs)
      expect((await a.list({ orderBy: 'lastWrite', limit: 2 })).map((l) => l.meta.id)).toEqual(['old', 'new'])
      expect(await a.list({ orderBy: 'lastWrite', limit: 0 })).toEqual([])
      expect((await a.list({ limit: 1 })).map((l) => l.meta.id)).toEqual(['mid'])
      const cyclic: Record<string, unknown> = {}
      cyclic.self = cyclic
      // BigInts and cycles too: naming them in the message must not throw a TypeError instead.
      for (const bad of [{ orderBy: 'size' }, { orderBy: null }, { limit: -1 }, { limit: 2.5 }, { limit: '3' }, { limit: null }, { limit: 1n }, { orderBy: 1n }, { orderBy: cyclic }]) {
        expect(await codeOf(a.list(bad as never))).toBe('E_CONFIG')
      }
    })
  })

  describe('line size', () => {
    test('a line over 64 MiB is refused at append with E_INVALID_EVENT naming its size; nothing is written', async () => {
      const a = await open()
      await a.create(meta('huge'))
      await a.append('huge', turns(0, 1, 1))
      const big = 'x'.repeat(64 * 1024 * 1024)
      const err = await a.append('huge', [ev(4, 'tool/result', { content: [{ type: 'text', text: big }] })]).catch((e: unknown) => e)
      expect((err as { code?: string }).code).toBe('E_INVALID_EVENT')
      expect((err as Error).message).toMatch(/\d{8,} bytes/)
      await a.append('huge', turns(4, 2, 1))
      await a.close('huge')
      expect((await a.read('huge')).length).toBe(8)
    })
  })
}

