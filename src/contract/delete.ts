import { describe, expect, test } from 'vitest'
import type { SessionPersistence } from '../persistence.js'
import { codeOf, completeTurn, type ContractContext, isStore, meta, storedSession } from './fixtures.js'

/** `delete` (docs/contract.md §4.9). */
export function deleteTests({ open }: ContractContext): void {
  describe('delete', () => {
    test('removes the log for every instance: not loadable, not listed, and the id can be used again', async () => {
      const a = await open()
      await storedSession(a, 'doomed', 2)
      await storedSession(a, 'kept')
      const b = await open()
      await b.delete('doomed')
      expect(await codeOf(b.inspect('doomed'))).toBe('E_NOT_FOUND')
      expect(await codeOf(a.load('doomed'))).toBe('E_NOT_FOUND')
      expect((await a.list()).map((l) => l.meta.id)).toEqual(['kept'])
      expect(await codeOf(b.delete('doomed'))).toBe('E_NOT_FOUND') // once
      const c = await open()
      await c.create(meta('doomed', { createdAt: 5 }))
      await c.append('doomed', completeTurn(0, 9))
      await c.close('doomed')
      const reborn = await a.inspect('doomed')
      expect(reborn.meta.createdAt).toBe(5)
      expect(reborn.events).toEqual(completeTurn(0, 9))
      expect((await a.inspect('kept')).events).toHaveLength(4)
    })

    test('refuses an unknown or invalid id, a session this instance has open, and one another instance holds', async () => {
      const a = await open()
      expect(await codeOf(a.delete('missing'))).toBe('E_NOT_FOUND')
      expect(await codeOf(a.delete(''))).toBe('E_INVALID_ID')
      expect(await codeOf(a.delete('x'.repeat(245)))).toBe('E_INVALID_ID')

      await a.create(meta('open-here'))
      await a.append('open-here', completeTurn(0, 1))
      expect(await codeOf(a.delete('open-here'))).toBe('E_SESSION_LIVE')
      const b = await open()
      expect(await codeOf(b.delete('open-here'))).toBe('E_LOCKED')
      await a.append('open-here', completeTurn(4, 2)) // the refusals changed nothing
      await a.close('open-here')
      expect((await b.inspect('open-here')).events).toHaveLength(8)

      await b.load('open-here')
      expect(await codeOf(b.delete('open-here'))).toBe('E_SESSION_LIVE') // loaded counts as open
      expect(await codeOf(a.delete('open-here'))).toBe('E_LOCKED')
      await b.close('open-here')
      await a.delete('open-here')
      expect(await codeOf(b.inspect('open-here'))).toBe('E_NOT_FOUND')
    })

    test('a deleted session can be created again by the instance that deleted it', async () => {
      const a = await open()
      await storedSession(a, 'again')
      await a.delete('again')
      await a.create(meta('again'))
      await a.append('again', completeTurn(0, 2))
      await a.close('again')
      expect((await a.load('again')).events).toEqual(completeTurn(0, 2))
      await a.close('again')
    })

    test('ifLastWriteAtOrBefore deletes a session last written at or before that time, the listed time itself included', async () => {
      const a = await open()
      await storedSession(a, 'idle', 2)
      await storedSession(a, 'idle-too')
      const b = await open()
      const listed = await lastWriteOf(b, 'idle')
      await b.delete('idle', { ifLastWriteAtOrBefore: listed }) // exactly the listed time
      expect(await codeOf(b.inspect('idle'))).toBe('E_NOT_FOUND')
      await b.delete('idle-too', { ifLastWriteAtOrBefore: (await lastWriteOf(b, 'idle-too')) + 60_000 })
      expect(await codeOf(a.inspect('idle-too'))).toBe('E_NOT_FOUND')
      expect(await a.list()).toEqual([])
      expect(await codeOf(b.delete('idle', { ifLastWriteAtOrBefore: listed }))).toBe('E_NOT_FOUND')
    })

    test('ifLastWriteAtOrBefore refuses with E_SESSION_LIVE, deleting nothing, a session written after that time', async () => {
      const a = await open()
      const events = await storedSession(a, 'resumed')
      const b = await open()
      const listed = await lastWriteOf(b, 'resumed')
      // Another instance resumes the session after the listing, appends and closes it. Where
      // timestamps are coarse the append may carry the listed time itself, so write again until
      // the store reports a later last write (on most systems the first append does).
      for (let turn = 2; (await lastWriteOf(b, 'resumed')) <= listed; turn++) {
        expect(turn).toBeLessThan(10_000)
        await a.load('resumed')
        const more = completeTurn(events.length, turn)
        await a.append('resumed', more)
        await a.close('resumed')
        events.push(...more)
      }
      expect(await codeOf(b.delete('resumed', { ifLastWriteAtOrBefore: listed }))).toBe('E_SESSION_LIVE')
      // A finite time no Date can hold (before everything) refuses the same way, not E_IO or a RangeError.
      expect(await codeOf(b.delete('resumed', { ifLastWriteAtOrBefore: -1e16 }))).toBe('E_SESSION_LIVE')
      expect((await a.inspect('resumed')).events).toEqual(events)
      expect((await b.list()).map((l) => l.meta.id)).toEqual(['resumed'])
      // The refusal left it neither open nor locked: both instances can still resume it.
      expect((await a.load('resumed')).events).toEqual(events)
      await a.close('resumed')
      expect((await b.load('resumed')).events).toEqual(events)
      await b.close('resumed')
      // A time taken after that write allows the delete.
      await b.delete('resumed', { ifLastWriteAtOrBefore: await lastWriteOf(b, 'resumed') })
      expect(await codeOf(a.inspect('resumed'))).toBe('E_NOT_FOUND')
    })

    test('an ifLastWriteAtOrBefore that is not a finite number is E_CONFIG and deletes nothing', async () => {
      const a = await open()
      const events = await storedSession(a, 'guarded')
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, '0', null]) {
        expect(await codeOf(a.delete('guarded', { ifLastWriteAtOrBefore: bad as number }))).toBe('E_CONFIG')
      }
      expect((await a.load('guarded')).events).toEqual(events)
      await a.close('guarded')
    })

    test('a delete option the contract does not know (a misspelt guard) is E_CONFIG naming it and deletes nothing', async () => {
      const a = await open()
      const events = await storedSession(a, 'misspelt')
      // `ifLastWriteBefore` for `ifLastWriteAtOrBefore`: taken as no condition, it deleted.
      const err = await a.delete('misspelt', { ifLastWriteBefore: 0 } as never).then(
        () => undefined,
        (e: unknown) => e as { code?: string; message?: string },
      )
      expect(err?.code).toBe('E_CONFIG')
      expect(err?.message).toContain('ifLastWriteBefore')
      expect(await codeOf(a.delete('misspelt', { ifLastWriteAtOrBefore: 0, force: true } as never))).toBe('E_CONFIG')
      expect((await a.load('misspelt')).events).toEqual(events)
      await a.close('misspelt')
    })

    test('forks of a deleted session keep their copied seed and stay loadable', async (ctx) => {
      const a = await open()
      if (!isStore(a)) return ctx.skip() // fork is part of a full backend, not of the seam
      const events = await storedSession(a, 'parent', 2)
      await a.fork('parent', { id: 'child', seedLength: 4 })
      await a.close('child')
      await a.delete('parent')
      const b = await open()
      const child = await b.load('child')
      expect(child.meta.parentSession).toBe('parent')
      expect(child.events).toEqual(events.slice(0, 4))
      await b.close('child')
    })
  })
}

/** The session's last write as the store's own listing reports it. */
async function lastWriteOf(p: SessionPersistence, id: string): Promise<number> {
  const listing = (await p.list()).find((l) => l.meta.id === id)
  expect(listing).toBeDefined()
  return listing!.mtimeMs
}
