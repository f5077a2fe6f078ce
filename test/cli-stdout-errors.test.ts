import { spawn } from 'node:child_process'
import { openSync, closeSync } from 'node:fs'
import { once } from 'node:events'
import { join } from 'node:path'
import { writeFile } from 'node:fs/promises'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { meta, turn } from './helpers/events.js'
import { CLI_BIN, runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

/** Runs the binary with its stdout on /dev/full (every write fails with ENOSPC). */
async function toFullDevice(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const fd = openSync('/dev/full', 'w')
  try {
    const child = spawn(process.execPath, [CLI_BIN, ...args], { env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', fd, 'pipe'] })
    let stderr = ''
    child.stderr!.setEncoding('utf8').on('data', (s: string) => (stderr += s))
    const [code] = (await once(child, 'exit')) as [number | null]
    return { code, stderr }
  } finally {
    closeSync(fd)
  }
}

describe('stdout write errors', () => {
  test.each([['ls'], ['show', 's'], ['show', 's', '--json'], ['tail', 's'], ['export', 's', '--format', 'md'], ['verify']])(
    '%s to a full device: one line on stderr, exit 1, no stack trace',
    async (...args) => {
      const root = await tmpRoot()
      const p = createJsonlPersistence({ root })
      await p.create(meta('s'))
      await p.append('s', [...turn(0, 1), ...turn(4, 2)])
      await p.closeAll()
      expect(await toFullDevice(['--root', root, ...args])).toEqual({ code: 1, stderr: 'session-jsonl: ENOSPC: no space left on device, write\n' })
    },
  )

  test('an errno code wrapped in a message is said once', async () => {
    const file = join(await tmpRoot(), 'a-file')
    await writeFile(file, 'x')
    const r = await runCli(['--root', join(file, 'sub'), 'ls'])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^session-jsonl: E_IO: [^\n]*ENOTDIR: not a directory[^\n]*\n$/)
    expect(r.stderr).not.toContain('ENOTDIR: ENOTDIR')
  })
})
