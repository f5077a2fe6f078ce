import { createJsonlPersistence } from '../../src/index.js'
import type { SessionPersistence } from '../../src/persistence.js'
import { createMemoryPersistence } from '../../src/testing/index.js'
import { tmpRoot } from './tmp-root.js'

/** The backends an adapter test runs over: each gives a factory of instances over one store. */
export function adapterBackends(prefix: string): [string, () => Promise<() => SessionPersistence>][] {
  return [
    [
      'jsonl',
      async () => {
        const root = await tmpRoot()
        return () => createJsonlPersistence({ root, sync: 'none' })
      },
    ],
    [
      'memory',
      async () => {
        const name = `${prefix}-${Math.random()}`
        return () => createMemoryPersistence({ name })
      },
    ],
  ]
}

/** A backend that forwards every call to `inner`: the base a test overrides a few calls of. */
export function delegate(inner: SessionPersistence): SessionPersistence {
  return {
    locate: (m) => inner.locate(m),
    create: (m) => inner.create(m),
    append: (id, e) => inner.append(id, e),
    load: (id, o) => inner.load(id, o),
    inspect: (id) => inner.inspect(id),
    list: (o) => inner.list(o),
    read: (id, r) => inner.read(id, r),
    watch: (id, o) => inner.watch(id, o),
    delete: (id, o) => inner.delete(id, o),
    close: (id) => inner.close(id),
  }
}

/** A backend that remembers what its loads returned and how many reads of each kind it served. */
export function recordedPersistence(inner: SessionPersistence) {
  const seen = { loads: [] as { firstSeq: number; length: number }[], inspects: 0, reads: [] as { fromSeq?: number | undefined }[] }
  const persistence: SessionPersistence = {
    ...delegate(inner),
    load: async (id, o) => {
      const loaded = await inner.load(id, o)
      seen.loads.push({ firstSeq: loaded.firstSeq, length: loaded.events.length })
      return loaded
    },
    inspect: (id) => {
      seen.inspects++
      return inner.inspect(id)
    },
    read: (id, r) => {
      seen.reads.push({ fromSeq: r?.fromSeq })
      return inner.read(id, r)
    },
  }
  return { persistence, seen }
}
