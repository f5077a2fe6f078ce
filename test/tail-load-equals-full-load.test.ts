import fc from 'fast-check'
import { appendFile, copyFile, mkdir, readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { expect, test } from 'vitest'
import { createJsonlPersistence, toModelHistory } from '../src/index.js'
import { buildLog, logEndArb, logStepArb, tornBytes } from './helpers/random-log.js'
import { meta } from './helpers/events.js'
import { tailStartOf } from '../src/session/tail-start.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §15.1: for every log whose lines before firstSeq are undamaged, a load from the last
// compaction gives the history view, the repair and the next seq of a full load — and leaves the
// same bytes on disk.
test('a load from the last compaction equals a full load: history view, repair, bytes on disk, next seq', async () => {
  let tails = 0
  await fc.assert(
    fc.asyncProperty(fc.array(logStepArb, { minLength: 1, maxLength: 14 }), logEndArb, async (steps, end) => {
      const events = buildLog(steps, end)
      const fullRoot = await tmpRoot()
      const tailRoot = await tmpRoot()
      const writer = createJsonlPersistence({ root: fullRoot, sync: 'none' })
      await writer.create(meta('s'))
      await writer.append('s', events)
      const path = writer.locate(meta('s')).path
      await writer.close('s')
      await appendFile(path, tornBytes(end, events.length))
      const tailPath = join(tailRoot, path.slice(fullRoot.length))
      await mkdir(dirname(tailPath), { recursive: true })
      await copyFile(path, tailPath)

      const full = await createJsonlPersistence({ root: fullRoot, sync: 'none' }).load('s')
      const tailStore = createJsonlPersistence({ root: tailRoot, sync: 'none' })
      const tail = await tailStore.load('s', { from: 'last-compaction' })
      if (tail.firstSeq > 0) tails++

      expect(tail.events).toEqual(full.events.slice(tail.firstSeq))
      // …and starts where the contract says (§15.1), not earlier, when the log needed no repair.
      if (full.repair === undefined) expect(tail.firstSeq).toBe(tailStartOf(full.events))
      expect(toModelHistory(tail.events)).toEqual(toModelHistory(full.events))
      expect(tail.repair).toEqual(full.repair)
      expect(await readFile(tailPath)).toEqual(await readFile(path))
      // the next append lands at the same seq
      const next = full.events.length
      expect(tail.firstSeq + tail.events.length).toBe(next)
      await tailStore.append('s', [{ seq: next, type: 'x', time: 1 }])
      await tailStore.close('s')
    }),
    { numRuns: 150 },
  )
  // the generator must exercise real tails, not only full loads
  console.log(`tail loads past seq 0: ${tails} of 150`)
  expect(tails).toBeGreaterThan(15) // about 44 of 150 on average: far enough from chance to never flake
}, 120_000)
