import { createHash } from 'node:crypto'
import { readdir, readFile, stat } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { afterEach, beforeEach, describe, expect, test } from 'vitest'
import { createJsonlPersistence, type SessionEvent } from '../src/index.js'
import { createFaultInjectingFileSystem, MUTATING_OPS } from '../src/testing/index.js'
import { ev, meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { specSeal } from './helpers/spec-seal.js'
import { prepareBatch, serializeEvents } from '../src/session/prepare-batch.js'

describe('layout and lines (docs/contract.md §3)', () => {
  test('bucket is cwd-<sha256(cwd)[:12]> or _no-cwd; header and event lines are exact (version 0)', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root, formatVersion: 0 })
    const cwd = '/home/dev/projé'
    const bucket = `cwd-${createHash('sha256').update(cwd, 'utf8').digest('hex').slice(0, 12)}`
    const m = { id: 'S.1', createdAt: 5, cwd, delegationDepth: 2, parentSession: 'p', seedLength: 0, zExtra: { a: [1] } }
    expect(p.locate(m).path).toBe(join(root, bucket, '%53%2E1.jsonl'))
    expect(p.locate(meta('n')).path).toBe(join(root, '_no-cwd', 'n.jsonl'))
    await p.create(m)
    const events: SessionEvent[] = [
      { time: 1, seq: 0, type: 'turn/start', data: { turn: 1 } },
      { seq: 1, type: 'x', time: 2.5, ignorable: true, data: undefined, custom: 'kept' } as unknown as SessionEvent,
    ]
    await p.append('S.1', events)
    await p.closeAll()
    expect(await readFile(p.locate(m).path, 'utf8')).toBe(
      '{"type":"session","version":0,"id":"S.1","cwd":"/home/dev/projé","createdAt":5,"parentSession":"p","seedLength":0,"delegationDepth":2,"zExtra":{"a":[1]}}\n' +
        '{"time":1,"seq":0,"type":"turn/start","data":{"turn":1}}\n' +
        '{"seq":1,"type":"x","time":2.5,"ignorable":true,"custom":"kept"}\n',
    )
  })

  test('version 1 (§16, the default): every line ends with "crc", the CRC-32 of the bytes before it, as 8 lowercase hex digits', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    const m = { id: 'v1', createdAt: 5, cwd: '/home/dev/projé', delegationDepth: 0 }
    await p.create(m)
    await p.append('v1', [{ time: 1, seq: 0, type: 'turn/start', data: { turn: 1, text: 'é' } }])
    await p.closeAll()
    // Written from the spec's formula, not the package's code: P + ',"crc":"' + H + '"}'.
    const seal = specSeal
    expect(await readFile(p.locate(m).path, 'utf8')).toBe(
      `${seal('{"type":"session","version":1,"id":"v1","cwd":"/home/dev/projé","createdAt":5,"delegationDepth":0}')}\n` +
        `${seal('{"time":1,"seq":0,"type":"turn/start","data":{"turn":1,"text":"é"}}')}\n`,
    )
    // readers remove the checksum: what loads is what was appended
    expect((await p.read('v1')).events).toEqual([{ time: 1, seq: 0, type: 'turn/start', data: { turn: 1, text: 'é' } }])
  })

  test('a batch of over a million characters (written straight into its buffer) has the same lines, both versions, first append and later ones', async () => {
    for (const version of [0, 1] as const) {
      const root = await tmpRoot()
      const p = createJsonlPersistence({ root, formatVersion: version, sync: 'none' })
      const m = { id: `big${version}`, createdAt: 5, delegationDepth: 0 }
      await p.create(m)
      const big = (seq: number, text: string): SessionEvent => ({ seq, type: 'tool/result', time: 1, data: { callId: 'c', content: [{ type: 'text', text }] } })
      // Over 1,048,576 UTF-16 units each: 'é' is one unit (two bytes), '😀' two (four bytes).
      const first = [big(0, 'é'.repeat(1_100_000)), big(1, 'small "quoted" \\ line')]
      const later = [big(2, 'x'), big(3, '😀'.repeat(600_000))]
      await p.append(m.id, first)
      await p.append(m.id, later)
      await p.closeAll()
      const line = (e: SessionEvent) => (version === 1 ? specSeal(JSON.stringify(e)) : JSON.stringify(e))
      const header = JSON.stringify({ type: 'session', version, id: m.id, createdAt: 5, delegationDepth: 0 })
      expect(await readFile(p.locate(m).path, 'utf8')).toBe([version === 1 ? specSeal(header) : header, ...[...first, ...later].map(line)].join('\n') + '\n')
      expect((await p.read(m.id)).events).toEqual([...first, ...later])
      // The direct path and the joined one (what PostgreSQL stores) write the same bytes.
      const { lines } = serializeEvents(m.id, later, version)
      expect(prepareBatch(m.id, later, version).bytes.toString('utf8')).toBe(`${typeof lines === 'string' ? lines : lines.toString('utf8')}\n`)
    }
  })

  test('an event nested deeper than JSON.stringify can go is E_NOT_JSON, nothing written', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('deep'))
    await p.append('deep', turn(0, 1))
    let nested: unknown = 'leaf'
    for (let i = 0; i < 200_000; i++) nested = [nested]
    const err = await p.append('deep', [{ seq: 4, type: 'x', time: 1, data: nested as never }]).then(() => undefined, (e: unknown) => e as Error & { code?: string })
    expect(err?.code).toBe('E_NOT_JSON')
    expect(err?.message).toMatch(/nested too deeply/)
    await p.append('deep', [{ seq: 4, type: 'x', time: 1 }])
    await p.closeAll()
    expect((await p.read('deep')).events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4])
  })

  describe('permissions, whatever the umask', () => {
    let old: number
    beforeEach(() => {
      old = process.umask(0)
    })
    afterEach(() => {
      process.umask(old)
    })
    test('directories 0700, logs 0600', async () => {
      const root = join(await tmpRoot(), 'fresh', 'root')
      const p = createJsonlPersistence({ root })
      await p.create(meta('perm', { cwd: '/x' }))
      await p.append('perm', turn(0, 1))
      await p.closeAll()
      const mode = async (path: string) => (await stat(path)).mode & 0o777
      expect(await mode(root)).toBe(0o700)
      expect(await mode(join(root, '..'))).toBe(0o700)
      expect(await mode(join(p.locate(meta('perm', { cwd: '/x' })).path, '..'))).toBe(0o700)
      expect(await mode(p.locate(meta('perm', { cwd: '/x' })).path)).toBe(0o600)
      expect(await mode(join(root, '.locks'))).toBe(0o700)
    })
  })
})

