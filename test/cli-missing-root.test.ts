import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

const COMMANDS = [
  ['ls'],
  ['show', 's'],
  ['tail', 's'],
  ['tree'],
  ['verify'],
  ['repair', 's'],
  ['prune', '--older-than', '1d'],
  ['rm', 's'],
  ['export', 's', '--format', 'md'],
  ['fork', 's', '--at', '4'],
  ['migrate', '--all'],
  ['redact', 's', '--pattern', 'x'],
  ['copy', '--all', '--to', 'TARGET'],
]

describe('a --root directory that does not exist', () => {
  test.each(COMMANDS)('%s: E_NOT_FOUND, one line, exit 1, nothing created', async (...args) => {
    const base = await tmpRoot()
    const missing = join(base, 'typo')
    const target = join(base, 'target')
    const r = await runCli(['--root', missing, ...args.map((a) => (a === 'TARGET' ? target : a))])
    expect(r).toEqual({ code: 1, stdout: '', stderr: `session-jsonl: E_NOT_FOUND: no such root directory ${missing}\n` })
    expect(existsSync(missing)).toBe(false)
    expect(existsSync(target)).toBe(false)
  })

  test('the same through SESSION_JSONL_ROOT; copy --to may still create its target', async () => {
    const base = await tmpRoot()
    const missing = join(base, 'typo')
    expect(await runCli(['verify'], { SESSION_JSONL_ROOT: missing })).toEqual({ code: 1, stdout: '', stderr: `session-jsonl: E_NOT_FOUND: no such root directory ${missing}\n` })
    const root = join(base, 'root')
    const p = createJsonlPersistence({ root })
    await p.create(meta('s'))
    await p.append('s', turn(0, 1))
    await p.closeAll()
    const target = join(base, 'new-target')
    const copied = await runCli(['--root', root, 'copy', '--all', '--to', target])
    expect(copied).toEqual({ code: 0, stdout: 'copied s (4 events)\ncopied 1 of 1 session(s) to ' + target + '\n', stderr: '' })
    expect((await runCli(['--root', target, 'verify'])).code).toBe(0)
  })
})
