// Many watchers of one caller's AbortSignal (§15.3): they all end when it aborts, Node warns about
// none of them, and the signal holds no listener of theirs once they have ended.
import { getEventListeners } from 'node:events'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import type { SessionEvent } from '../src/session/schema.js'

const meta = { id: 's', createdAt: 1_700_000_000_000, delegationDepth: 0 }

describe('watchers sharing one signal', () => {
  const warnings: string[] = []
  const onWarning = (w: Error) => void warnings.push(`${w.name}: ${w.message}`)
  beforeEach(() => {
    warnings.length = 0
    process.on('warning', onWarning)
  })
  afterEach(() => void process.off('warning', onWarning))

  test('20 watchers of one signal: no MaxListenersExceededWarning, all end at its abort', async () => {
    const p = createMemoryPersistence()
    await p.create(meta)
    await p.append('s', [{ seq: 0, type: 'x', time: 1 }])
    const stop = new AbortController()
    const iterators = Array.from({ length: 20 }, () => p.watch('s', { signal: stop.signal })[Symbol.asyncIterator]())
    for (const it of iterators) expect((await it.next()).value).toMatchObject({ seq: 0 })
    const waiting = iterators.map((it) => it.next()) // each now waits for a change
    await new Promise((r) => setImmediate(r)) // a warning is emitted on a later tick
    stop.abort()
    const ends = await Promise.all(waiting)
    expect(ends.map((r: IteratorResult<SessionEvent>) => r.done)).toEqual(Array(20).fill(true))
    await new Promise((r) => setImmediate(r))
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([])
  })

  test('watchers that end on their own (a break) take their listener off the signal', async () => {
    const p = createMemoryPersistence()
    await p.create(meta)
    await p.append('s', [{ seq: 0, type: 'x', time: 1 }])
    const stop = new AbortController()
    for (let i = 0; i < 20; i++) {
      for await (const _ of p.watch('s', { signal: stop.signal })) break
    }
    expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0)
    await new Promise((r) => setImmediate(r))
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([])
  })
})
