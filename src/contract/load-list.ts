import { describe, expect, test } from 'vitest'
import { INTERRUPTED_TOOL_TEXT } from '../session/closers.js'
import type { SessionEvent } from '../session/schema.js'
import type { SessionPersistence } from '../persistence.js'
import { codeOf, completeTurn, type ContractContext, ev, LOCATION_KINDS, meta, T0 } from './fixtures.js'

/** Loading, listing and closing (docs/contract.md §4.1, §4.4, §4.6, §4.8). */
export function loadListCloseTests({ open }: ContractContext): void {
  const closeAll = async (p: SessionPersistence, ids: string[]) => {
    for (const id of ids) await p.close(id)
  }

  describe('load', () => {
    test('continues the seqs: the next append starts at events.length', async () => {
      const a = await open()
      await a.create(meta('resume'))
      await a.append('resume', completeTurn(0, 1))
      await a.close('resume')
      const b = await open()
      const loaded = await b.load('resume')
      expect(await codeOf(b.append('resume', [ev(0, 'x')]))).toBe('E_SEQ_NOT_CONTIGUOUS')
      await b.append('resume', completeTurn(loaded.events.length, 2))
      await b.close('resume')
      expect((await b.inspect('resume')).events).toHaveLength(8)
    })

    test('unknown ids reject E_NOT_FOUND; invalid ids E_INVALID_ID; a live session E_SESSION_LIVE', async () => {
      const a = await open()
      expect(await codeOf(a.load('missing'))).toBe('E_NOT_FOUND')
      expect(await codeOf(a.inspect('missing'))).toBe('E_NOT_FOUND')
      expect(await codeOf(a.load(''))).toBe('E_INVALID_ID')
      await a.create(meta('live'))
      await a.append('live', completeTurn(0, 1))
      expect(await codeOf(a.load('live'))).toBe('E_SESSION_LIVE')
      await a.close('live')
      expect((await a.load('live')).events).toHaveLength(4)
      await a.close('live')
    })

    test('null or non-object options of load and list are E_CONFIG; nothing is left open', async () => {
      const a = await open()
      await a.create(meta('args'))
      await a.append('args', completeTurn(0, 1))
      await a.close('args')
      expect(await codeOf(a.load('args', null as never))).toBe('E_CONFIG')
      expect(await codeOf(a.load('args', 'yes' as never))).toBe('E_CONFIG')
      expect(await codeOf(a.list(null as never))).toBe('E_CONFIG')
      // A closeOpenTurn that is not a boolean would close the turn: refused before anything.
      const circular: Record<string, unknown> = {}
      circular.self = circular
      for (const bad of [0, 'no', null, 1, 1n, circular]) expect(await codeOf(a.load('args', { closeOpenTurn: bad as never }))).toBe('E_CONFIG')
      expect(await codeOf(a.load('args', { from: 1n as never }))).toBe('E_CONFIG')
      // None of them left the session open or locked: it loads.
      expect((await a.load('args')).events).toHaveLength(4)
      await a.close('args')
    })

    test('an open final turn is closed with the exact closers, durably, once', async () => {
      const a = await open()
      await a.create(meta('open-turn'))
      const events: SessionEvent[] = [
        ...completeTurn(0, 1),
        ev(4, 'turn/start', { turn: 2 }),
        ev(5, 'step/start', { turn: 2, step: 0 }),
        ev(6, 'assistant/message', {
          turn: 2,
          step: 0,
          content: [
            { type: 'tool-call', callId: 'c1', name: 'read', arguments: {} },
            { type: 'tool-call', callId: 'c2', name: 'grep', arguments: {} },
          ],
        }),
        ev(7, 'tool/call', { turn: 2, step: 0, callId: 'c1', name: 'read', arguments: {} }),
        ev(8, 'tool/result', { turn: 2, step: 0, callId: 'c2', content: [{ type: 'text', text: 'ok' }] }),
      ]
      await a.append('open-turn', events)
      await a.close('open-turn')
      const before = await a.inspect('open-turn')
      const time = T0 + 8
      const closers = [
        {
          seq: 9,
          type: 'tool/result',
          time,
          data: {
            turn: 2,
            step: 0,
            callId: 'c1',
            content: [{ type: 'text', text: INTERRUPTED_TOOL_TEXT }],
            isError: true,
            error: { name: 'InterruptedError', code: 'interrupted' },
          },
        },
        { seq: 10, type: 'step/end', time, data: { turn: 2, step: 0 } },
        { seq: 11, type: 'turn/end', time, data: { turn: 2, reason: { kind: 'interrupted' } } },
      ]
      expect(before.repair?.persisted).toBe(false)
      expect(before.repair?.closers).toEqual(closers)
      const loaded = await a.load('open-turn')
      expect(loaded.repair?.persisted).toBe(true)
      expect(loaded.repair?.closers).toEqual(closers)
      expect(loaded.events).toEqual([...events, ...closers])
      await a.close('open-turn')
      const again = await a.load('open-turn')
      expect(again.repair).toBeUndefined()
      expect(again.events).toEqual(loaded.events)
      await a.close('open-turn')
    })

    test('closeOpenTurn: false adopts an open turn without closing it', async () => {
      const a = await open()
      await a.create(meta('adopt'))
      await a.append('adopt', [ev(0, 'turn/start', { turn: 1 }), ev(1, 'user/message', { content: 'hi' })])
      await a.close('adopt')
      const loaded = await a.load('adopt', { closeOpenTurn: false })
      expect(loaded.events).toHaveLength(2)
      expect(loaded.repair).toBeUndefined()
      await a.append('adopt', [ev(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } })])
      await a.close('adopt')
      const closed = await a.load('adopt')
      expect(closed.repair).toBeUndefined()
      expect(closed.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end'])
      await a.close('adopt')
    })

    test('an empty open turn closes with time = last event time; balanced logs get no closers', async () => {
      const a = await open()
      await a.create(meta('just-started'))
      await a.append('just-started', [ev(0, 'turn/start', { turn: 7 })])
      await a.close('just-started')
      const loaded = await a.load('just-started')
      expect(loaded.repair?.closers).toEqual([
        { seq: 1, type: 'turn/end', time: T0, data: { turn: 7, reason: { kind: 'interrupted' } } },
      ])
      await a.close('just-started')
    })
  })


  describe('list and close', () => {
    test('locate does no I/O and gives a location of a known kind; list reports when each log was last written', async () => {
      const a = await open()
      const loc = a.locate(meta('not-yet', { cwd: '/somewhere' }))
      expect(LOCATION_KINDS).toContain(loc.kind)
      expect(await a.list()).toEqual([])
      const before = Date.now()
      await a.create(meta('timed'))
      await a.append('timed', completeTurn(0, 1))
      const first = (await a.list())[0]!
      await a.append('timed', completeTurn(4, 2))
      await a.close('timed')
      const second = (await a.list())[0]!
      // The last write's wall-clock time (what `session-jsonl prune` compares): near now, never going back.
      expect(Math.abs(first.mtimeMs - before)).toBeLessThan(60_000)
      expect(second.mtimeMs).toBeGreaterThanOrEqual(first.mtimeMs)
      expect(second.sizeBytes).toBeGreaterThan(first.sizeBytes)
    })

    test('lists materialized sessions newest first, then by id', async () => {
      const a = await open()
      const specs: [string, number, string | undefined][] = [
        ['b', T0, '/p1'],
        ['a', T0, undefined],
        ['newest', T0 + 10, '/p2'],
        ['old', T0 - 10, '/p1'],
      ]
      for (const [id, createdAt, cwd] of specs) {
        await a.create(meta(id, { createdAt, ...(cwd ? { cwd } : {}) }))
        await a.append(id, completeTurn(0, 1))
      }
      await a.create(meta('never-written'))
      await closeAll(a, ['a', 'b', 'newest', 'old', 'never-written'])
      const listing = await a.list()
      expect(listing.map((l) => l.meta.id)).toEqual(['newest', 'a', 'b', 'old'])
      expect(listing[0]?.meta).toEqual(meta('newest', { createdAt: T0 + 10, cwd: '/p2' }))
      expect(listing.every((l) => l.sizeBytes > 0 && LOCATION_KINDS.includes(l.location.kind))).toBe(true)
      // list names each session where locate said it would be
      for (const l of listing) expect(l.location).toEqual(a.locate(l.meta))
    })

    test('close is idempotent and ends appends; it waits for pending appends', async () => {
      const a = await open()
      await a.create(meta('closing'))
      const pending = a.append('closing', completeTurn(0, 1))
      await Promise.all([a.close('closing'), a.close('closing')])
      await pending
      await a.close('closing')
      expect(await codeOf(a.append('closing', completeTurn(4, 2)))).toBe('E_NOT_FOUND')
      expect((await a.inspect('closing')).events).toHaveLength(4)
    })
  })
}
