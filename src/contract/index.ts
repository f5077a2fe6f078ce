import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { INTERRUPTED_TOOL_TEXT } from '../core/closers.js'
import type { SessionEvent, SessionMeta } from '../core/schema.js'
import { type ErrorCode, isSessionPersistenceError } from '../errors.js'
import type { SessionPersistence } from '../persistence.js'

export interface PersistenceContractOptions {
  /** Shown in the suite's name. */
  name: string
  /**
   * Opens an instance over the store kept in `dir`: a fresh, empty directory per test. Calling
   * it again with the same `dir` must open another instance over the same stored sessions
   * (a restart, or a second process).
   */
  factory: (dir: string) => SessionPersistence | Promise<SessionPersistence>
}

const T0 = 1_700_000_000_000

function meta(id: string, extra: Partial<SessionMeta> = {}): SessionMeta {
  return { id, createdAt: T0, delegationDepth: 0, ...extra }
}

function ev(seq: number, type: string, data?: SessionEvent['data']): SessionEvent {
  return data === undefined ? { seq, type, time: T0 + seq } : { seq, type, time: T0 + seq, data }
}

function completeTurn(seq: number, turn: number): SessionEvent[] {
  return [
    ev(seq, 'turn/start', { turn }),
    ev(seq + 1, 'user/message', { content: `question ${turn}` }),
    ev(seq + 2, 'assistant/message', { turn, step: 0, content: [{ type: 'text', text: `answer ${turn}` }] }),
    ev(seq + 3, 'turn/end', { turn, reason: { kind: 'completed' } }),
  ]
}

async function codeOf(promise: Promise<unknown>): Promise<ErrorCode | 'resolved' | 'foreign error'> {
  try {
    await promise
    return 'resolved'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : 'foreign error'
  }
}

function codeOfSync(fn: () => unknown): ErrorCode | 'returned' | 'foreign error' {
  try {
    fn()
    return 'returned'
  } catch (err) {
    return isSessionPersistenceError(err) ? err.code : 'foreign error'
  }
}

/**
 * The conformance suite every `SessionPersistence` must pass (SPEC 10). It checks the seam's
 * observable behaviour only — never a backend's storage format.
 */
