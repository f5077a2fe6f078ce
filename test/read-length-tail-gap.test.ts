import { appendFile, readFile, writeFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence, type SessionEvent } from '../src/index.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §15.2: `length` is the number of valid events stored, whatever the range. A last line whose seq
// does not follow the line before it (a seq gap) is cut by a load;
// the backward look for the last event took it as one, so a range that does not reach the end
// said 17 where one that does said 15, and `read({ fromSeq: 16 })` returned the line a load cuts.

const msg = (seq: number): SessionEvent => ({ seq, type: 'user/message', time: 1, data: { text: `m${seq}` } })

for (const formatVersion of [0, 1] as const) {
  {
    test(`version ${formatVersion}, a seq gap at the end: every range says the length a load keeps, never returns the cut line`, async () => {
      const root = await tmpRoot()
      const p = createJsonlPersistence({ root, formatVersion })
      await p.create(meta('g'))
      await p.append('g', Array.from({ length: 17 }, (_, i) => msg(i)))
      await p.closeAll()
      const path = p.locate(meta('g')).path
      const lines = (await readFile(path, 'utf8')).split('\n') // header, seqs 0..16, ''
      // Keep seqs 0..14, then seq 16's line: a gap.
      await writeFile(path, `${lines.slice(0, 16).join('\n')}\n`)
      await appendFile(path, `${lines[17]!}\n`)
      const inspected = await createJsonlPersistence({ root }).inspect('g')
      expect(inspected.repair?.droppedLines).toBe(1)
      const stored = inspected.events.length - (inspected.repair?.closers.length ?? 0)
      expect(stored).toBe(15)
      const q = createJsonlPersistence({ root })
      for (const range of [undefined, { last: 3 }, { fromSeq: 2, toSeq: 8 }, { fromSeq: 14 }, { fromSeq: 15 }, { fromSeq: 16 }]) {
        const r = await q.read('g', range)
        expect({ range, length: r.length }).toEqual({ range, length: 15 })
        expect(r.events.every((e) => e.seq < 15)).toBe(true)
      }
      expect((await q.read('g', { fromSeq: 2, toSeq: 8 })).events.map((e) => e.seq)).toEqual([2, 3, 4, 5, 6, 7])
    })
  }
}
