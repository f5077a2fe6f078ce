import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

/** Every file under the root (bucket/name) with its bytes. */
async function files(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const entry of await readdir(root, { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) out[join(entry.parentPath, entry.name).slice(root.length)] = await readFile(join(entry.parentPath, entry.name), 'utf8')
  }
  return out
}

describe('session-jsonl fork --at', () => {
  test('--at 0 is a usage error that prints no id and creates nothing; malformed counts are refused the same way', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('s'))
    await p.append('s', [...turn(0, 1), ...turn(4, 2)])
    await p.closeAll()
    const before = await files(root)
    const zero = await runCli(['--root', root, 'fork', 's', '--at', '0', '--id', 'zero'])
    expect(zero).toEqual({
      code: 2,
      stdout: '',
      stderr: 'session-jsonl: fork --at 0 would create an empty session, which is not stored until its first event: give --at the number of events to keep (just after a turn end) (see session-jsonl --help)\n',
    })
    for (const at of ['', ' 4 ', '0x4', '4e0', '-4', '+4', '4.0']) {
      const r = await runCli(['--root', root, 'fork', 's', `--at=${at}`, '--id', 'bad'])
      expect({ at, code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ at, code: 2, stdout: '', stderr: `session-jsonl: --at '${at}' is not a non-negative integer (see session-jsonl --help)\n` })
    }
    expect(await files(root)).toEqual(before)
    // A count not just after a turn end: the advice names only what --at accepts (not 0).
    expect(await runCli(['--root', root, 'fork', 's', '--at', '3', '--id', 'three'])).toEqual({
      code: 1,
      stdout: '',
      stderr: "session-jsonl: E_BAD_FORK_POINT: event 2 of session 's' is not a turn/end; give --at the number of events up to and including a turn/end — `session-jsonl show` marks where each turn ends\n",
    })
    expect(await files(root)).toEqual(before)
    const good = await runCli(['--root', root, 'fork', 's', '--at', '4', '--id', 'kid'])
    expect(good).toEqual({ code: 0, stdout: 'kid\n', stderr: '' })
    expect((await runCli(['--root', root, 'show', 'kid'])).code).toBe(0)
  })
})
