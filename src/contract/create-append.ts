import { describe, expect, test } from 'vitest'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import type { ErrorCode } from '../errors.js'
import { codeOf, codeOfSync, completeTurn, type ContractContext, ev, meta, T0 } from './fixtures.js'

/** Creating sessions and appending to them (docs/contract.md §4.2, §4.3). */
export function createAndAppendTests({ open }: ContractContext): void {
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

    test("meta fields named like Object.prototype's members are kept (load, list, another instance); a field named __proto__ is E_INVALID_META", async () => {
      // `in` saw the inherited names, and the header line left such fields out without a word.
      const a = await open()
      const m = meta('proto-names', { constructor: 'c', toString: 't', valueOf: [1], hasOwnProperty: 1, isPrototypeOf: { nested: true } })
      await a.create(m)
      await a.append('proto-names', completeTurn(0, 1))
      await a.close('proto-names')
      const b = await open()
      const loaded = await b.load('proto-names')
      expect(Object.entries(loaded.meta)).toEqual(Object.entries(m))
      expect((await b.list()).find((l) => l.meta.id === 'proto-names')?.meta).toEqual(m)
      await b.close('proto-names')
      for (const extra of ['{"__proto__":{"x":1}}', '{"__proto__":"s"}', '{"deep":{"__proto__":1}}']) {
        expect([extra, await codeOf(b.create({ ...meta(`proto-${extra.length}`), ...(JSON.parse(extra) as object) }))]).toEqual([extra, 'E_INVALID_META'])
      }
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

    test('meta nested up to 100 levels deep is kept and loads back; deeper is E_INVALID_META, however deep', async () => {
      const nest = (levels: number): SessionMeta['x'] => {
        let v: SessionMeta['x'] = 'leaf'
        for (let i = 0; i < levels; i++) v = i % 2 ? [v] : { v }
        return v
      }
      const a = await open()
      // The meta is level 0, its field `deep` level 1: 99 wrappings under it reach level 100.
      const m = meta('deep-ok', { deep: nest(99) })
      await a.create(m)
      await a.append('deep-ok', completeTurn(0, 1))
      await a.close('deep-ok')
      const b = await open()
      expect((await b.load('deep-ok')).meta).toEqual(m)
      await b.close('deep-ok')
      expect((await b.list()).map((l) => l.meta.id)).toEqual(['deep-ok'])
      for (const levels of [100, 5000]) {
        const err = await a.create(meta('deep-bad', { deep: nest(levels) })).catch((e: unknown) => e)
        expect([levels, (err as { code?: unknown }).code]).toEqual([levels, 'E_INVALID_META'])
        expect((err as Error).message).toContain('nested more than 100 levels deep')
      }
      expect(await codeOf(a.load('deep-bad'))).toBe('E_NOT_FOUND')
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

    test('a first append refused E_EXISTS (another instance stored the id since create) leaves this instance no lock on it', async () => {
      const a = await open()
      const b = await open()
      await a.create(meta('raced'))
      await b.create(meta('raced'))
      const events = completeTurn(0, 1)
      await a.append('raced', events)
      await a.close('raced')
      // b lost the race: its log was never published, and the session is a's.
      expect(await codeOf(b.append('raced', completeTurn(0, 1)))).toBe('E_EXISTS')
      // a resumes it while b still tracks its own created session: b must not hold its lock.
      expect((await a.load('raced')).events).toEqual(events)
      await a.append('raced', completeTurn(events.length, 2))
      // b's created session is still refused, and still holds no lock after that refusal.
      expect(await codeOf(b.append('raced', completeTurn(0, 1)))).toBe('E_LOCKED')
      await a.close('raced')
      expect(await codeOf(b.append('raced', completeTurn(0, 1)))).toBe('E_EXISTS')
      const c = await open()
      expect((await c.load('raced')).events).toHaveLength(events.length * 2)
      await c.close('raced')
      await b.close('raced')
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
      // An id that is no string is E_INVALID_ID, as for every other operation (not a TypeError
      // from naming it in a message).
      expect(await codeOf(a.append(Symbol('id') as unknown as string, completeTurn(0, 1)))).toBe('E_INVALID_ID')
      expect(await codeOf(a.append(7 as unknown as string, completeTurn(0, 1)))).toBe('E_INVALID_ID')
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

    test('an event whose JSON would differ from what was checked is refused: getters of its class, an inherited or own toJSON, a getter that throws', async () => {
      const a = await open()
      await a.create(meta('not-plain'))
      await a.append('not-plain', completeTurn(0, 1))
      class Getters {
        get seq() {
          return 4
        }
        get type() {
          return 'x'
        }
        get time() {
          return 1
        }
      }
      const inheritedToJSON = Object.assign(Object.create({ toJSON: () => ({ seq: 99, type: 'y', time: 1 }) }), { seq: 4, type: 'x', time: 1 })
      const inheritedIgnorable = Object.assign(Object.create({ ignorable: true }), { seq: 4, type: 'x', time: 1 })
      const throwing = {
        seq: 4,
        type: 'x',
        time: 1,
        get data() {
          throw new Error('boom')
        },
      }
      const cases: [unknown, ErrorCode][] = [
        [new Getters(), 'E_INVALID_EVENT'],
        [inheritedIgnorable, 'E_INVALID_EVENT'],
        [Object.defineProperty({ seq: 4, time: 1 }, 'type', { value: 'x', enumerable: false }), 'E_INVALID_EVENT'],
        [inheritedToJSON, 'E_NOT_JSON'],
        [{ seq: 4, type: 'x', time: 1, toJSON: () => ({}) }, 'E_NOT_JSON'],
        [throwing, 'E_NOT_JSON'],
      ]
      for (const [event, code] of cases) expect(await codeOf(a.append('not-plain', [event as SessionEvent]))).toBe(code)
      // A class instance whose fields are its own is serialized as they are: accepted.
      class Fields {
        seq = 4
        type = 'from-a-class'
        time = T0 + 4
        data = { kept: true }
      }
      await a.append('not-plain', [new Fields() as unknown as SessionEvent])
      await a.close('not-plain')
      const b = await open()
      const loaded = await b.load('not-plain')
      expect(loaded.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
      expect(loaded.events[4]).toEqual({ seq: 4, type: 'from-a-class', time: T0 + 4, data: { kept: true } })
      await b.close('not-plain')
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

}
