import { readdir, readFile, writeFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { meta, turn } from './helpers/events.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §11 v0.3, §16: `migrate`, `redact`, `repair --truncate-at-damage`, and `verify` naming a
// checksum mismatch, through the built binary.

async function sessions(root: string, version: 0 | 1, ids: string[]) {
  const p = createJsonlPersistence({ root, formatVersion: version })
  for (const id of ids) {
    await p.create(meta(id))
    await p.append(id, [...turn(0, 1), ...turn(4, 2)])
    await p.close(id)
  }
  return (id: string) => p.locate(meta(id)).path
}

describe('session-jsonl migrate', () => {
  test('--dry-run writes nothing; --all migrates version-0 logs, leaves version 1 alone, skips a locked one and refuses a corrupt one (exit 1)', async () => {
    const root = await tmpRoot()
    const pathOf = await sessions(root, 0, ['a', 'b', 'busy', 'bad'])
    await sessions(root, 1, ['new'])
    const bad = await readFile(pathOf('bad'), 'utf8')
    await writeFile(pathOf('bad'), bad.replace('"question 1"', '"question 1'))
    const before = await readFile(pathOf('a'), 'utf8')

    const dry = await runCli(['--root', root, 'migrate', 'a', '--dry-run'])
    expect(dry).toMatchObject({ code: 0, stdout: 'a: version 0, 8 events: would be rewritten as version 1\n' })
    expect(await readFile(pathOf('a'), 'utf8')).toBe(before)

    const holder = createJsonlPersistence({ root })
    await holder.load('busy')
    const r = await runCli(['--root', root, 'migrate', '--all', '--json'])
    await holder.close('busy')
    expect(r.code).toBe(1)
    const outcomes = JSON.parse(r.stdout).migrate as { id: string; status: string; code?: string }[]
    expect(Object.fromEntries(outcomes.map((o) => [o.id, o.code ?? o.status]))).toEqual({ a: 'done', b: 'done', busy: 'E_LOCKED', bad: 'E_CORRUPT', new: 'unchanged' })
    expect(JSON.parse((await readFile(pathOf('a'), 'utf8')).split('\n')[0]!).version).toBe(1)
    expect(JSON.parse((await readFile(pathOf('busy'), 'utf8')).split('\n')[0]!).version).toBe(0)
    expect(await readFile(pathOf('bad'), 'utf8')).toBe(bad.replace('"question 1"', '"question 1'))

    expect((await runCli(['--root', root, 'migrate'])).code).toBe(2) // ids or --all
    expect((await runCli(['--root', root, 'migrate', 'a', '--all'])).code).toBe(2)
  })

  test('a log whose header is damaged or of a newer version is refused with its own code, by id and with --all (never passed over, never E_NOT_FOUND)', async () => {
    const root = await tmpRoot()
    const pathOf = await sessions(root, 0, ['good', 'hdr', 'newer'])
    const hdr = (await readFile(pathOf('hdr'), 'utf8')).replace('"type":"session"', '"type":"sessio"')
    await writeFile(pathOf('hdr'), hdr)
    const newer = (await readFile(pathOf('newer'), 'utf8')).replace('"version":0', '"version":7')
    await writeFile(pathOf('newer'), newer)

    const one = await runCli(['--root', root, 'migrate', 'hdr'])
    expect(one.code).toBe(1)
    expect(one.stderr).toMatch(/^refused hdr: E_CORRUPT: /)
    const v7 = await runCli(['--root', root, 'redact', 'newer', '--pattern', 'question'])
    expect(v7.code).toBe(1)
    expect(v7.stderr).toMatch(/^refused newer: E_FORMAT_UNSUPPORTED: /)
    expect((await runCli(['--root', root, 'migrate', 'nosuch'])).stderr).toMatch(/^refused nosuch: E_NOT_FOUND: /)

    const all = await runCli(['--root', root, 'migrate', '--all', '--json'])
    expect(all.code).toBe(1)
    const outcomes = JSON.parse(all.stdout).migrate as { id?: string; path?: string; status: string; code?: string }[]
    expect(outcomes.map((o) => [o.id ?? o.path, o.code ?? o.status]).sort()).toEqual([[pathOf('hdr'), 'E_CORRUPT'], ['good', 'done'], [pathOf('newer'), 'E_FORMAT_UNSUPPORTED']].sort())
    expect(await readFile(pathOf('hdr'), 'utf8')).toBe(hdr)
    expect(await readFile(pathOf('newer'), 'utf8')).toBe(newer)
    const text = await runCli(['--root', root, 'migrate', '--all'])
    expect(text.code).toBe(1)
    expect(text.stderr).toContain(`refused ${pathOf('hdr')}: E_CORRUPT`)
    expect(text.stdout).toContain('migrate: 0 done, 1 unchanged, 0 skipped, 2 refused')
  })
})

describe('session-jsonl redact', () => {
  test('replaces matches, records log/redacted, and says how many; --dry-run counts only; a bad pattern is one clear line, exit 1', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('s'))
    await p.append('s', [...turn(0, 1), { seq: 4, type: 'user/message', time: 5, data: { content: 'token ghp_ABCDEF123456 here' } }])
    await p.close('s')
    const path = p.locate(meta('s')).path
    const dry = await runCli(['--root', root, 'redact', 's', '--pattern', 'ghp_[A-Za-z0-9]+', '--dry-run'])
    expect(dry).toMatchObject({ code: 0, stdout: 's: 1 match(es) in 1 event(s) (seq 4) would be redacted\n' })
    expect(await readFile(path, 'utf8')).toContain('ghp_ABCDEF123456')
    const done = await runCli(['--root', root, 'redact', 's', '--pattern', 'ghp_[A-Za-z0-9]+', '--replace', '<gh token>'])
    expect(done).toMatchObject({ code: 0, stdout: 's: 1 match(es) redacted in 1 event(s) (seq 4); recorded as seq 5\n' })
    const text = await readFile(path, 'utf8')
    expect(text).not.toContain('ghp_')
    expect(text).toContain('token <gh token> here')
    expect(text).toContain('"type":"log/redacted"')
    const bad = await runCli(['--root', root, 'redact', 's', '--pattern', '('])
    expect(bad.code).toBe(1)
    expect(bad.stderr.trim().split('\n')).toHaveLength(1)
    expect(bad.stderr).toMatch(/E_CONFIG/)
    expect((await runCli(['--root', root, 'redact', 's'])).code).toBe(2) // --pattern is required
  })
})

