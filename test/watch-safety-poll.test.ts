import { expect, test } from 'vitest'
import { createJsonlPersistence, createNodeFileSystem, type FileSystem } from '../src/index.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A seam without directory notifications leaves a JSONL watcher to its safety poll (one timer
// for the watcher's life, refreshed by each wait, armed again after it fired): it still sees
// every append, each once, in order, across several polls.
test('JSONL watch without notifications: the safety poll yields every append, poll after poll', async () => {
  const root = await tmpRoot()
  const fs: FileSystem = { ...createNodeFileSystem(), watchDir: undefined }
  const writer = createJsonlPersistence({ root, sync: 'none' })
  await writer.create(meta('s'))
  await writer.append('s', [{ seq: 0, type: 'x', time: 1 }])
  const stop = new AbortController()
  const seen: number[] = []
  const watching = (async () => {
    for await (const e of createJsonlPersistence({ root, fs, sync: 'none' }).watch('s', { signal: stop.signal })) {
      seen.push(e.seq)
      if (seen.length === 4) break
    }
  })()
  const until = async (n: number) => {
    for (let i = 0; i < 400 && seen.length < n; i++) await new Promise((r) => setTimeout(r, 10))
  }
  await until(1)
  for (let seq = 1; seq < 4; seq++) {
    await writer.append('s', [{ seq, type: 'x', time: 1 }])
    await until(seq + 1) // each needs a poll of its own: the timer fired before, and is armed again
  }
  await watching
  stop.abort()
  expect(seen).toEqual([0, 1, 2, 3])
  await writer.closeAll()
}, 20_000)
