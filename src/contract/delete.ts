import { describe, expect, test } from 'vitest'
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
