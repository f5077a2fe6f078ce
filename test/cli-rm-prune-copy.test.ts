import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { appendFile, readdir, readFile, stat, utimes } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, test } from 'vitest'
import { main } from '../src/cli/main.js'
import type { Io } from '../src/cli/commands.js'
import { prune } from '../src/cli/maintenance.js'
import { DEFAULT_PG_SCHEMA, isPostgresUrl, type OpenedRoot, parsePostgresUrl } from '../src/cli/open-root.js'
import { makeStyle } from '../src/cli/render.js'
import { isSessionPersistenceError } from '../src/errors.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import type { ListOptions } from '../src/persistence.js'
import { ev, meta, turn } from './helpers/events.js'
import { runCli as run } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

const DAY = 86_400_000

/** A root with closed sessions of two complete turns each; returns each log's path. */
async function rootWith(ids: string[], extra: Record<string, { cwd?: string }> = {}): Promise<{ root: string; paths: Record<string, string> }> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  const paths: Record<string, string> = {}
  for (const id of ids) {
    const m = meta(id, extra[id] ?? {})
    await p.create(m)
    await p.append(id, [...turn(0, 1), ...turn(4, 2)])
    paths[id] = p.locate(m).path
  }
  await p.closeAll()
  return { root, paths }
}

const exists = (path: string) => stat(path).then(() => true, () => false)

/** Every log file under a root, by bucket/name, with its bytes. */
async function logs(root: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>()
  for (const dir of await readdir(root).catch(() => [] as string[])) {
    if (dir.startsWith('.')) continue
    for (const name of await readdir(join(root, dir))) if (name.endsWith('.jsonl')) out.set(`${dir}/${name}`, await readFile(join(root, dir, name)))
  }
  return out
}

describe('session-jsonl rm', () => {
  test('removes a session by a unique prefix and says where it was; its fork stays loadable', async () => {
    const { root, paths } = await rootWith(['alpha-1', 'beta'])
    const p = createJsonlPersistence({ root })
    await p.fork('alpha-1', { id: 'alpha-fork', seedLength: 4 })
    await p.closeAll()
    const r = await run(['--root', root, 'rm', 'alpha-'])
    expect(r.code).toBe(1) // ambiguous: alpha-1 and alpha-fork
    expect(r.stderr).toContain('E_AMBIGUOUS')
    const ok = await run(['--root', root, 'rm', 'alpha-1'])
    expect(ok.code).toBe(0)
    expect(ok.stdout).toBe(`removed alpha-1 (${paths['alpha-1']})\n`)
    expect(await exists(paths['alpha-1']!)).toBe(false)
    expect((await createJsonlPersistence({ root }).inspect('alpha-fork')).events).toHaveLength(4)
    const json = await run(['--root', root, 'rm', 'bet', '--json'])
    expect(JSON.parse(json.stdout)).toEqual({ removed: 'beta', location: { kind: 'jsonl', path: paths.beta } })
    expect(await exists(paths.beta!)).toBe(false)
  })

  test('refuses a session being written (E_LOCKED, the log untouched), an unknown id, and a missing id', async () => {
    const { root, paths } = await rootWith(['held'])
    const writer = createJsonlPersistence({ root })
    await writer.load('held')
    const before = await readFile(paths.held!)
    const r = await run(['--root', root, 'rm', 'held'])
    expect(r.code).toBe(1)
    expect(r.stderr).toMatch(/^session-jsonl: E_LOCKED: /)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(await readFile(paths.held!)).toEqual(before)
    await writer.append('held', turn(8, 3)) // the holder is not disturbed
    await writer.closeAll()
    expect((await run(['--root', root, 'rm', 'nothing-like-it'])).stderr).toMatch(/^session-jsonl: E_NOT_FOUND: /)
    expect((await run(['--root', root, 'rm'])).code).toBe(2)
    // an option the command does not take is refused, never ignored: this must not delete
    const dry = await run(['--root', root, 'rm', 'held', '--dry-run'])
    expect([dry.code, dry.stderr]).toEqual([2, 'session-jsonl: rm does not take --dry-run (see session-jsonl --help)\n'])
    expect((await run(['--root', root, 'rm', 'held', '--skip-existing'])).code).toBe(2)
    expect(await exists(paths.held!)).toBe(true)
    expect((await run(['--root', root, 'rm', 'held'])).code).toBe(0)
    expect(await exists(paths.held!)).toBe(false)
  })
})

