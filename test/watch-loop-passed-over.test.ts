import { expect, test } from 'vitest'
import type { SessionEvent } from '../src/session/schema.js'
import { watchLoop, type WatchSource } from '../src/session/watch-loop.js'

// A source whose poll keeps giving events the loop passes over (none at the next seq: damage a
// source did not judge) must not be polled again at once: the loop polled it for ever, as fast as
// it answered (PostgreSQL's watch of a session missing a row did ~1,500 queries a second).

test('a poll whose events are all passed over waits for a change before the next poll', async () => {
  let polls = 0
  let changes = 0
  const source: WatchSource = {
    poll: async (next) => {
      polls++
      return { kind: 'events', events: next === 0 ? [{ seq: 0, type: 'x', time: 1 } as SessionEvent, { seq: 2, type: 'x', time: 1 } as SessionEvent] : [{ seq: 2, type: 'x', time: 1 } as SessionEvent] }
    },
    changed: (signal) =>
      new Promise<void>((resolve) => {
        changes++
        const timer = setTimeout(resolve, 100)
        signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true })
      }),
    close: async () => {},
  }
  const stop = new AbortController()
  const seen: number[] = []
  const done = (async () => {
    for await (const e of watchLoop(source, 0, stop.signal)) seen.push(e.seq)
  })()
  await new Promise((r) => setTimeout(r, 350))
  stop.abort()
  await done
  expect(seen).toEqual([0])
  // One poll a change (about one every 100 ms), not thousands.
  expect(polls).toBeLessThanOrEqual(changes + 1)
  expect(polls).toBeLessThan(20)
})
