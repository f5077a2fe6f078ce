// Property: for any sequence of puts (with forks that reuse channel versions, as time travel
// does), putWrites (regular and special channels, repeats) and namespaces that LangGraph could
// make, the saver answers getTuple and list exactly as MemorySaver does, whatever the values
// (JSON, nested bytes, Maps) — also after a restart that rebuilds the index from the log; and
// its getDeltaChannelHistory (answered from the index) gives what the base class's walk gives.
import { BaseCheckpointSaver, type Checkpoint, MemorySaver, uuid6 } from '@langchain/langgraph-checkpoint'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'

const CHANNELS = ['messages', 'count', 'blob', 'branch:to:a']
const NAMESPACES = ['', 'sub:1']
const TASKS = ['task-a', 'task-b']
const WRITE_CHANNELS = ['messages', 'count', '__interrupt__', '__error__', '__resume__']

// Not a top-level Uint8Array: MemorySaver reads every value back as `json`, so it cannot return
// one (test/langgraph-log.test.ts checks ours byte for byte).
const value = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.record({ bytes: fc.uint8Array({ maxLength: 4 }), n: fc.integer() }),
  fc.array(fc.tuple(fc.string({ maxLength: 3 }), fc.integer()), { maxLength: 3 }).map((e) => new Map(e)),
)

type Op =
  | { kind: 'put'; ns: number; parent: number; changes: [number, unknown][]; source: 'loop' | 'update' | 'fork' }
  | { kind: 'writes'; ns: number; at: number; task: number; writes: [number, unknown][] }

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('put' as const),
    ns: fc.nat(NAMESPACES.length - 1),
    parent: fc.integer({ min: -1, max: 8 }),
    changes: fc.array(fc.tuple(fc.nat(CHANNELS.length - 1), value), { maxLength: 3 }),
    source: fc.constantFrom('loop' as const, 'update' as const, 'fork' as const),
  }),
  fc.record({
    kind: fc.constant('writes' as const),
    ns: fc.nat(NAMESPACES.length - 1),
    at: fc.nat(8),
    task: fc.nat(TASKS.length - 1),
    writes: fc.array(fc.tuple(fc.nat(WRITE_CHANNELS.length - 1), value), { minLength: 1, maxLength: 3 }),
  }),
)

interface Stored {
  id: string
  values: Record<string, unknown>
  versions: Record<string, number>
}

/** Applies the ops to both savers as LangGraph would call them. */
async function play(ops: readonly Op[], savers: BaseCheckpointSaver[]) {
  const byNs = NAMESPACES.map(() => [] as Stored[])
  let step = 0
  for (const o of ops) {
    const list = byNs[o.ns]!
    const ns = NAMESPACES[o.ns]!
    if (o.kind === 'put') {
      const parent = o.parent >= 0 ? list[o.parent % Math.max(1, list.length)] : undefined
      const values = { ...(parent?.values ?? {}) }
      const versions = { ...(parent?.versions ?? {}) }
      // LangGraph JS numbers a step's new versions from the parent's highest: a fork reuses them.
      const next = Math.max(0, ...Object.values(versions)) + 1
      const newVersions: Record<string, number> = {}
      for (const [c, v] of o.changes) {
        const channel = CHANNELS[c]!
        values[channel] = v
        versions[channel] = next
        newVersions[channel] = next
      }
      const checkpoint: Checkpoint = { v: 4, id: uuid6(-1), ts: new Date(1_700_000_000_000 + step).toISOString(), channel_values: values, channel_versions: versions, versions_seen: { a: { ...versions } } }
      const metadata = { source: o.source, step: step++, parents: {}, tag: o.changes.length }
      const config = { configurable: { thread_id: 'prop', checkpoint_ns: ns, ...(parent ? { checkpoint_id: parent.id } : {}) } }
      for (const s of savers) await s.put(config, structuredClone(checkpoint), metadata, newVersions)
      list.push({ id: checkpoint.id, values, versions })
    } else if (list.length > 0) {
      const at = list[o.at % list.length]!
      const writes = o.writes.map(([c, v]) => [WRITE_CHANNELS[c]!, v] as [string, unknown])
      const config = { configurable: { thread_id: 'prop', checkpoint_ns: ns, checkpoint_id: at.id } }
      for (const s of savers) await s.putWrites(config, structuredClone(writes), TASKS[o.task]!)
    }
  }
  return byNs
}

async function answers(saver: BaseCheckpointSaver, byNs: Stored[][]) {
  const out: unknown[] = []
  for (const [n, list] of byNs.entries()) {
    const ns = NAMESPACES[n]!
    const config = { configurable: { thread_id: 'prop', checkpoint_ns: ns } }
    out.push(await saver.getTuple(config))
    for (const c of list) {
      const at = { configurable: { ...config.configurable, checkpoint_id: c.id } }
      out.push(await saver.getTuple(at))
      const delta = await saver.getDeltaChannelHistory({ config: at, channels: CHANNELS })
      // Ours answers from its index; it must give what the base class's walk over getTuple gives.
      expect(delta).toEqual(await BaseCheckpointSaver.prototype.getDeltaChannelHistory.call(saver, { config: at, channels: CHANNELS }))
      out.push(delta)
    }
    const all = []
    for await (const t of saver.list(config)) all.push(t)
    out.push(all)
    const limited = []
    for await (const t of saver.list(config, { limit: 2, filter: { source: 'loop' } })) limited.push(t.checkpoint.id)
    out.push(limited)
    if (list.length > 1) {
      const before = []
      for await (const t of saver.list(config, { before: { configurable: { checkpoint_id: list[1]!.id } } })) before.push(t.checkpoint.id)
      out.push(before)
    }
  }
  return out
}

describe('SessionCheckpointSaver against MemorySaver', () => {
  it('answers every getTuple and list alike, before and after a restart', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 14 }), async (ops) => {
        const persistence = createMemoryPersistence()
        const ours = new SessionCheckpointSaver({ persistence })
        const memory = new MemorySaver()
        const byNs = await play(ops, [ours, memory])
        const expected = await answers(memory, byNs)
        expect(await answers(ours, byNs)).toEqual(expected)
        await ours.close()
        const restarted = new SessionCheckpointSaver({ persistence })
        expect(await answers(restarted, byNs)).toEqual(expected)
        await restarted.close()
      }),
      { numRuns: 150 },
    )
  })
})
