import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// SPEC §9: everything the package throws on purpose is a SessionPersistenceError with a stable
// code; a file-system operation that failed is E_IO with its cause. An `export --out` the CLI
// cannot write (a directory, a directory that does not exist, a full device) is E_IO naming the
// file and what to do, exit 1: not a bare errno (`EISDIR: illegal operation on a directory…`).

async function root(): Promise<string> {
  const dir = await tmpRoot()
  const p = createJsonlPersistence({ root: dir })
  await p.create(meta('a'))
  await p.append('a', turn(0, 1))
  await p.closeAll()
  return dir
}

describe('export --out a file that cannot be written', () => {
  test('regression: a directory, a missing directory, a path under a file, a full device: E_IO naming the file, exit 1', async () => {
    const dir = await root()
    const elsewhere = await tmpRoot()
    const aFile = join(elsewhere, 'plain')
    await writeFile(aFile, 'x')
    const missing = join(elsewhere, 'no-such-dir')
    const cases: [string, RegExp][] = [
      [elsewhere, /^cannot write (\S+): it is a directory; give --out the path of a file$/],
      [join(missing, 'x.md'), new RegExp(`^cannot write (\\S+): no such directory ${missing}; create it first, or give --out a path in an existing directory$`)],
      [join(aFile, 'x.md'), new RegExp(`^cannot write (\\S+): ${aFile} is not a directory; give --out a path in an existing directory$`)],
      ...(existsSync('/dev/full') ? [['/dev/full', /^writing (\S+) failed: ENOSPC: no space left on device, write$/] as [string, RegExp]] : []),
    ]
    for (const [out, message] of cases) {
      for (const format of ['md', 'json']) {
        const r = await cli(['--root', dir, 'export', 'a', '--format', format, '--out', out])
        expect({ out, format, result: r.result, out_: r.out }).toEqual({ out, format, result: 'E_IO', out_: '' })
        expect(r.err).toMatch(message)
        expect(message.exec(r.err)![1]).toBe(out)
      }
    }
    expect(existsSync(missing)).toBe(false)
  })

  test('regression: the binary prints one line, code first, exit 1', async () => {
    const dir = await root()
    const r = await runCli(['--root', dir, 'export', 'a', '--format', 'md', '--out', dir])
    expect(r).toEqual({ code: 1, stdout: '', stderr: `session-jsonl: E_IO: cannot write ${dir}: it is a directory; give --out the path of a file\n` })
  })
})
