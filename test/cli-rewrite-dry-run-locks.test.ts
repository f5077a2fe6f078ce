import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { describe, expect, test } from 'vitest'
import { main } from '../src/cli/main.js'
import type { Io } from '../src/cli/commands.js'
import { makeStyle } from '../src/cli/render.js'
import { isSessionPersistenceError } from '../src/errors.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { rootFiles, tmpRoot } from './helpers/tmp-root.js'

// SPEC §16: migrate and redact skip a locked session (E_LOCKED), and `--dry-run` only reports:
// what it reports is what the real run would do, so a session a live writer holds is skipped
// there too, not said to be rewritten. The same for repair --truncate-at-damage --dry-run.

const WORKER = fileURLToPath(new URL('./fixtures/lock-worker.mjs', import.meta.url))

/** The CLI from the sources, in this process: its exit code, or the code of the error it threw. */
async function cli(args: string[]): Promise<{ result: number | string; out: string; err: string }> {
  const out: string[] = []
  const err: string[] = []
  const io: Io = { out: (s) => out.push(s), err: (s) => err.push(s), style: makeStyle(false), progress: undefined }
  try {
    return { result: await main(args, {}, io), out: out.join(''), err: err.join('') }
  } catch (e) {
    if (!isSessionPersistenceError(e)) throw e
    return { result: e.code, out: out.join(''), err: err.join('') }
  }
}

async function holder(root: string, id: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, [WORKER, root, id, 'hold-until-eof', '0'], { stdio: ['pipe', 'pipe', 'inherit'] })
  try {
    const line = await new Promise<Record<string, unknown>>((resolve, reject) => {
      createInterface({ input: child.stdout! }).once('line', (l) => resolve(JSON.parse(l) as Record<string, unknown>))
      child.once('exit', (code, signal) => reject(new Error(`lock worker exited ${code ?? signal}`)))
    })
    expect(line).toMatchObject({ held: true, pid: child.pid })
    return child
  } catch (err) {
    child.kill('SIGKILL')
    throw err
  }
}

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
