import { hostname } from 'node:os'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { ev, meta, turn } from './helpers/events.js'
import { lockHolder as holder } from './helpers/lock-holder.js'
import { rootFiles, tmpRoot } from './helpers/tmp-root.js'

// SPEC §11: `repair --dry-run` prints what `repair` would do without writing. `repair` is a load,
// refused E_LOCKED while another process writes the session, so the dry run says E_LOCKED there
// too (as the other dry runs do), not a plan the real run will never carry out. The same on a
// PostgreSQL root: test/postgres-cli-repair-dry-run-locks.test.ts.

describe.skipIf(process.platform === 'win32')('repair --dry-run and locks', () => {
  test('regression: a session a live writer holds is E_LOCKED in the dry run as in the real run; a free one still gets its plan; nothing is written', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    for (const id of ['free', 'held']) {
      await p.create(meta(id))
      await p.append(id, [...turn(0, 1), ev(4, 'turn/start', { turn: 2 })]) // an open turn: something to repair
    }
    await p.closeAll()
    const child = await holder(root, 'held')
    try {
      const before = await rootFiles(root)
      const real = await cli(['--root', root, 'repair', 'held'])
      expect(real.result).toBe('E_LOCKED')
      for (const json of [[], ['--json']]) {
        const dry = await cli(['--root', root, 'repair', 'held', '--dry-run', ...json])
        expect(dry).toEqual({ result: 'E_LOCKED', out: '', err: expect.stringContaining(`session 'held' is being written by pid ${child.pid} on host ${hostname()} since `) })
      }
      const free = await cli(['--root', root, 'repair', 'free', '--dry-run'])
      expect(free.result).toBe(0)
      expect(free.out).toMatch(/^no torn tail\nwould write 1 closing event\(s\):\n  seq 5 turn\/end /)
      expect(await rootFiles(root)).toEqual(before)
    } finally {
      child.kill('SIGKILL')
    }
  })
})
