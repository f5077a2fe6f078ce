import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A takeover marker a crash left behind, or a lock a dead writer left, is what keeps a session
// from loading for a while; verify is where an operator looks, so it must show them.
describe('session-jsonl verify shows the lock directory', () => {
  test('a held lock, a stale marker of another host and a leftover temporary file are listed; exit code unchanged', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('held'))
    await p.append('held', turn(0, 1)) // this instance keeps the lock until closeAll
    const locks = join(root, '.locks')
    await mkdir(locks, { recursive: true })
    const old = { pid: 4242, host: 'some-other-host', bootId: 'b', pidNs: 'pid:[1]', since: 0, staleLockMs: 1000, token: 'crashed1' }
    await writeFile(join(locks, '.takeover-crashed1'), JSON.stringify(old))
    const { utimes } = await import('node:fs/promises')
    await utimes(join(locks, '.takeover-crashed1'), new Date(0), new Date(0))
    await writeFile(join(locks, '.tmp-0badc0de'), '')
    try {
      const r = await runCli(['--root', root, 'verify', '--json'])
      expect(r.code).toBe(0)
      const report = JSON.parse(r.stdout)
      const byKind = Object.fromEntries(report.locks.map((l: { kind: string }) => [l.kind, l]))
      expect(byKind.lock).toMatchObject({ kind: 'lock', sessionId: 'held', writer: 'alive', stale: false, holder: { pid: process.pid } })
      expect(byKind.marker).toMatchObject({ kind: 'marker', writer: 'unknown', stale: true, holder: { pid: 4242, host: 'some-other-host' } })
      expect(byKind.temporary).toMatchObject({ kind: 'temporary', stale: true })
      expect(report.summary).toMatchObject({ logs: 1, ok: 1 })

      const text = await runCli(['--root', root, 'verify'])
      expect(text.code).toBe(0)
      expect(text.stdout).toMatch(/^lock +held: held by pid \d+ on /m)
      expect(text.stdout).toMatch(/^marker +.*\.takeover-crashed1: takeover by pid 4242 on some-other-host.*stale/m)
      expect(text.stdout).toMatch(/^lock temp +.*\.tmp-0badc0de/m)
    } finally {
      await p.closeAll()
    }
  })

  test('a root whose lock directory is empty or missing reports no lock entries', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('s'))
    await p.append('s', turn(0, 1))
    await p.closeAll()
    const r = await runCli(['--root', root, 'verify', '--json'])
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout).locks).toEqual([])
  })
})
