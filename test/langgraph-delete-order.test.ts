// Calls that end a thread's life (deleteThread, release, close) take effect where they were
// called among the thread's puts and putWrites, even when all are made in one tick without
// awaits: a put made after a deleteThread is kept (SPEC §14: a put resolves when what it stored
// is durable), a put made before it is deleted. The oracle is MemorySaver given the same calls
// one after another, each awaited: given them in one tick, MemorySaver stores each put when its
// serialization is done (so it keeps a put made just before a deleteThread) and can reject a
// putWrites a deleteThread overtakes, neither of which is call order. Over each backend, and
// after a restart.
import { rm } from 'node:fs/promises'
import { MemorySaver, uuid6 } from '@langchain/langgraph-checkpoint'
import { afterAll, describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import type { SessionPersistence } from '../src/persistence.js'
import { createJsonlPersistence } from '../src/index.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { checkpoint, freshRoot, meta, thread } from './helpers/langgraph-checkpoints.js'
import { dropSchemas, freshSchema, pgUrl } from './helpers/pg-env.js'

/** A store and how to open it again, as a restarted process would. */
interface Store {
  open(): SessionPersistence
  dispose(): Promise<void>
}

const url = pgUrl()
const schemas: string[] = []
afterAll(async () => {
  if (url) await dropSchemas(url, schemas)
})

const stores: [string, () => Promise<Store>, boolean][] = [
  [
    'JSONL',
    async () => {
      const root = await freshRoot()
      return { open: () => createJsonlPersistence({ root }), dispose: () => rm(root, { recursive: true, force: true }) }
    },
    false,
  ],
  [
    'memory',
    async () => {
      // The memory backend lives in the process: a restart is a new saver over the same one.
      const persistence = createMemoryPersistence()
      return { open: () => persistence, dispose: async () => {} }
    },
    false,
  ],
  [
    'PostgreSQL',
    async () => {
      const schema = freshSchema('lg_order')
      schemas.push(schema)
      const opened: PostgresSessionPersistence[] = []
      return {
        open: () => {
          const p = createPostgresPersistence({ connectionString: url!, schema, poolSize: 2 })
          opened.push(p)
          return p
        },
        dispose: async () => {
          for (const p of opened) await p.end()
        },
      }
    },
    !url,
  ],
]

type Call = ['put', number] | ['writes', number] | ['delete'] | ['release'] | ['close']

/** Makes the call on the saver. */
function make(saver: SessionCheckpointSaver | MemorySaver, call: Call, ids: readonly string[]): Promise<unknown> {
  switch (call[0]) {
    case 'put':
      return saver.put(thread('t'), checkpoint({ n: call[1] }, { n: call[1] }, ids[call[1]]), meta(call[1]), { n: call[1] })
    case 'writes':
      return saver.putWrites(thread('t', ids[call[1]]), [['n', `w${call[1]}`]], `task${call[1]}`)
    case 'delete':
      return saver.deleteThread('t')
    // MemorySaver holds nothing: releasing or closing changes nothing it answers.
    case 'release':
      return saver instanceof SessionCheckpointSaver ? saver.release('t') : Promise.resolve()
    case 'close':
      return saver instanceof SessionCheckpointSaver ? saver.close() : Promise.resolve()
  }
}

/** Makes the calls in one tick, in order, without awaiting any; then awaits them all. */
async function playInOneTick(saver: SessionCheckpointSaver | MemorySaver, calls: readonly Call[], ids: readonly string[]) {
  const made = calls.map((call) => make(saver, call, ids))
  return (await Promise.allSettled(made)).map((r) => r.status)
}

/** Makes the calls one after another, each awaited. */
async function playInOrder(saver: SessionCheckpointSaver | MemorySaver, calls: readonly Call[], ids: readonly string[]) {
  for (const call of calls) await make(saver, call, ids)
}

/** What a saver answers about the thread: its latest tuple and its whole list, newest first. */
async function answers(saver: SessionCheckpointSaver | MemorySaver) {
  const shape = (t: { checkpoint: { id: string; channel_values: unknown }; pendingWrites?: unknown } | undefined) =>
    t && { id: t.checkpoint.id, values: t.checkpoint.channel_values, writes: t.pendingWrites }
  const listed = []
  for await (const t of saver.list(thread('t'))) listed.push(shape(t))
  return { latest: shape(await saver.getTuple(thread('t'))), listed }
}

const SEQUENCES: [string, Call[]][] = [
  ['put, deleteThread, put, putWrites', [['put', 0], ['delete'], ['put', 1], ['writes', 1]]],
  [
    'several calls before each of two deleteThreads, and deleteThread twice in a row',
    [['put', 0], ['writes', 0], ['delete'], ['put', 1], ['writes', 1], ['delete'], ['delete'], ['put', 2], ['writes', 2]],
  ],
  ['deleteThread, then puts on the deleted thread', [['delete'], ['put', 0], ['writes', 0], ['put', 1]]],
  ['release and close between puts', [['put', 0], ['release'], ['put', 1], ['writes', 1], ['close'], ['put', 2], ['writes', 0]]],
  ['release, then deleteThread, then a put', [['put', 0], ['writes', 0], ['release'], ['delete'], ['put', 1], ['writes', 1]]],
]

describe.each(stores)('calls that end a thread, made in one tick with puts, over %s', (_name, makeStore, skip) => {
  it.skipIf(skip).each(SEQUENCES)('%s: answered as MemorySaver given them one by one, also after a restart', async (_title, calls) => {
    const store = await makeStore()
    try {
      const ids = [uuid6(-1), uuid6(-1), uuid6(-1)]
      const memory = new MemorySaver()
      await playInOrder(memory, calls, ids)
      const expected = await answers(memory)

      const ours = new SessionCheckpointSaver({ persistence: store.open() })
      expect(await playInOneTick(ours, calls, ids)).toEqual(calls.map(() => 'fulfilled'))
      expect(await answers(ours)).toEqual(expected)
      await ours.close()

      const restarted = new SessionCheckpointSaver({ persistence: store.open() })
      expect(await answers(restarted)).toEqual(expected)
      await restarted.close()
    } finally {
      await store.dispose()
    }
  })
})
