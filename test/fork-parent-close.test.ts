import { expect, test } from 'vitest'
import { createJsonlPersistence, type SessionEvent } from '../src/index.js'
import { createFaultInjectingFileSystem } from '../src/testing/index.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A fork reads its parent through one descriptor, which stays open until the child is published
// (the seed is streamed from it). A failure to close that read-only descriptor rejected the fork
// after its child existed: the child stayed, its writer leaked, and a retry got E_EXISTS.

const turn = (seq: number, t: number, fill: string): SessionEvent[] => [
  { seq, type: 'turn/start', time: 1, data: { turn: t } },
  { seq: seq + 1, type: 'user/message', time: 2, data: { content: fill } },
  { seq: seq + 2, type: 'turn/end', time: 3, data: { turn: t, reason: { kind: 'completed' } } },
]

for (const [name, fill] of [
  ['a small seed', 'x'],
  ['a streamed seed (over 1 MiB)', 'x'.repeat(3 << 20)],
] as const) {
  test(`fork with ${name}: a failing close of the parent's descriptor is logged; the fork resolves and its child is usable`, async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const warnings: string[] = []
    const p = createJsonlPersistence({ root, fs, logger: { warn: (m) => warnings.push(m) } })
    await p.create(meta('a'))
    await p.append('a', [...turn(0, 1, fill), ...turn(3, 2, 'y')])
    await p.close('a')
    fs.inject({ op: 'close', path: /[/]a\.jsonl$/, times: 1, code: 'EIO' })
    const child = await p.fork('a', { id: 'c', seedLength: 3, createdAt: 2 })
    expect(child.seedLength).toBe(3)
    expect(warnings).toEqual([expect.stringMatching(/^fork of 'a': closing the parent's log failed: .*EIO/)])
    await p.append('c', turn(3, 2, 'z'))
    await p.close('c')
    const loaded = await createJsonlPersistence({ root }).inspect('c')
    expect(loaded.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5])
    expect((loaded.events[1]!.data as { content: string }).content).toBe(fill)
  })
}
