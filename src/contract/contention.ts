import { describe, expect, test } from 'vitest'
import { codeOf, completeTurn, type ContractContext, meta } from './fixtures.js'

/**
 * Two instances of one backend over one store, as two processes over one root (docs/contract.md
 * §5.3, §4.4): one writer per session, and a reader polling for a session never delays its writer.
 */
export function contentionTests({ open }: ContractContext): void {
  /** Two instances that both created `id` while nothing was stored (both may). */
  const bothCreate = async (id: string) => {
    const a = await open()
    const b = await open()
    await a.create(meta(id))
    await b.create(meta(id))
    return [a, b] as const
  }
  const otherBatch = [...completeTurn(0, 7), ...completeTurn(4, 8)]

  describe('two instances contending for one session', () => {
    test('the second gets E_LOCKED while the first writes; after the first closes it loads and continues', async () => {
      const a = await open()
      const b = await open()
      await a.create(meta('held'))
      await a.append('held', completeTurn(0, 1))
      expect(await codeOf(b.load('held'))).toBe('E_LOCKED')
      expect(await codeOf(b.load('held', { closeOpenTurn: false }))).toBe('E_LOCKED')
      expect(await codeOf(b.delete('held'))).toBe('E_LOCKED')
      expect(await codeOf(b.create(meta('held')))).toBe('E_EXISTS')
      expect(await codeOf(b.append('held', completeTurn(4, 2)))).toBe('E_NOT_FOUND')
      expect((await b.inspect('held')).events).toHaveLength(4) // reading never needs the lock
      await a.append('held', completeTurn(4, 2)) // the refused attempts changed nothing for the holder
      await a.close('held')

      const loaded = await b.load('held')
      expect(loaded.events).toEqual([...completeTurn(0, 1), ...completeTurn(4, 2)])
      await b.append('held', completeTurn(8, 3))
      expect(await codeOf(a.load('held'))).toBe('E_LOCKED') // the roles have turned
      expect(await codeOf(a.append('held', completeTurn(12, 4)))).toBe('E_NOT_FOUND')
      await b.close('held')

      const c = await open()
      expect((await c.load('held')).events).toHaveLength(12)
      await c.close('held')
    })

    test('a failed load leaves the session neither open nor locked', async () => {
      const a = await open()
      const b = await open()
      await a.create(meta('busy'))
      await a.append('busy', completeTurn(0, 1))
      expect(await codeOf(b.load('busy'))).toBe('E_LOCKED')
      await a.close('busy')
      expect(await codeOf(b.append('busy', completeTurn(4, 2)))).toBe('E_NOT_FOUND')
      const c = await open()
      expect((await c.load('busy')).events).toHaveLength(4) // b's refused load holds nothing
      await c.close('busy')
    })

    test('two instances materializing one new id at once: exactly one wins, the other writes nothing', async () => {
      const [a, b] = await bothCreate('race')
      const batchA = completeTurn(0, 1)
      const batchB = otherBatch
      const [ra, rb] = await Promise.allSettled([a.append('race', batchA), b.append('race', batchB)])
      const outcomes = [ra.status, rb.status].sort()
      expect(outcomes).toEqual(['fulfilled', 'rejected'])
      const loser = (ra.status === 'rejected' ? ra : rb) as PromiseRejectedResult
      expect(['E_EXISTS', 'E_LOCKED']).toContain((loser.reason as { code?: string }).code)
      const stored = (await a.inspect('race')).events
      expect(stored).toEqual(ra.status === 'fulfilled' ? batchA : batchB)
      await a.close('race')
      await b.close('race')
    })

    test('an instance that created an id another instance has since published writes nothing into that log', async () => {
      const [a, b] = await bothCreate('taken')
      await a.append('taken', completeTurn(0, 1))
      await a.close('taken') // published, and the lock is free again
      expect(await codeOf(b.append('taken', otherBatch))).toBe('E_EXISTS')
      expect((await b.inspect('taken')).events).toEqual(completeTurn(0, 1))
      await b.close('taken')
      const c = await open()
      expect((await c.load('taken')).events).toEqual(completeTurn(0, 1))
      await c.close('taken')
    })

    test('a reader polling for a session that does not exist yet never delays its creator', async () => {
      const writer = await open()
      const poller = await open()
      await writer.create(meta('awaited'))
      // One poller loading again as soon as each attempt fails, while the creator writes.
      const codes = [await codeOf(poller.load('awaited'))]
      let settled = false
      const written = writer.append('awaited', completeTurn(0, 1)).finally(() => {
        settled = true
      })
      do codes.push(await codeOf(poller.load('awaited')))
      while (!settled)
      await written // never E_LOCKED: a load that finds no log takes no lock
      for (const code of codes) expect(['E_NOT_FOUND', 'E_LOCKED']).toContain(code)
      await writer.append('awaited', completeTurn(4, 2))
      await writer.close('awaited')
      expect((await poller.load('awaited')).events).toHaveLength(8)
      await poller.close('awaited')
    })
  })
}
