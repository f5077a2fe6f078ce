// The three backends a Claude Agent SDK store is tested over, each fresh per test: the JSONL
// backend on a temporary root, the in-memory reference, PostgreSQL in a schema of its own.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createJsonlPersistence } from '../../src/index.js'
import type { SessionPersistence } from '../../src/persistence.js'
import { createPostgresPersistence } from '../../src/postgres/index.js'
import { createMemoryPersistence, MemoryStore } from '../../src/testing/index.js'
import { dropSchemas, freshSchema } from './pg-env.js'

export interface Backend {
  /** A second instance over the same storage (another process or host, as far as locks go). */
  another(): SessionPersistence
  persistence: SessionPersistence
  /** Closes what the backend opened and removes its storage. */
  cleanup(): Promise<void>
}

export type BackendFactory = () => Promise<Backend>

export async function jsonlBackend(): Promise<Backend & { root: string }> {
  const root = await mkdtemp(join(tmpdir(), 'spj-claude-'))
  const made = [createJsonlPersistence({ root })]
  return {
    root,
    persistence: made[0]!,
    another: () => {
      const p = createJsonlPersistence({ root })
      made.push(p)
      return p
    },
    cleanup: async () => {
      await Promise.all(made.map((p) => p.closeAll()))
      await rm(root, { recursive: true, force: true })
    },
  }
}

export async function memoryBackend(): Promise<Backend> {
  const store = new MemoryStore()
  const made = [createMemoryPersistence({ store })]
  return {
    persistence: made[0]!,
    another: () => {
      const p = createMemoryPersistence({ store })
      made.push(p)
      return p
    },
    cleanup: async () => {
      await Promise.all(made.map((p) => p.closeAll()))
    },
  }
}

export function postgresBackend(url: string): BackendFactory {
  return async () => {
    const schema = freshSchema('claude')
    const made = [createPostgresPersistence({ connectionString: url, schema })]
    return {
      persistence: made[0]!,
      another: () => {
        const p = createPostgresPersistence({ connectionString: url, schema })
        made.push(p)
        return p
      },
      cleanup: async () => {
        await Promise.all(made.map(async (p) => {
          await p.closeAll()
          await p.end()
        }))
        await dropSchemas(url, [schema])
      },
    }
  }
}
