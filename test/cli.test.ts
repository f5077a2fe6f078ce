import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { ev, meta, turn } from './helpers/events.js'
import { HEADER, writeRawLog } from './helpers/raw-log.js'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

const run = runCli

async function snapshot(root: string): Promise<Map<string, string>> {
  const files = new Map<string, string>()
  for (const dir of await readdir(root)) {
    if (dir.startsWith('.')) continue
    for (const name of await readdir(join(root, dir))) files.set(`${dir}/${name}`, (await readFile(join(root, dir, name))).toString('base64'))
  }
  return files
}

let root: string // shared by the whole file (tmpRoot() is removed after each test)
afterAll(() => rm(root, { recursive: true, force: true }))
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'spj-cli-'))
  const p = createJsonlPersistence({ root })
  await p.create(meta('healthy-1', { cwd: '/proj/a', createdAt: 1_000 }))
  await p.append('healthy-1', [
    ev(0, 'request/header', { header: { model: 'm-1', tools: ['bash'] }, reason: 'initial' }),
    ev(1, 'turn/start', { turn: 1 }),
    ev(2, 'user/message', { content: 'list files' }),
    ev(3, 'assistant/chunk', { turn: 1, step: 0, chunk: { t: 'ok' } }),
    ev(4, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'text', text: 'Listing.' }, { type: 'tool-call', callId: 'k1', name: 'bash', arguments: { cmd: 'ls' } }] }),
    ev(5, 'tool/result', { turn: 1, step: 0, callId: 'k1', content: [{ type: 'text', text: 'a.txt' }] }),
    ev(6, 'turn/end', { turn: 1, reason: { kind: 'completed' } }),
    ...turn(7, 2),
  ])
  await p.fork('healthy-1', { id: 'healthy-1-fork', seedLength: 7, createdAt: 3_000 })
  await p.create(meta('torn', { cwd: '/proj/b', createdAt: 2_000 }))
  await p.append('torn', [ev(0, 'turn/start', { turn: 1 }), ev(1, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'tool-call', callId: 'x9', name: 'grep', arguments: {} }] })])
  await p.closeAll()
  await appendFile(p.locate(meta('torn', { cwd: '/proj/b' })).path, '{"seq":2,"type":"tool/res')
  await writeRawLog(root, 'broken', `${HEADER('broken')}{"seq":0,"type":"turn/start","time":1}\ngarbage\n{"seq":2,"type":"turn/end","time":2}\n`)
  await writeRawLog(root, 'future', '{"type":"session","version":2,"id":"future","createdAt":5,"delegationDepth":0}\n')
  await writeFile(join(root, '_no-cwd', '.tmp-0123abcd'), 'left by a crash')
})

