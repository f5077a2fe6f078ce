import { mkdir, readFile, readlink, utimes, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { parseStartTime } from '../src/jsonl/lock/process-identity.js'
import { readLockEntries } from '../src/jsonl/lock/lock-report.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

describe.skipIf(process.platform !== 'linux')('readLockEntries: what the lock directory holds, judged as a takeover would', () => {
  test('a live lock, a dead one, a stale marker, an unreadable lock and a temporary file', async () => {
    const root = await tmpRoot()
    expect(await readLockEntries(root)).toEqual([]) // no lock directory yet
    const p = createJsonlPersistence({ root, staleLockMs: 1000 })
    await p.create(meta('Live'))
    await p.append('Live', turn(0, 1))
    const dir = join(root, '.locks')
    const me = {
      pid: process.pid,
      startTime: parseStartTime(await readFile(`/proc/${process.pid}/stat`, 'utf8'))!,
      host: hostname(),
      bootId: (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim(),
      pidNs: await readlink('/proc/self/ns/pid'),
    }
    const dead = { ...me, startTime: String(Number(me.startTime) + 1), since: 0, staleLockMs: 1000 }
    await mkdir(dir, { recursive: true })
    await writeFile(join(dir, 'dead.lock'), JSON.stringify({ ...dead, token: 'd1' }))
    await writeFile(join(dir, 'garbled.lock'), '{"pid":')
    const remote = { pid: 7, host: 'elsewhere', bootId: 'b', pidNs: 'n', since: 0, staleLockMs: 1000, token: 'm1' }
    await writeFile(join(dir, '.takeover-d1'), JSON.stringify(remote))
    const old = new Date(Date.now() - 5000)
    await utimes(join(dir, '.takeover-d1'), old, old)
    await writeFile(join(dir, '.tmp-leftover'), '')
    const entries = await readLockEntries(root)
    const by = (name: string) => entries.find((e) => e.path === join(dir, name))!
    expect(entries).toHaveLength(5)
    expect(by('%4Cive.lock')).toMatchObject({ kind: 'lock', sessionId: 'Live', writer: 'alive', stale: false })
    expect(by('%4Cive.lock').owner?.pid).toBe(process.pid)
    expect(by('dead.lock')).toMatchObject({ kind: 'lock', sessionId: 'dead', writer: 'dead', stale: true })
    expect(by('garbled.lock')).toMatchObject({ kind: 'lock', owner: undefined, stale: true })
    expect(by('.takeover-d1')).toMatchObject({ kind: 'marker', writer: 'unknown', stale: true })
    expect(by('.tmp-leftover')).toMatchObject({ kind: 'temporary', stale: true })
    // Read-only: nothing was taken over or removed.
    expect(JSON.parse(await readFile(join(dir, 'dead.lock'), 'utf8')).token).toBe('d1')
    await p.closeAll()
  })
})