describe('session-jsonl verify and repair --truncate-at-damage', () => {
  test('verify names a checksum mismatch; repair --truncate-at-damage cuts there and keeps the original; the session loads again', async () => {
    const root = await tmpRoot()
    const pathOf = await sessions(root, 1, ['d'])
    const lines = (await readFile(pathOf('d'), 'utf8')).split('\n')
    lines[2] = lines[2]!.replace('question 1', 'question 7') // one changed byte in a committed line
    await writeFile(pathOf('d'), lines.join('\n'))
    const verified = await runCli(['--root', root, 'verify'])
    expect(verified.code).toBe(1)
    expect(verified.stdout).toMatch(/corrupt.*line 3.*checksum mismatch/s)
    const dry = await runCli(['--root', root, 'repair', 'd', '--truncate-at-damage', '--dry-run'])
    expect(dry.code).toBe(0)
    expect(dry.stdout).toMatch(/^d: would cut at line 3 \(byte \d+\): checksum mismatch\n/)
    const cut = await runCli(['--root', root, 'repair', 'd', '--truncate-at-damage', '--json'])
    expect(cut.code).toBe(0)
    const report = JSON.parse(cut.stdout) as { cut: { line: number }; keptAt: string; keptEvents: number }
    expect(report).toMatchObject({ cut: { line: 3 }, keptEvents: 1 })
    expect((await readdir(dirname(pathOf('d')))).sort()).toEqual([report.keptAt, 'd.jsonl'].sort())
    expect((await runCli(['--root', root, 'verify'])).code).toBe(0)
    const loaded = await createJsonlPersistence({ root }).inspect('d')
    expect(loaded.events.map((e) => e.type)).toEqual(['turn/start', 'turn/end', 'log/truncated'])
  })
})
