// The CLI over a postgres:// root: every command, and `copy` between a JSONL root and
// PostgreSQL byte for byte, both ways.
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterAll, describe, expect, test } from 'vitest'
import { main } from '../src/cli/main.js'
import type { Io } from '../src/cli/commands.js'
import { makeStyle } from '../src/cli/render.js'
import { isSessionPersistenceError } from '../src/errors.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { ev, meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, sql } from './helpers/pg-env.js'
import { runCli, startCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

const url = pgUrl()
const schemas: string[] = []
afterAll(async () => {
  if (url) await dropSchemas(url, schemas)
})

/** Every log file under a JSONL root, by bucket/name, as bytes (base64). */
async function files(root: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const dir of await readdir(root)) {
    if (dir.startsWith('.')) continue
    for (const name of await readdir(join(root, dir))) out[`${dir}/${name}`] = (await readFile(join(root, dir, name))).toString('base64')
  }
  return out
}

describe.skipIf(!url)('session-jsonl over a postgres:// root', () => {
  test('copy JSONL → PostgreSQL → JSONL is byte-identical; ls, show, verify, fork, rm, prune and repair work on the PostgreSQL root', async () => {
    const schema = freshSchema('cli')
    schemas.push(schema)
    const pgRoot = `${url}?schema=${schema}`
    const source = await tmpRoot()
    const p = createJsonlPersistence({ root: source })
    await p.create(meta('alpha', { cwd: '/proj/a', createdAt: 1_000, note: 'ünï\u2028code' }))
    await p.append('alpha', [...turn(0, 1), { ...ev(4, 'vendor/x', { s: '"\\\u2029' }), extra: [1] }, ...turn(5, 2)])
    await p.create(meta('beta', { createdAt: 2_000 }))
    await p.append('beta', [ev(0, 'turn/start', { turn: 1 }), ev(1, 'user/message', { content: 'open turn' })])
    await p.closeAll()

    const copied = await runCli(['--root', source, 'copy', '--all', '--to', pgRoot, '--json'])
    expect(copied.code).toBe(0)
    expect(JSON.parse(copied.stdout).copied.map((c: { id: string }) => c.id).sort()).toEqual(['alpha', 'beta'])
    const again = await runCli(['--root', source, 'copy', 'alpha', '--to', pgRoot])
    expect(again.code).not.toBe(0) // exists at the target
    expect(again.stderr.trim().split('\n')).toHaveLength(1)

    const ls = JSON.parse((await runCli(['--root', pgRoot, 'ls', '--json'])).stdout)
    expect(ls.sessions.map((s: { meta: { id: string } }) => s.meta.id)).toEqual(['beta', 'alpha'])
    expect(ls.sessions[0].location).toEqual({ kind: 'postgres', schema, id: 'beta' })
    const show = await runCli(['--root', pgRoot, 'show', 'alp'])
    expect(show.code).toBe(0)
    expect(show.stdout).toContain('session alpha')
    const verify = JSON.parse((await runCli(['--root', pgRoot, 'verify', '--json'])).stdout)
    expect(verify.summary).toMatchObject({ logs: 2, ok: 1, repairable: 1, corrupt: 0 })

    const back = await tmpRoot()
    expect((await runCli(['--root', pgRoot, 'copy', '--all', '--to', back])).code).toBe(0)
    expect(await files(back)).toEqual(await files(source))

    const fork = await runCli(['--root', pgRoot, 'fork', 'alpha', '--at', '4', '--id', 'alpha-child', '--json'])
    expect(JSON.parse(fork.stdout)).toMatchObject({ id: 'alpha-child', parentSession: 'alpha', seedLength: 4 })
    const repaired = await runCli(['--root', pgRoot, 'repair', 'beta', '--json'])
    expect(repaired.code).toBe(0)
    expect((await sql(url!, `SELECT seq FROM "${schema}".events WHERE session_id = 'beta'`)).length).toBe(3)

    expect((await runCli(['--root', pgRoot, 'rm', 'alpha-child'])).code).toBe(0)
    expect((await runCli(['--root', pgRoot, 'rm', 'alpha-child'])).code).not.toBe(0)
    await sql(url!, `UPDATE "${schema}".sessions SET updated_at = now() - interval '40 days' WHERE session_id = 'beta'`)
    const prune = JSON.parse((await runCli(['--root', pgRoot, 'prune', '--older-than', '30d', '--json'])).stdout)
    expect(JSON.stringify(prune)).toContain('beta')
    const left = JSON.parse((await runCli(['--root', pgRoot, 'ls', '--json'])).stdout)
    expect(left.sessions.map((s: { meta: { id: string } }) => s.meta.id)).toEqual(['alpha'])
  })

  test('v0.3 on a PostgreSQL root: ls --limit, show --last and --from, tail -n and tail -f of appends from another instance', async () => {
    const schema = freshSchema('cli3')
    schemas.push(schema)
    const pgRoot = `${url}?schema=${schema}`
    const p = createPostgresPersistence({ connectionString: url!, schema })
    try {
      for (const id of ['older', 'newer']) {
        await p.create(meta(id))
        await p.append(id, [...turn(0, 1), ...turn(4, 2)])
      }
      await p.append('older', turn(8, 3)) // written last
      const ls = await runCli(['--root', pgRoot, 'ls', '--limit', '1'])
      expect(ls.stdout.trim().split('\n').slice(1).map((l) => l.split(/\s+/)[0])).toEqual(['older'])
      const last = await runCli(['--root', pgRoot, 'show', 'older', '--last', '2'])
      expect(last.stdout).toContain('showing seqs 10 to 11 of 12 event(s)')
      expect(last.stdout).toContain('assistant: answer 3')
      const from = await runCli(['--root', pgRoot, 'show', 'older', '--from', '4', '--to', '6'])
      expect(from.stdout).toContain('showing seqs 4 to 5 of 12 event(s)')
      expect(from.stdout).toContain('user: question 2')
      expect((await runCli(['--root', pgRoot, 'tail', 'newer', '-n', '1'])).stdout).toBe('#7 ── end of turn 2 (completed)\n')
      const tail = startCli(['--root', pgRoot, 'tail', 'newer', '-n', '1', '-f', '--json'])
      try {
        await tail.waitForLines(1)
        const more = turn(8, 3)
        await p.append('newer', more)
        expect((await tail.waitForLines(5, 20_000)).slice(1).map((l) => JSON.parse(l))).toEqual(more)
        tail.child.kill('SIGINT')
        expect(await tail.exit()).toEqual({ code: 0, signal: null })
      } finally {
        tail.child.kill('SIGKILL')
      }
    } finally {
      await p.closeAll()
      await p.end()
    }
  })

  test('format versions 0 and 1 side by side (and a fork of each): copy JSONL → PostgreSQL → JSONL byte-identical, verify ok on PostgreSQL, a damaged row named', async () => {
    const schema = freshSchema('cliv')
    schemas.push(schema)
    const pgRoot = `${url}?schema=${schema}`
    const source = await tmpRoot()
    const v0 = createJsonlPersistence({ root: source, formatVersion: 0 })
    const v1 = createJsonlPersistence({ root: source })
    await v0.create(meta('v0', { createdAt: 1_000 }))
    await v0.append('v0', [...turn(0, 1), ...turn(4, 2)])
    await v1.create(meta('v1', { createdAt: 2_000, note: 'ünï\u2028' }))
    await v1.append('v1', [...turn(0, 1), { ...ev(4, 'vendor/x', { s: '"\\\u2029' }), extra: [1] }, ...turn(5, 2)])
    await v0.closeAll()
    await v1.fork('v0', { id: 'f0', seedLength: 4 })
    await v1.append('f0', turn(4, 3))
    await v0.fork('v1', { id: 'f1', seedLength: 4 })
    await v0.append('f1', turn(4, 3))
    await v0.closeAll()
    await v1.closeAll()
    const before = await files(source)
    const texts = Object.values(before).map((b) => Buffer.from(b, 'base64').toString('utf8'))
    expect(texts.filter((t) => t.includes('"crc"'))).toHaveLength(2) // v1 and f1 (its parent's version)

    expect((await runCli(['--root', source, 'copy', '--all', '--to', pgRoot])).code).toBe(0)
    // PostgreSQL holds the exact lines, each log in its own version.
    const pg = createPostgresPersistence({ connectionString: url!, schema })
    try {
      for (const id of ['v0', 'v1', 'f0', 'f1']) {
        const raw = await pg.readRaw(id)
        const file = texts.find((t) => t.startsWith(raw.headerLine))!
        expect([raw.headerLine, ...raw.eventLines].map((l) => `${l}\n`).join('')).toBe(file)
      }
    } finally {
      await pg.end()
    }
    const verify = await runCli(['--root', pgRoot, 'verify', '--json'])
    expect(verify.code).toBe(0)
    expect(JSON.parse(verify.stdout).summary).toMatchObject({ logs: 4, ok: 4, corrupt: 0 })

    const back = await tmpRoot()
    expect((await runCli(['--root', pgRoot, 'copy', '--all', '--to', back])).code).toBe(0)
    expect(await files(back)).toEqual(before)

    // A row changed by hand: verify names it; version 0 has no way to tell.
    await sql(url!, `UPDATE "${schema}".events SET line = replace(line, 'question 2', 'question 9') WHERE session_id IN ('v1', 'v0') AND seq = 6`)
    const damaged = await runCli(['--root', pgRoot, 'verify', '--json'])
    expect(damaged.code).not.toBe(0)
    expect(JSON.parse(damaged.stdout).summary).toMatchObject({ logs: 4, ok: 3, corrupt: 1 })
    expect(damaged.stdout).toContain('checksum mismatch')
  })

  test('an exact id whose row cannot be listed (a header of a newer version) names that row, never a longer id it is a prefix of', async () => {
    const schema = freshSchema('cliid')
    schemas.push(schema)
    const pgRoot = `${url}?schema=${schema}`
    const pg = createPostgresPersistence({ connectionString: url!, schema, formatVersion: 0 })
    try {
      for (const id of ['abc', 'abcdef']) {
        await pg.create(meta(id))
        await pg.append(id, [...turn(0, 1), ...turn(4, 2)])
      }
      await pg.closeAll()
    } finally {
      await pg.end()
    }
    const [changed] = await sql<{ n: number }>(url!, `WITH u AS (UPDATE "${schema}".sessions SET header_line = replace(header_line, '"version":0', '"version":2') WHERE session_id = 'abc' RETURNING 1) SELECT count(*)::int AS n FROM u`)
    expect(changed!.n).toBe(1)
    // The CLI from the sources, in this process: its exit code or the code of the error it threw.
    const cli = async (args: string[]) => {
      const out: string[] = []
      const io: Io = { out: (s) => out.push(s), err: (s) => out.push(s), style: makeStyle(false), progress: undefined }
      try {
        return { result: (await main(['--root', pgRoot, ...args], {}, io)) as number | string, out: out.join('') }
      } catch (e) {
        if (!isSessionPersistenceError(e)) throw e
        return { result: e.code as number | string, out: `${out.join('')}${e.message}` }
      }
    }
    const rows = async () => sql<{ session_id: string; header_line: string; length: string }>(url!, `SELECT session_id, header_line, length::text FROM "${schema}".sessions ORDER BY session_id`)
    const before = await rows()
    expect((await cli(['show', 'abc'])).result).toBe('E_FORMAT_UNSUPPORTED')
    expect((await cli(['fork', 'abc', '--at', '4', '--id', 'child'])).result).toBe('E_FORMAT_UNSUPPORTED')
    expect((await cli(['repair', 'abc', '--dry-run'])).result).toBe('E_FORMAT_UNSUPPORTED')
    expect((await cli(['export', 'abc', '--format', 'json'])).result).toBe('E_FORMAT_UNSUPPORTED')
    expect((await cli(['tree', 'abc'])).result).toBe('E_FORMAT_UNSUPPORTED')
    const ambiguous = await cli(['rm', 'ab'])
    expect([ambiguous.result, ambiguous.out]).toEqual(['E_AMBIGUOUS', "'ab' is a prefix of 2 sessions: abc, abcdef"])
    expect(await rows()).toEqual(before)
    expect((await cli(['rm', 'abc'])).result).toBe(0)
    expect(await rows()).toEqual(before.filter((r) => r.session_id !== 'abc'))
  })

  test('a bad schema name in the URL fails with one clear line', async () => {
    const r = await runCli(['--root', `${url}?schema=Not-Valid`, 'ls'])
    expect(r.code).not.toBe(0)
    expect(r.stderr.trim().split('\n')).toHaveLength(1)
  })
})
