import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { meta, turn } from './helpers/events.js'
import { lockHolder as holder } from './helpers/lock-holder.js'
import { rootFiles, tmpRoot } from './helpers/tmp-root.js'

// SPEC §16: migrate and redact skip a locked session (E_LOCKED), and `--dry-run` only reports:
// what it reports is what the real run would do, so a session a live writer holds is skipped
// there too, not said to be rewritten. The same for repair --truncate-at-damage --dry-run.

describe.skipIf(process.platform === 'win32')('dry runs of the rewrites and locks', () => {
  test('regression: migrate, redact and repair --truncate-at-damage --dry-run report a held session as the real run does (E_LOCKED), and write nothing', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, formatVersion: 0 })
    for (const id of ['free', 'held']) {
      await p.create(meta(id))
      await p.append(id, turn(0, 1))
    }
    await p.closeAll()
    const child = await holder(root, 'held')
    try {
      const before = await rootFiles(root)
      for (const args of [['migrate', 'free', 'held'], ['redact', 'free', 'held', '--pattern', 'question']]) {
        const dry = JSON.parse((await cli(['--root', root, ...args, '--dry-run', '--json'])).out)
        const real = JSON.parse((await cli(['--root', root, ...args, '--json'])).out)
        const outcomes = (r: Record<string, { id: string; status: string; code?: string }[]>) => r[args[0]!]!.map((o) => [o.id, o.status, o.code])
        expect(outcomes(dry)).toEqual([['free', 'would-do', undefined], ['held', 'skipped', 'E_LOCKED']])
        expect(outcomes(real)).toEqual([['free', 'done', undefined], ['held', 'skipped', 'E_LOCKED']])
      }
      const dry = await cli(['--root', root, 'repair', 'held', '--truncate-at-damage', '--dry-run'])
      expect(dry.result).toBe('E_LOCKED')
      const after = await rootFiles(root)
      const heldPath = [...before.keys()].find((k) => k.endsWith('/held.jsonl'))!
      expect(after.get(heldPath)).toEqual(before.get(heldPath))
    } finally {
      child.kill('SIGKILL')
    }
  })
})
