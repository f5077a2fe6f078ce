import { readFile, writeFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { SessionEvent } from '../src/session/schema.js'
import { HashChain } from '../src/torture/hash-chain.js'
import { type Acked, verifyAcked } from '../src/torture/kill-runner.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// The torture rigs' check of what was acknowledged (src/torture/kill-runner.ts): a problem in one
// session must not hide another's. A power cut excuses a lost tail, never changed events, so a
// lost tail in one session reported alone would excuse changed events in the next.
describe('verifyAcked', () => {
  test('regression: reports every session\'s problem: a lost tail in one does not hide changed events in another', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, formatVersion: 0 })
    const acked: Acked = new Map()
    const events = (n: number): SessionEvent[] => Array.from({ length: n }, (_, i) => ({ seq: i, type: 'note', time: 1, data: { n: i } }))
    for (const id of ['a', 'b']) {
      await p.create(meta(id))
      await p.append(id, events(3))
      const chain = new HashChain()
      for (const e of events(3)) chain.add(e)
      acked.set(id, { count: chain.count, digest: chain.digest })
    }
    await p.closeAll()
    // a: its last acknowledged event gone (a tail lost); b: an acknowledged event changed.
    const pathA = p.locate(meta('a')).path
    const linesA = (await readFile(pathA, 'utf8')).split('\n')
    await writeFile(pathA, `${linesA.slice(0, -2).join('\n')}\n`)
    const pathB = p.locate(meta('b')).path
    await writeFile(pathB, (await readFile(pathB, 'utf8')).replace('"n":1', '"n":7'))
    const { problems } = await verifyAcked(root, acked)
    expect(problems).toEqual(['a: 1 acknowledged events lost', 'b: acknowledged events lost or changed'])
  })
})
