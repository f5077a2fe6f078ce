import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createFaultInjectingFileSystem } from '../src/testing/fault-injection.js'
import { rejection } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A close whose release failed dropped the session, so a retried close (or closeAll) resolved
// without doing anything and the lock stayed behind (docs/contract.md §4.8: calling them again
// is harmless; now it also finishes what the first one could not). Retried by the next acquire
// and by a timer too (lock-hunt-release-retry.test.ts); these need neither.

const STALE = 60_000 // the owed release's own timer (every staleLockMs / 3) does not fire within a test

async function heldSession() {
  const root = await tmpRoot()
  const fs = createFaultInjectingFileSystem()
  const p = createJsonlPersistence({ root, fs, staleLockMs: STALE })
  await p.create(meta('s'))
  await p.append('s', turn(0, 1))
  return { root, fs, p, lock: join(root, '.locks', 's.lock') }
}

const lockNames = async (root: string) => (await readdir(join(root, '.locks'))).filter((n) => n.endsWith('.lock'))

for (const how of ['close', 'closeAll'] as const) {
  test(`a ${how} retried after the release failed removes the lock`, async () => {
    const { root, fs, p, lock } = await heldSession()
    const clear = fs.inject({ op: 'open', path: lock, code: 'EMFILE' })
    expect((await rejection(p.close('s'))).code).toBe('E_IO')
    // still failing: the retry says so (E_IO), it does not resolve with the lock left behind
    const again = await rejection(how === 'close' ? p.close('s') : p.closeAll())
    expect(again.code).toBe('E_IO')
    expect(again.message).toContain('EMFILE')
    expect(await lockNames(root)).toEqual(['s.lock'])
    clear()
    await (how === 'close' ? p.close('s') : p.closeAll())
    expect(await lockNames(root)).toEqual([])
    await p.close('s') // and once done, harmless
    await p.closeAll()
  })
}

test('close of an id this instance never opened makes no file-system call', async () => {
  const { fs, p } = await heldSession()
  await p.closeAll()
  const before = fs.calls.length
  await p.close('other')
  await p.close('s')
  await p.closeAll()
  expect(fs.calls.length).toBe(before)
})
