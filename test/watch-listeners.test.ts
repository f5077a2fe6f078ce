import { expect, test } from 'vitest'
import { createJsonlPersistence, type SessionPersistence } from '../src/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// The watch loop passes one signal to every wait of a watcher (src/session/watch-loop.ts): a
// source must not leave a listener on it per wait. Node warns past 10 listeners on one signal.
for (const [name, make] of [
  ['memory', async () => createMemoryPersistence()],
  ['JSONL', async () => createJsonlPersistence({ root: await tmpRoot(), sync: 'none' })],
] as const) {
  test(`${name}: a watcher woken 50 times leaves no listener behind per wait`, async () => {
    const warnings: string[] = []
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`)
    process.on('warning', onWarning)
    try {
      const p: SessionPersistence = await make()
      await p.create(meta('s'))
      const stop = new AbortController()
      const seen: number[] = []
      const watching = (async () => {
        for await (const e of p.watch('s', { signal: stop.signal })) {
          seen.push(e.seq)
          if (seen.length === 50) break
        }
      })()
      for (let i = 0; i < 50; i++) {
        await new Promise((r) => setTimeout(r, 2))
        await p.append('s', [{ seq: i, type: 'x', time: 1 }])
        // let the watcher yield and wait again before the next append
        for (let k = 0; k < 200 && seen.length <= i; k++) await new Promise((r) => setTimeout(r, 1))
      }
      await watching
      stop.abort()
      await new Promise((r) => setTimeout(r, 20))
      expect(seen).toEqual(Array.from({ length: 50 }, (_, i) => i))
      expect(warnings).toEqual([])
    } finally {
      process.off('warning', onWarning)
    }
  })
}
