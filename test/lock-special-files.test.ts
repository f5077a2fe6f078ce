import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { createJsonlPersistence, encodeSessionId, isSessionPersistenceError } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { mkfifo, releaseFifos, settlesWithin } from './helpers/fifo.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A FIFO where a session's writer lock goes (.locks/<id>.lock): taking the lock read it, and the
// open waited for a writer, so append, load and delete never settled (docs/decisions.md).
const LIMIT_MS = 20_000 // a guard against hanging, not a measurement: a loaded machine may take seconds

async function codeAndMessage(work: Promise<unknown>): Promise<[string, string]> {
  try {
    await work
  } catch (err) {
    if (isSessionPersistenceError(err)) return [err.code, err.message]
    throw err
  }
  throw new Error('it did not fail')
}

for (const op of ['append', 'load', 'delete', 'create+append'] as const) {
  test(`${op} with a FIFO in the place of the session's lock fails with E_IO naming it, without waiting`, async () => {
    const root = await tmpRoot()
    const seed = createJsonlPersistence({ root })
    await seed.create(meta('old'))
    await seed.append('old', turn(0, 1))
    await seed.closeAll()
    const id = op === 'create+append' ? 'new' : 'old'
    const lock = mkfifo(join(root, '.locks', `${encodeSessionId(id)}.lock`))
    const p = createJsonlPersistence({ root, staleLockMs: 1000 })
    const work =
      op === 'append'
        ? p.load('old', {}).then(() => p.append('old', turn(4, 2))) // load takes the lock: the same refusal
        : op === 'load'
          ? p.load('old')
          : op === 'delete'
            ? p.delete('old')
            : p.create(meta('new')).then(() => p.append('new', turn(0, 1)))
    const outcome = codeAndMessage(work)
    try {
      const [code, message] = await settlesWithin(outcome, LIMIT_MS, op)
      expect(code).toBe('E_IO')
      expect(message).toContain(`${lock} is not a regular file (a FIFO)`)
      // nothing was taken over or left behind: the FIFO is still there, no temporary files
      expect((await readdir(join(root, '.locks'))).sort()).toEqual([`${encodeSessionId(id)}.lock`])
      // inspect takes no lock: it still reads the session
      if (id === 'old') expect((await settlesWithin(p.inspect('old'), LIMIT_MS, 'inspect')).events).toHaveLength(4)
    } finally {
      await releaseFifos([lock], outcome)
      await p.closeAll().catch(() => {})
    }
  })
}
