import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe } from 'vitest'
import type { SessionPersistence } from '../persistence.js'
import { anyLengthTests } from './any-length.js'
import { createAndAppendTests } from './create-append.js'
import { contentionTests } from './contention.js'
import { deleteTests } from './delete.js'
import type { ContractContext } from './fixtures.js'
import { loadListCloseTests } from './load-list.js'
import { storeTests } from './store.js'
import { rawRefusalTests } from './raw-refusals.js'

export interface PersistenceContractOptions {
  /** Shown in the suite's name. */
  name: string
  /**
   * Opens an instance over the store kept in `dir`: a fresh, empty directory per store. Calling
   * it again with the same `dir` must open another instance over the same stored sessions (a
   * restart, or a second process), contending for them as another process would. A backend that
   * keeps nothing in files uses `dir` only as the store's name.
   */
  factory: (dir: string) => SessionPersistence | Promise<SessionPersistence>
}

/**
 * The conformance suite every `SessionPersistence` must pass (docs/contract.md §10). It checks
 * the seam's observable behaviour only — never a backend's storage format: a location is
 * checked by its `kind`. Instances it opens are closed after each test (`closeAll`, then `end`
 * when the backend has them).
 */
export function runPersistenceContract({ name, factory }: PersistenceContractOptions): void {
  describe(`SessionPersistence contract: ${name}`, () => {
    let dirs: string[] = []
    const opened: SessionPersistence[] = []
    const openAt = async (dir: string) => {
      const p = await factory(dir)
      opened.push(p)
      return p
    }
    const newDir = async () => {
      const dir = await mkdtemp(join(tmpdir(), 'spj-contract-'))
      dirs.push(dir)
      return dir
    }
    const ctx: ContractContext = {
      open: () => openAt(dirs[0]!),
      openOther: async () => openAt(dirs[1] ?? (await newDir())),
    }

    beforeEach(async () => {
      await newDir()
    })
    afterEach(async () => {
      for (const p of opened.splice(0)) {
        const { closeAll, end } = p as { closeAll?: () => Promise<void>; end?: () => Promise<void> }
        if (closeAll) await closeAll.call(p)
        if (end) await end.call(p)
      }
      await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })))
      dirs = []
    })

    createAndAppendTests(ctx)
    loadListCloseTests(ctx)
    deleteTests(ctx)
    contentionTests(ctx)
    storeTests(ctx)
    anyLengthTests(ctx)
    rawRefusalTests(ctx)
  })
}