describe('session-jsonl prune', () => {
  async function agedRoot() {
    const { root, paths } = await rootWith(['old-a', 'old-b', 'fresh', 'old-held'])
    const now = Date.now()
    await utimes(paths['old-a']!, new Date(now - 40 * DAY), new Date(now - 40 * DAY))
    await utimes(paths['old-b']!, new Date(now - 31 * DAY), new Date(now - 31 * DAY))
    const writer = createJsonlPersistence({ root })
    await writer.load('old-held')
    await utimes(paths['old-held']!, new Date(now - 60 * DAY), new Date(now - 60 * DAY))
    return { root, paths, writer }
  }

  test('--dry-run lists the sessions last written before the cutoff, oldest first, and deletes nothing; a locked one is reported as the real run skips it', async () => {
    const { root, writer } = await agedRoot()
    const before = await logs(root)
    const r = await run(['--root', root, 'prune', '--older-than', '30d', '--dry-run'])
    expect(r.code).toBe(0)
    const lines = r.stdout.trim().split('\n')
    expect(lines.slice(0, 2).map((l) => l.split(' ').slice(0, 3).join(' '))).toEqual(['would remove old-a', 'would remove old-b'])
    expect(lines[2]).toMatch(/^would remove 2 session\(s\), .* last written before .*; 1 skipped$/)
    expect(r.stderr).toMatch(/^skipped old-held: E_LOCKED: session 'old-held' is being written by pid \d+ /)
    expect(await logs(root)).toEqual(before)
    const json = JSON.parse((await run(['--root', root, 'prune', '--older-than', '30d', '--dry-run', '--json'])).stdout)
    expect(json.wouldRemove.map((s: { id: string }) => s.id)).toEqual(['old-a', 'old-b'])
    expect(json.skipped.map((s: { id: string; code: string }) => [s.id, s.code])).toEqual([['old-held', 'E_LOCKED']])
    expect(json.dryRun).toBe(true)
    await writer.closeAll()
  })

  test('removes each older session and prints it; a locked one is reported on stderr and kept; exit 0', async () => {
    const { root, paths, writer } = await agedRoot()
    const r = await run(['--root', root, 'prune', '--older-than', '30d'])
    expect(r.code).toBe(0)
    expect(r.stdout.split('\n').filter((l) => / \(last write /.test(l)).map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(['removed old-a', 'removed old-b'])
    expect(r.stderr).toMatch(/^skipped old-held: E_LOCKED: /m)
    expect(r.stdout).toContain('removed 2 session(s)')
    expect(r.stdout).toContain('1 skipped')
    expect([await exists(paths['old-a']!), await exists(paths['old-b']!), await exists(paths.fresh!), await exists(paths['old-held']!)]).toEqual([false, false, true, true])
    await writer.append('old-held', turn(8, 3))
    await writer.closeAll()
    // old-held was just written: nothing is left to prune
    const json = JSON.parse((await run(['--root', root, 'prune', '--older-than', '1d', '--json'])).stdout)
    expect(json.removed).toEqual([])
    expect(json.skipped).toEqual([])
  })

  test('--json names what was removed and what was skipped, with codes', async () => {
    const { root, writer } = await agedRoot()
    const r = await run(['--root', root, 'prune', '--older-than', '4w', '--json'])
    expect(r.code).toBe(0)
    const json = JSON.parse(r.stdout)
    expect(json.removed.map((s: { id: string }) => s.id)).toEqual(['old-a', 'old-b'])
    expect(json.skipped.map((s: { id: string; code: string }) => [s.id, s.code])).toEqual([['old-held', 'E_LOCKED']])
    expect(json.olderThan).toBe('4w')
    await writer.closeAll()
  })

  test('bad or missing durations are usage errors that delete nothing', async () => {
    const { root } = await rootWith(['s'])
    for (const bad of [[], ['--older-than', '30'], ['--older-than', '0d'], ['--older-than', 'd'], ['--older-than', '3y'], ['--older-than', '-1d'], ['--older-than', '1.5d']]) {
      const r = await run(['--root', root, 'prune', ...bad])
      expect({ bad, code: r.code, stderr: r.stderr }).toEqual({ bad, code: 2, stderr: expect.stringMatching(/^session-jsonl: .*--older-than/) })
      expect(r.stderr.trim().split('\n')).toHaveLength(1)
    }
    expect((await logs(root)).size).toBe(1)
  })

  test('an id given to prune is refused, never ignored: prune has no per-session form, so this must not delete every old session', async () => {
    const { root, writer } = await agedRoot()
    const before = await logs(root)
    const r = await run(['--root', root, 'prune', '--older-than', '30d', 'old-a'])
    expect([r.code, r.stderr]).toEqual([2, "session-jsonl: prune takes no session id (got 'old-a') (see session-jsonl --help)\n"])
    expect(await logs(root)).toEqual(before)
    for (const command of [['ls'], ['verify']]) expect((await run(['--root', root, ...command, 'old-a'])).code).toBe(2)
    await writer.closeAll()
  })

  // prune is called directly with a store whose list() lets another writer resume, append to
  // and close a session after listing it, right before prune deletes anything.
  async function prunedWhileWritten(json: boolean) {
    const { root, paths } = await rootWith(['old-a', 'old-b'])
    const now = Date.now()
    for (const id of ['old-a', 'old-b']) await utimes(paths[id]!, new Date(now - 40 * DAY), new Date(now - 40 * DAY))
    const store = createJsonlPersistence({ root })
    const writer = createJsonlPersistence({ root })
    const written = turn(8, 3)
    const listThenWrite = async (options?: ListOptions) => {
      const listed = await store.list(options)
      await writer.load('old-b')
      await writer.append('old-b', written)
      await writer.close('old-b')
      return listed
    }
    const racing = new Proxy(store, {
      get: (target, prop) => {
        if (prop === 'list') return listThenWrite
        const value: unknown = Reflect.get(target, prop, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const out: string[] = []
    const err: string[] = []
    const io: Io = { out: (s) => out.push(s), err: (s) => err.push(s), style: makeStyle(false), progress: undefined }
    const opened: OpenedRoot = { store: racing, name: root, directory: root, close: () => store.closeAll() }
    const code = await prune(opened, io, { json, dryRun: false, olderThan: '30d', olderThanMs: 30 * DAY, now })
    await opened.close()
    return { code, stdout: out.join(''), stderr: err.join(''), paths, root, written }
  }

  test('a session listed as old but written after the listing is kept and reported as skipped; exit 0', async () => {
    const r = await prunedWhileWritten(false)
    expect(r.code).toBe(0)
    expect(r.stdout.split('\n').filter((l) => / \(last write /.test(l)).map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(['removed old-a'])
    expect(r.stderr).toBe('skipped old-b: E_SESSION_LIVE: written since it was listed\n')
    expect(r.stdout).toContain('removed 1 session(s)')
    expect(r.stdout).toContain('1 skipped')
    expect([await exists(r.paths['old-a']!), await exists(r.paths['old-b']!)]).toEqual([false, true])
    // Nothing acknowledged was lost: the log holds both earlier turns and the one written after the listing.
    const kept = (await createJsonlPersistence({ root: r.root }).inspect('old-b')).events
    expect(kept.map((e) => e.seq)).toEqual([...Array(12).keys()])
    expect(kept.slice(8)).toEqual(r.written)

    const json = await prunedWhileWritten(true)
    expect(json.code).toBe(0)
    const parsed = JSON.parse(json.stdout)
    expect(parsed.removed.map((s: { id: string }) => s.id)).toEqual(['old-a'])
    expect(parsed.skipped).toEqual([{ id: 'old-b', code: 'E_SESSION_LIVE', message: 'written since it was listed' }])
    expect(await exists(json.paths['old-b']!)).toBe(true)
  })

  test('units: 90m, 12h and 1d12h are minutes, hours and their sums', async () => {
    const { root, paths } = await rootWith(['h2', 'h13', 'd2'])
    const now = Date.now()
    const age = async (id: string, ms: number) => utimes(paths[id]!, new Date(now - ms), new Date(now - ms))
    await age('h2', 2 * 3_600_000)
    await age('h13', 13 * 3_600_000)
    await age('d2', 2 * DAY)
    const ids = async (d: string) => JSON.parse((await run(['--root', root, 'prune', '--older-than', d, '--dry-run', '--json'])).stdout).wouldRemove.map((s: { id: string }) => s.id)
    expect(await ids('90m')).toEqual(['d2', 'h13', 'h2'])
    expect(await ids('12h')).toEqual(['d2', 'h13'])
    expect(await ids('1d12h')).toEqual(['d2'])
    expect(await ids('3d')).toEqual([])
  })
})

describe('session-jsonl copy', () => {
  test('copies sessions by id or prefix line for line: the target files are byte-identical', async () => {
    const { root, paths } = await rootWith(['one', 'two', 'three'], { two: { cwd: '/proj/x' } })
    const target = await tmpRoot()
    const r = await run(['--root', root, 'copy', 'one', 'tw', '--to', target])
    expect(r.code).toBe(0)
    expect(r.stdout).toBe(`copied one (8 events)\ncopied two (8 events)\ncopied 2 of 2 session(s) to ${target}\n`)
    expect(r.stderr).toBe('') // not a terminal: no progress line
    const copied = await logs(target)
    expect([...copied.keys()].sort()).toEqual([...(await logs(root)).keys()].filter((k) => !k.endsWith('three.jsonl')).sort())
    for (const id of ['one', 'two']) {
      const rel = paths[id]!.slice(root.length + 1)
      expect(copied.get(rel)).toEqual(await readFile(paths[id]!))
    }
    expect((await createJsonlPersistence({ root: target }).load('two')).events).toHaveLength(8)
  })

  test('an id already at the target fails before anything is copied, unless --skip-existing', async () => {
    const { root } = await rootWith(['a', 'b', 'c'])
    const target = await tmpRoot()
    expect((await run(['--root', root, 'copy', 'a', '--to', target])).code).toBe(0)
    const refused = await run(['--root', root, 'copy', 'c', 'a', '--to', target])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/^session-jsonl: E_EXISTS: 1 session\(s\) already exist at .*: a; pass --skip-existing/)
    expect([...(await logs(target)).keys()]).toEqual(['_no-cwd/a.jsonl']) // c was not copied either
    const skipped = await run(['--root', root, 'copy', 'c', 'a', '--to', target, '--skip-existing', '--json'])
    expect(skipped.code).toBe(0)
    const json = JSON.parse(skipped.stdout)
    expect(json.copied).toEqual([{ id: 'c', events: 8 }])
    expect(json.skipped.map((s: { id: string; code: string }) => [s.id, s.code])).toEqual([['a', 'E_EXISTS']])
    expect(json.failed).toEqual([])
  })

  test('--all copies every listable session; a torn tail is left behind, a held session is copied without waiting', async () => {
    const { root, paths } = await rootWith(['whole', 'torn', 'held'])
    await appendFile(paths.torn!, '{"seq":8,"type":"turn/st')
    const writer = createJsonlPersistence({ root })
    await writer.load('held')
    const target = await tmpRoot()
    const r = await run(['--root', root, 'copy', '--all', '--to', target, '--json'])
    expect(r.code).toBe(0)
    expect(JSON.parse(r.stdout).copied.map((c: { id: string }) => c.id).sort()).toEqual(['held', 'torn', 'whole'])
    const copied = await logs(target)
    const tornBytes = (await readFile(paths.torn!)).toString('utf8')
    expect(copied.get('_no-cwd/torn.jsonl')?.toString('utf8')).toBe(tornBytes.slice(0, tornBytes.lastIndexOf('\n') + 1))
    expect(copied.get('_no-cwd/whole.jsonl')).toEqual(await readFile(paths.whole!))
    await writer.closeAll()
  })

  test('usage: --to is required; ids or --all, not both, not neither; an unknown id fails before anything is copied', async () => {
    const { root } = await rootWith(['x'])
    const target = await tmpRoot()
    expect((await run(['--root', root, 'copy', 'x'])).code).toBe(2)
    expect((await run(['--root', root, 'copy', '--to', target])).code).toBe(2)
    expect((await run(['--root', root, 'copy', 'x', '--all', '--to', target])).code).toBe(2)
    const unknown = await run(['--root', root, 'copy', 'x', 'nope', '--to', target])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toMatch(/^session-jsonl: E_NOT_FOUND: .*'nope'/)
    expect((await logs(target)).size).toBe(0)
  })

  test.runIf(process.platform === 'linux' && existsSync('/usr/bin/script'))('under a real terminal (util-linux script), the bar is drawn and wiped', async () => {
    const { root } = await rootWith(['t1', 't2'])
    const target = await tmpRoot()
    const bin = fileURLToPath(new URL('../dist/cli/main.js', import.meta.url))
    const command = [process.execPath, bin, '--root', root, 'copy', '--all', '--to', target].map((a) => `'${a}'`).join(' ')
    const { stdout } = await promisify(execFile)('/usr/bin/script', ['-qec', command, '/dev/null'], { env: { ...process.env, NO_COLOR: '1' } })
    expect(stdout).toContain('\rcopy [###############...............] 1/2')
    expect(stdout).toContain('\r\u001b[K')
    expect(stdout).toContain(`copied 2 of 2 session(s) to ${target}`)
    expect((await logs(target)).size).toBe(2)
  })

  test('on a terminal, a progress line is reported for each session copied', async () => {
    const { root } = await rootWith(['p1', 'p2', 'p3'])
    const target = await tmpRoot()
    const calls: [string, number, number][] = []
    const out: string[] = []
    const io: Io = { out: (s) => out.push(s), err: () => {}, style: makeStyle(false), progress: (what, done, total) => calls.push([what, done, total]) }
    expect(await main(['--root', root, 'copy', '--all', '--to', target], {}, io)).toBe(0)
    expect(calls).toEqual([['copy', 1, 3], ['copy', 2, 3], ['copy', 3, 3]])
    expect(out.at(-1)).toBe(`copied 3 of 3 session(s) to ${target}\n`)
  })
})

describe('history/rewind in show and export', () => {
  test('rewound messages are marked and each rewind says what it took out of the history', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('undo'))
    await p.append('undo', [
      ...turn(0, 1),
      ev(4, 'turn/start', { turn: 2 }),
      ev(5, 'user/message', { content: 'take this back' }),
      ev(6, 'history/rewind', { to: 4 }),
      ev(7, 'turn/end', { turn: 2, reason: { kind: 'completed' } }),
    ])
    await p.closeAll()
    const show = await run(['--root', root, 'show', 'undo'])
    expect(show.stdout).toContain('user: take this back [rewound]')
    expect(show.stdout).toContain('user: question 1\n')
    expect(show.stdout).toContain("↶ history rewound to seq 4: 1 message(s) from seq 4 to 5 are out of the model's history")
    const md = await run(['--root', root, 'export', 'undo', '--format', 'md'])
    expect(md.stdout).toContain("*(rewound: seq 5 is out of the model's history)*\n\n**User:** take this back")
    expect(md.stdout).toContain('*↶ history rewound to seq 4')
  })
})

describe('PostgreSQL roots', () => {
  test('a postgres:// or postgresql:// URL selects PostgreSQL; ?schema= names the schema and is not passed to the server', async () => {
    expect([isPostgresUrl('postgres://h/db'), isPostgresUrl('POSTGRESQL://h/db'), isPostgresUrl('/var/sessions'), isPostgresUrl('postgres-dir')]).toEqual([true, true, false, false])
    expect(DEFAULT_PG_SCHEMA).toBe('session_persistence')
    expect(parsePostgresUrl('postgres://ana:s3cret@db.internal:5433/agents')).toEqual({
      connectionString: 'postgres://ana:s3cret@db.internal:5433/agents',
      schema: 'session_persistence',
      name: 'postgres://ana@db.internal:5433/agents (schema session_persistence)',
    })
    const withSchema = parsePostgresUrl('postgresql://ana@h/agents?sslmode=require&schema=team_a')
    expect(withSchema.schema).toBe('team_a')
    expect(withSchema.connectionString).toBe('postgresql://ana@h/agents?sslmode=require')
    for (const bad of ['postgres://h/db?schema=', 'postgres://[bad']) {
      expect(() => parsePostgresUrl(bad)).toThrow(expect.objectContaining({ code: 'E_CONFIG' }))
      try {
        parsePostgresUrl(bad)
      } catch (err) {
        expect(isSessionPersistenceError(err, 'E_CONFIG')).toBe(true)
      }
    }
  })

  test('an unreachable or unavailable PostgreSQL root fails with one line that never shows the password', async () => {
    const r = await run(['--root', 'postgres://ana:s3cret@127.0.0.1:1/agents', 'ls'])
    expect(r.code).toBe(1)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toMatch(/^session-jsonl: E_[A-Z_]+: /)
    expect(r.stderr).not.toContain('s3cret')
  })
})
