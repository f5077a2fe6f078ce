import { readdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { cliInProcess as cli } from './helpers/cli-in-process.js'
import { meta, turn } from './helpers/events.js'
import { rootFiles, tmpRoot } from './helpers/tmp-root.js'

async function rootWith(ids: string[], formatVersion?: 0 | 1) {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, ...(formatVersion !== undefined ? { formatVersion } : {}) })
  const paths: Record<string, string> = {}
  for (const id of ids) {
    await p.create(meta(id))
    await p.append(id, [...turn(0, 1), ...turn(4, 2)])
    paths[id] = p.locate(meta(id)).path
  }
  await p.closeAll()
  return { root, paths }
}

/** `abc`'s header damaged (a flipped byte: checksum mismatch), `abcdef` healthy: the probe's shape. */
async function damagedHeader() {
  const { root, paths } = await rootWith(['abc', 'abcdef'])
  const bytes = await readFile(paths.abc!)
  bytes[bytes.indexOf('"createdAt"') + 1] = 'X'.charCodeAt(0)
  await writeFile(paths.abc!, bytes)
  return { root, given: 'abc', bad: paths.abc!, healthy: paths.abcdef!, code: 'E_CORRUPT' }
}

/** `run`'s header from a newer release (`"version":2`), `run-2` healthy. */
async function newerVersion() {
  const { root, paths } = await rootWith(['run', 'run-2'], 0)
  const text = await readFile(paths.run!, 'utf8')
  expect(text).toContain('"version":0')
  await writeFile(paths.run!, text.replace('"version":0', '"version":2'))
  return { root, given: 'run', bad: paths.run!, healthy: paths['run-2']!, code: 'E_FORMAT_UNSUPPORTED' }
}

/** `zed.jsonl` holds the log of another session (its header names `other`), `zed-long` healthy. */
async function headerOfAnotherId() {
  const { root, paths } = await rootWith(['zed', 'zed-long', 'other'])
  await writeFile(paths.zed!, await readFile(paths.other!))
  return { root, given: 'zed', bad: paths.zed!, healthy: paths['zed-long']!, code: 'E_CORRUPT' }
}

const SHAPES = { 'a damaged header': damagedHeader, 'a header of a newer version': newerVersion, 'a header naming another id': headerOfAnotherId }

/** Each command that takes an id, and how it reports a log it cannot read: it throws (the binary exits 1 naming the code), or exits 1 naming the refused id. */
const COMMANDS: { args: string[]; refuses: 'throws' | 'exit 1' }[] = [
  { args: ['redact', '@', '--pattern', 'question', '--dry-run'], refuses: 'exit 1' },
  { args: ['redact', '@', '--pattern', 'question'], refuses: 'exit 1' },
  { args: ['migrate', '@', '--dry-run'], refuses: 'exit 1' },
  { args: ['migrate', '@'], refuses: 'exit 1' },
  { args: ['fork', '@', '--at', '4', '--id', 'child'], refuses: 'throws' },
  { args: ['repair', '@'], refuses: 'throws' },
  { args: ['repair', '@', '--dry-run'], refuses: 'throws' },
  { args: ['repair', '@', '--truncate-at-damage', '--dry-run'], refuses: 'throws' },
  { args: ['tree', '@'], refuses: 'throws' },
  { args: ['show', '@'], refuses: 'throws' },
  { args: ['show', '@', '--last', '2'], refuses: 'throws' },
  { args: ['show', '@', '--raw'], refuses: 'throws' }, // it said E_NOT_FOUND (a hunt's find)
  { args: ['export', '@', '--format', 'json'], refuses: 'throws' },
  { args: ['tail', '@'], refuses: 'throws' },
]