describe('durability protocol (docs/contract.md §5)', () => {
  test('constructing, locate and create do no file-system writes', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs })
    p.locate(meta('a'))
    expect(fs.calls).toEqual([])
    await p.create(meta('a'))
    expect(fs.calls.filter((c) => MUTATING_OPS.has(c.op))).toEqual([])
    await p.closeAll()
    expect(await readdir(root)).toEqual([])
  })

  test('materialization: bucket created then root synced; tmp written, synced, linked, unlinked; bucket synced', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('m', { cwd: '/p' }))
    const path = p.locate(meta('m', { cwd: '/p' })).path
    const bucket = join(path, '..')
    fs.calls.length = 0
    await p.append('m', turn(0, 1))
    // Whether the log is chmod'ed depends on the umask (test/file-modes.test.ts).
    const ops = fs.calls
      .filter((c) => (MUTATING_OPS.has(c.op) && c.op !== 'fchmod') || c.op === 'open')
      .filter((c) => c.path.startsWith(root) && !c.path.includes('.locks'))
    const tmp = ops.find((c) => c.op === 'open' && c.detail === 'wx')!.path
    expect(tmp.startsWith(join(bucket, '.tmp-'))).toBe(true)
    expect(ops.map((c) => `${c.op} ${c.path.replace(tmp, 'TMP').replace(root, 'ROOT')}`)).toEqual([
      'mkdir ROOT/cwd-' + bucket.slice(-12),
      'chmod ROOT/cwd-' + bucket.slice(-12),
      'syncDir ROOT',
      // The root existed already (made by someone else): its own entry is made durable once.
      'mkdir ROOT',
      'open TMP',
      'write TMP',
      'datasync TMP',
      `link ROOT/cwd-${bucket.slice(-12)}/m.jsonl`,
      'unlink TMP',
      `syncDir ROOT/cwd-${bucket.slice(-12)}`,
    ])
    expect(fs.calls.filter((c) => c.op === 'syncDir').map((c) => c.path)).toContain(dirname(root))
    expect((await readdir(bucket)).filter((n) => n.startsWith('.'))).toEqual([])
    // later appends: one write at EOF and one sync, on the kept handle (the lock's lease is fresh)
    fs.calls.length = 0
    await p.append('m', turn(4, 2))
    expect(fs.calls.map((c) => c.op)).toEqual(['write', 'datasync'])
    await p.closeAll()
  })

  test.each([
    ['data', 'datasync'],
    ['full', 'sync'],
  ] as const)("sync '%s' uses %s for files and syncs directories", async (sync, op) => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs, sync })
    await p.create(meta('s'))
    await p.append('s', turn(0, 1))
    await p.append('s', turn(4, 2))
    const syncs = fs.calls.filter((c) => c.op === 'sync' || c.op === 'datasync').map((c) => c.op)
    expect(syncs).toEqual([op, op])
    expect(fs.calls.some((c) => c.op === 'syncDir')).toBe(true)
    await p.closeAll()
  })

  test("sync 'none' never syncs, and the log is still complete", async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs, sync: 'none' })
    await p.create(meta('s'))
    await p.append('s', turn(0, 1))
    expect(fs.calls.filter((c) => ['sync', 'datasync', 'syncDir'].includes(c.op))).toEqual([])
    await p.closeAll()
    expect((await p.inspect('s')).events).toHaveLength(4)
  })

  test('short writes are looped until the whole batch is written', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    fs.shortWrites = true
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('short'))
    const big: SessionEvent[] = [ev(0, 'blob', { text: 'x'.repeat(10_000) }), ...turn(1, 1)]
    const second = turn(5, 2)
    await p.append('short', big)
    await p.append('short', second)
    expect(fs.calls.filter((c) => c.op === 'write').length).toBeGreaterThan(4)
    await p.closeAll()
    fs.shortWrites = false
    expect((await p.load('short')).events).toEqual([...big, ...second])
    await p.closeAll()
  })
})