describe('session-jsonl (docs/contract.md §11)', () => {
  test('without a root: one line saying how to give it, exit 2', async () => {
    const r = await run(['ls'], { SESSION_JSONL_ROOT: '' })
    expect(r.code).toBe(2)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
    expect(r.stderr).toContain('--root')
    expect(r.stderr).toContain('SESSION_JSONL_ROOT')
  })

  test('--help for every command; unknown commands are usage errors', async () => {
    for (const cmd of ['ls', 'show', 'tree', 'verify', 'repair', 'fork', 'export', 'rm', 'prune', 'copy']) {
      const r = await run([cmd, '--help'])
      expect(r.code).toBe(0)
      expect(r.stdout).toContain(`usage: session-jsonl ${cmd}`)
    }
    const bad = await run(['--root', root, 'frobnicate'])
    expect(bad.code).toBe(2)
    expect(bad.stderr).toContain("unknown command 'frobnicate'")
  })

  test('ls: a table newest first, --cwd filter, --json; bad files named on stderr', async () => {
    const r = await run(['--root', root, 'ls'])
    expect(r.code).toBe(0)
    const ids = r.stdout.trim().split('\n').slice(1).map((l) => l.split(/\s+/)[0])
    expect(ids).toEqual(['healthy-1-fork', 'torn', 'broken', 'healthy-1']) // equal createdAt: by id
    expect(r.stdout).toContain('fork of healthy-1@7')
    expect(r.stderr).toContain('future.jsonl')
    const filtered = await run(['--root', root, 'ls', '--cwd', '/proj/b', '--json'])
    expect(JSON.parse(filtered.stdout).sessions.map((s: { meta: { id: string } }) => s.meta.id)).toEqual(['torn'])
    const env = await run(['ls', '--json'], { SESSION_JSONL_ROOT: root })
    expect(JSON.parse(env.stdout).problems).toHaveLength(1)
  })

  test('show: a transcript with chunks folded, tool results, and what a repair would write; --raw; --json', async () => {
    const healthy = await run(['--root', root, 'show', 'healthy-1'])
    expect(healthy.code).toBe(0)
    expect(healthy.stdout).toContain('request header (initial): model m-1, 1 tools')
    expect(healthy.stdout).toContain('assistant (streamed in 1 chunks): Listing.')
    expect(healthy.stdout).toContain('→ bash {"cmd":"ls"} [k1]')
    expect(healthy.stdout).toContain('← [k1] a.txt')
    const torn = await run(['--root', root, 'show', 'torn'])
    expect(torn.stdout).toContain('needs repair: cut 25 bytes in 1 line(s)')
    expect(torn.stdout).toContain('⚠ interrupted [a repair would write this]')
    expect(torn.stdout).toContain('end of turn 1 (interrupted) [a repair would write this]')
    const raw = await run(['--root', root, 'show', 'torn', '--raw'])
    expect(raw.stdout.endsWith('{"seq":2,"type":"tool/res')).toBe(true)
    const json = JSON.parse((await run(['--root', root, 'show', 'torn', '--json'])).stdout)
    expect(json.repair.persisted).toBe(false)
  })

  test('a unique prefix works; an ambiguous one lists the matches; unknown ids fail with one line', async () => {
    expect((await run(['--root', root, 'show', 'tor'])).code).toBe(0)
    const amb = await run(['--root', root, 'show', 'heal'])
    expect(amb.code).toBe(1)
    expect(amb.stderr).toBe("session-jsonl: E_AMBIGUOUS: 'heal' is a prefix of 2 sessions: healthy-1, healthy-1-fork — give more of the id\n")
    const none = await run(['--root', root, 'show', 'zzz'])
    expect(none.code).toBe(1)
    expect(none.stderr.trim().split('\n')).toHaveLength(1)
    expect(none.stderr).toMatch(/^session-jsonl: E_NOT_FOUND: /)
    expect(none.stderr).not.toContain('    at ') // no stack trace
  })

  test('one id in two buckets: E_AMBIGUOUS names both paths and says what helps (not more of the id, not rm)', async () => {
    const r2 = await tmpRoot()
    const first = await writeRawLog(r2, 'twice', `${HEADER('twice')}${JSON.stringify(ev(0, 'turn/start', { turn: 1 }))}\n`)
    const second = join(r2, 'other-bucket', 'twice.jsonl')
    await mkdir(join(r2, 'other-bucket'))
    await writeFile(second, await readFile(first))
    const [a, b] = [first, second].sort()
    const hint = '`session-jsonl verify` lists both copies; keep one and move the other out of the root (`rm` cannot choose between them)'
    for (const args of [['show', 'twice'], ['rm', 'twice']]) {
      expect(await run(['--root', r2, ...args])).toEqual({ code: 1, stdout: '', stderr: `session-jsonl: E_AMBIGUOUS: session 'twice' exists in 2 buckets: ${a}, ${b} — ${hint}\n` })
    }
  })

  test('show of a corrupt log: E_CORRUPT with line and byte, one line, exit 1', async () => {
    const r = await run(['--root', root, 'show', 'broken'])
    expect(r.code).toBe(1)
    expect(r.stderr).toContain('E_CORRUPT')
    expect(r.stderr).toContain('line 3')
  })

  test('tree: fork lineage', async () => {
    const r = await run(['--root', root, 'tree', 'healthy-1-fork'])
    expect(r.stdout).toBe('healthy-1\n└─ healthy-1-fork (fork at 7)\n')
    const all = JSON.parse((await run(['--root', root, 'tree', '--json'])).stdout)
    expect(all.map((n: { id: string }) => n.id)).toEqual(['broken', 'healthy-1', 'torn'])
  })

  test('verify: statuses ok, repairable, corrupt, unsupported; temp files; exit 1; never modifies a byte', async () => {
    const before = await snapshot(root)
    const r = await run(['--root', root, 'verify', '--json'])
    expect(r.code).toBe(1)
    const report = JSON.parse(r.stdout)
    const status = Object.fromEntries(report.logs.map((l: { id?: string; path: string; status: string }) => [l.id ?? l.path.split('/').pop(), l.status]))
    expect(status).toEqual({ 'healthy-1': 'ok', 'healthy-1-fork': 'ok', torn: 'repairable', broken: 'corrupt', 'future.jsonl': 'unsupported' })
    const broken = report.logs.find((l: { id?: string }) => l.id === 'broken')
    expect([broken.line, broken.byteOffset]).toEqual([3, HEADER('broken').length + '{"seq":0,"type":"turn/start","time":1}\n'.length])
    expect(report.tempFiles).toHaveLength(1)
    const text = await run(['--root', root, 'verify'])
    expect(text.stdout).toContain('repairable   torn: would cut 25 bytes in 1 line(s)')
    expect(text.stdout).toContain('5 log(s): 2 ok, 1 repairable, 1 corrupt, 1 unsupported; 1 temporary file(s)')
    expect(await snapshot(root)).toEqual(before)
  })

  test('verify exits 0 when every log is ok or repairable', async () => {
    const r2 = await tmpRoot()
    await writeRawLog(r2, 'only-torn', `${HEADER('only-torn')}{"seq":0,"type":"turn/start","time":1}\n{"se`)
    const r = await run(['--root', r2, 'verify'])
    expect(r.code).toBe(0)
    expect(r.stdout).toContain('1 repairable')
  })

  test('repair --dry-run writes nothing; repair cuts, closes, and a second repair has nothing to do', async () => {
    const r2 = await tmpRoot()
    const path = await writeRawLog(r2, 'fixme', `${HEADER('fixme')}{"seq":0,"type":"turn/start","time":1,"data":{"turn":1}}\n{"seq":1,"ty`)
    const bytes = await readFile(path)
    const dry = await run(['--root', r2, 'repair', 'fixme', '--dry-run'])
    expect(dry.stdout).toContain('would cut 12 bytes in 1 line(s)')
    expect(dry.stdout).toContain('would write 1 closing event(s)')
    expect(await readFile(path)).toEqual(bytes)
    const real = await run(['--root', r2, 'repair', 'fixme', '--json'])
    expect(JSON.parse(real.stdout).repair.persisted).toBe(true)
    expect((await readFile(path, 'utf8')).trimEnd().split('\n').at(-1)).toContain('"interrupted"')
    expect((await run(['--root', r2, 'repair', 'fixme'])).stdout).toContain('nothing to repair')
    const corrupt = await run(['--root', root, 'repair', 'broken'])
    expect(corrupt.code).toBe(1)
    expect(corrupt.stderr).toContain('the file was not modified')
  })

  test('fork --at n: prints the new id (a UUID unless --id); bad points are refused', async () => {
    const r2 = await tmpRoot()
    const p = createJsonlPersistence({ root: r2 })
    await p.create(meta('parent'))
    await p.append('parent', [...turn(0, 1), ...turn(4, 2)])
    await p.closeAll()
    const named = await run(['--root', r2, 'fork', 'par', '--at', '4', '--id', 'kid'])
    expect(named.stdout).toBe('kid\n')
    const random = await run(['--root', r2, 'fork', 'parent', '--at', '8'])
    expect(random.stdout.trim()).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect((await createJsonlPersistence({ root: r2 }).inspect('kid')).events).toHaveLength(4)
    const bad = await run(['--root', r2, 'fork', 'parent', '--at', '3'])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain('E_BAD_FORK_POINT')
    expect((await run(['--root', r2, 'fork', 'parent'])).code).toBe(2)
  })

  test('export: Markdown or JSON, to stdout or --out', async () => {
    const md = await run(['--root', root, 'export', 'healthy-1', '--format', 'md'])
    expect(md.stdout).toContain('# Session healthy-1')
    expect(md.stdout).toContain('**User:** list files')
    expect(md.stdout).toContain('Tool call `bash` (k1):')
    const out = join(await tmpRoot(), 'session.json')
    const r = await run(['--root', root, 'export', 'healthy-1', '--format', 'json', '--out', out])
    expect(r.code).toBe(0)
    expect(JSON.parse(await readFile(out, 'utf8')).events).toHaveLength(11)
    expect((await run(['--root', root, 'export', 'healthy-1', '--format', 'pdf'])).code).toBe(2)
    // --json, which every command takes, is --format json here (alone it was exit 2; with --format md it was ignored)
    const json = await run(['--root', root, 'export', 'healthy-1', '--json'])
    expect(json.code).toBe(0)
    expect(JSON.parse(json.stdout).events).toHaveLength(11)
    const both = await run(['--root', root, 'export', 'healthy-1', '--format', 'md', '--json'])
    expect(both).toMatchObject({ code: 2, stdout: '' })
    expect(both.stderr).toMatch(/export --json writes --format json, not --format md/)
  })

  test('a session being written elsewhere: repair fails with E_LOCKED naming the holder; show still works', async () => {
    const r2 = await tmpRoot()
    const p = createJsonlPersistence({ root: r2 })
    await p.create(meta('busy'))
    await p.append('busy', turn(0, 1))
    const locked = await run(['--root', r2, 'repair', 'busy'])
    expect(locked.code).toBe(1)
    expect(locked.stderr).toMatch(/E_LOCKED: .*pid \d+ on host/)
    expect((await run(['--root', r2, 'show', 'busy'])).code).toBe(0)
    await p.closeAll()
  })
})