export function runPersistenceContract({ name, factory }: PersistenceContractOptions): void {
  describe(`SessionPersistence contract: ${name}`, () => {
    let dir: string
    const opened: SessionPersistence[] = []
    const open = async () => {
      const p = await factory(dir)
      opened.push(p)
      return p
    }
    const closeAll = async (p: SessionPersistence, ids: string[]) => {
      for (const id of ids) await p.close(id)
    }

    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), 'spj-contract-'))
    })
    afterEach(async () => {
      for (const p of opened.splice(0)) {
        const closer = (p as { closeAll?: () => Promise<void> }).closeAll
        if (closer) await closer.call(p)
      }
      await rm(dir, { recursive: true, force: true })
    })

    describe('create and append', () => {
      test('appended events load back deep-equal in another instance, extra fields and unknown types kept', async () => {
        const a = await open()
        const m = meta('round-trip', { cwd: '/work/project', model: 'm-1', tags: ['a', 'b'] })
        await a.create(m)
        const events: SessionEvent[] = [
          ...completeTurn(0, 1),
          { seq: 4, type: 'vendor/telemetry', time: T0 + 4, data: { n: 1.5, nested: [null, true, 'x'] }, ignorable: true },
          { seq: 5, type: 'custom', time: T0 + 5, extraField: { kept: 'verbatim' } },
        ]
        await a.append('round-trip', events.slice(0, 2))
        await a.append('round-trip', events.slice(2))
        await a.close('round-trip')
        const b = await open()
        const loaded = await b.load('round-trip')
        expect(loaded.meta).toEqual(m)
        expect(loaded.events).toEqual(events)
        expect(loaded.repair).toBeUndefined()
        await b.close('round-trip')
      })

      test('a created session without events leaves nothing: not listed, not loadable, id reusable', async () => {
        const a = await open()
        await a.create(meta('empty'))
        await a.close('empty')
        expect(await a.list()).toEqual([])
        const b = await open()
        expect(await codeOf(b.load('empty'))).toBe('E_NOT_FOUND')
        await b.create(meta('empty'))
        await b.close('empty')
      })

      test('create rejects E_EXISTS for a stored id and for an id this instance tracks', async () => {
        const a = await open()
        await a.create(meta('dup'))
        expect(await codeOf(a.create(meta('dup')))).toBe('E_EXISTS')
        await a.append('dup', completeTurn(0, 1))
        await a.close('dup')
        const b = await open()
        expect(await codeOf(b.create(meta('dup')))).toBe('E_EXISTS')
      })

      test('create rejects invalid meta and ids', async () => {
        const a = await open()
        expect(await codeOf(a.create(meta('')))).toBe('E_INVALID_ID')
        expect(await codeOf(a.create(meta('x'.repeat(245))))).toBe('E_INVALID_ID')
        expect(await codeOf(a.create(meta('bad', { createdAt: -1 })))).toBe('E_INVALID_META')
        expect(await codeOf(a.create(meta('bad', { delegationDepth: 0.5 })))).toBe('E_INVALID_META')
        expect(await codeOf(a.create(meta('bad', { seedLength: 2 })))).toBe('E_INVALID_META')
        expect(await codeOf(a.create({ ...meta('bad'), type: 'x' } as SessionMeta))).toBe('E_INVALID_META')
        expect(await codeOf(a.create({ ...meta('bad'), version: 1 } as SessionMeta))).toBe('E_INVALID_META')
        expect(await codeOf(a.create({ id: 'bad', createdAt: T0 } as SessionMeta))).toBe('E_INVALID_META')
        expect(codeOfSync(() => a.locate(meta('')))).toBe('E_INVALID_ID')
        expect(codeOfSync(() => a.locate(meta('ok', { cwd: 'relative/path' })))).toBe('E_INVALID_META')
        expect(await a.list()).toEqual([])
      })

      test('append to a session this instance did not create, load or fork rejects E_NOT_FOUND', async () => {
        const a = await open()
        expect(await codeOf(a.append('nobody', completeTurn(0, 1)))).toBe('E_NOT_FOUND')
      })

      test('bad batches reject with their code and write nothing', async () => {
        const a = await open()
        await a.create(meta('bad-batch'))
        await a.append('bad-batch', completeTurn(0, 1))
        const cases: [SessionEvent[], ErrorCode][] = [
          [[ev(5, 'x')], 'E_SEQ_NOT_CONTIGUOUS'],
          [[ev(3, 'x')], 'E_SEQ_NOT_CONTIGUOUS'],
          [[ev(4, 'x'), ev(6, 'x')], 'E_SEQ_NOT_CONTIGUOUS'],
          [[{ seq: 4, type: '', time: 1 }], 'E_INVALID_EVENT'],
          [[{ seq: -1, type: 'x', time: 1 }], 'E_INVALID_EVENT'],
          [[{ seq: 4, type: 'x', time: Number.NaN }], 'E_INVALID_EVENT'],
          [[{ seq: 4, type: 'x', time: 1, ignorable: false } as unknown as SessionEvent], 'E_INVALID_EVENT'],
          [[{ seq: 4, type: 'x', time: 1, data: { big: 10n } } as unknown as SessionEvent], 'E_NOT_JSON'],
          [[ev(4, 'x'), { seq: 5, type: 'x', time: 1, data: new Date() } as unknown as SessionEvent], 'E_NOT_JSON'],
        ]
        for (const [batch, code] of cases) expect(await codeOf(a.append('bad-batch', batch))).toBe(code)
        await a.append('bad-batch', [ev(4, 'after-rejections')])
        await a.close('bad-batch')
        const loaded = await a.load('bad-batch')
        expect(loaded.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
        expect(loaded.events[4]?.type).toBe('after-rejections')
        await a.close('bad-batch')
      })

      test('an empty batch is a no-op', async () => {
        const a = await open()
        await a.create(meta('noop'))
        await a.append('noop', [])
        await a.close('noop')
        expect(await a.list()).toEqual([])
      })

      test('the batch is captured when append is called', async () => {
        const a = await open()
        await a.create(meta('capture'))
        const batch = completeTurn(0, 1)
        const pending = a.append('capture', batch)
        ;(batch[1]!.data as { content: string }).content = 'mutated'
        batch.pop()
        await pending
        await a.close('capture')
        const loaded = await a.load('capture', { closeOpenTurn: false })
        expect(loaded.events).toHaveLength(4)
        expect(loaded.events[1]?.data).toEqual({ content: 'question 1' })
        await a.close('capture')
      })

      test('appends issued without awaiting are written in call order', async () => {
        const a = await open()
        await a.create(meta('burst'))
        const all = [...completeTurn(0, 1), ...completeTurn(4, 2), ...completeTurn(8, 3)]
        await Promise.all([a.append('burst', all.slice(0, 4)), a.append('burst', all.slice(4, 8)), a.append('burst', all.slice(8))])
        await a.close('burst')
        expect((await a.load('burst')).events).toEqual(all)
        await a.close('burst')
      })
    })

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

      test('a second instance cannot write a session another instance holds (E_LOCKED)', async () => {
        const a = await open()
        await a.create(meta('held'))
        await a.append('held', completeTurn(0, 1))
        const b = await open()
        expect(await codeOf(b.load('held'))).toBe('E_LOCKED')
        expect((await b.inspect('held')).events).toHaveLength(4)
        await a.close('held')
        expect((await b.load('held')).events).toHaveLength(4)
        await b.close('held')
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
        expect(listing.every((l) => l.sizeBytes > 0 && l.location.kind === 'jsonl')).toBe(true)
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
  })
}