describe('an exact id names that session, even when its log cannot be listed (SPEC §11)', () => {
  for (const [shape, make] of Object.entries(SHAPES)) {
    describe(shape, () => {
      for (const { args, refuses } of COMMANDS) {
        test(`${args.join(' ')}: refused with the log's own code; no log is touched, no other session is read`, async () => {
          const { root, given, code } = await make()
          const before = await rootFiles(root)
          const r = await cli(['--root', root, ...args.map((a) => (a === '@' ? given : a))])
          if (refuses === 'throws') expect(r.result).toBe(code)
          else {
            expect(r.result).toBe(1)
            expect(r.err).toContain(`refused ${given}: ${code}: `)
          }
          expect(r.out).not.toMatch(/abcdef|run-2|zed-long/)
          expect(await rootFiles(root)).toEqual(before)
        })
      }

      test('rm removes that log, and only it', async () => {
        const { root, given, bad, healthy } = await make()
        const before = await rootFiles(root)
        const r = await cli(['--root', root, 'rm', given, '--json'])
        expect(r.result).toBe(0)
        expect(JSON.parse(r.out).removed).toBe(given)
        const after = await rootFiles(root)
        expect([...before.keys()].filter((k) => !after.has(k))).toEqual([bad.slice(root.length + 1)])
        expect(after.get(healthy.slice(root.length + 1))).toEqual(before.get(healthy.slice(root.length + 1)))
      })

      test('rm names the log it removed by its path, not the root', async () => {
        const { root, given, bad } = await make()
        const r = await cli(['--root', root, 'rm', given])
        expect(r.result).toBe(0)
        expect(r.out).toContain(`(${bad})`)
      })

      test('copy refuses it before copying anything (E_NOT_FOUND: it is not listed), and copies no other session', async () => {
        const { root, given, code } = await make()
        const target = await tmpRoot()
        const r = await cli(['--root', root, 'copy', given, '--to', target])
        expect(r.result).toBe('E_NOT_FOUND')
        expect(r.err).toContain(`no listed session matches '${given}' (its log could not be listed: ${code})`)
        expect(await readdir(target)).toEqual([])
      })
    })
  }

  test('a prefix of a log that cannot be listed and of a listed session is ambiguous, not the listed one', async () => {
    const { root } = await damagedHeader()
    const before = await rootFiles(root)
    for (const args of [['rm', 'ab'], ['show', 'ab'], ['fork', 'ab', '--at', '4'], ['redact', 'ab', '--pattern', 'question'], ['tree', 'ab']]) {
      const r = await cli(['--root', root, ...args])
      expect([args[0], r.result, r.err]).toEqual([args[0], 'E_AMBIGUOUS', "'ab' is a prefix of 2 sessions: abc, abcdef"])
    }
    expect(await rootFiles(root)).toEqual(before)
    // A prefix of the listed session only still names it.
    const r = await cli(['--root', root, 'rm', 'abcd', '--json'])
    expect([r.result, JSON.parse(r.out).removed]).toEqual([0, 'abcdef'])
  })

  test('a unique prefix of a log that cannot be listed names it: the operation says what is wrong with it', async () => {
    const { root } = await damagedHeader()
    await cli(['--root', root, 'rm', 'abcdef'])
    const before = await rootFiles(root)
    expect((await cli(['--root', root, 'show', 'ab'])).result).toBe('E_CORRUPT')
    expect(await rootFiles(root)).toEqual(before)
  })
})

describe('an empty id', () => {
  test('regression: is refused by every command that takes ids, never taken as a prefix of the only session (redact "$ID" with $ID unset)', async () => {
    const { root } = await rootWith(['only'])
    const before = await rootFiles(root)
    const target = await tmpRoot()
    for (const args of [
      ['redact', '', '--pattern', 'question'],
      ['redact', 'only', '', '--pattern', 'question'],
      ['migrate', ''],
      ['copy', '', '--to', target],
      ['tree', ''],
      ['show', ''],
      ['rm', ''],
      ['export', '', '--format', 'json'],
    ]) {
      await expect(cli(['--root', root, ...args]), args.join(' ')).rejects.toThrow(`${args[0]} was given an empty session id`)
    }
    expect(await rootFiles(root)).toEqual(before)
    expect(await readdir(target)).toEqual([])
  })
})
