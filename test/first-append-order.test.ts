import { readdir } from 'node:fs/promises'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { createFaultInjectingFileSystem } from '../src/testing/index.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A first append starts the log's temporary file before its writer lock record; the log is
// still published only once the lock is held and the other buckets were looked at again.

describe('first append: the log starts first, is published last', () => {
  test('tmp log opened before the lock record; lock linked, then the buckets re-checked, then the log linked', async () => {
    const root = await tmpRoot()
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs })
    await p.create(meta('warm'))
    await p.append('warm', turn(0, 1)) // directories exist from here on
    await p.create(meta('o'))
    fs.calls.length = 0
    await p.append('o', turn(0, 1))
    const at = (pred: (c: (typeof fs.calls)[number]) => boolean) => fs.calls.findIndex(pred)
    const bucket = join(root, '_no-cwd')
    const logOpen = at((c) => c.op === 'open' && c.path.startsWith(join(bucket, '.tmp-')))
    const lockOpen = at((c) => c.op === 'open' && c.path.startsWith(join(root, '.locks', '.tmp-')))
    const lockLink = at((c) => c.op === 'link' && c.path === join(root, '.locks', 'o.lock'))
    const recheck = fs.calls.findIndex((c, i) => i > lockLink && c.op === 'readdir' && c.path === root)
    const logLink = at((c) => c.op === 'link' && c.path === join(bucket, 'o.jsonl'))
    expect(logOpen).toBeGreaterThanOrEqual(0)
    expect(logOpen).toBeLessThan(lockOpen)
    expect(lockLink).toBeGreaterThan(lockOpen)
    expect(recheck).toBeGreaterThan(lockLink)
    expect(logLink).toBeGreaterThan(recheck)
    await p.closeAll()
  })

  test('the lock held by another instance: E_LOCKED, and its temporary log is gone', async () => {
    const root = await tmpRoot()
    const fsA = createFaultInjectingFileSystem()
    const a = createJsonlPersistence({ root, fs: fsA })
    const b = createJsonlPersistence({ root })
    await a.create(meta('c'))
    await b.create(meta('c')) // no log yet: both may create
    // A holds the lock and stops right before publishing its log.
    let reached!: () => void
    const atLink = new Promise<void>((r) => (reached = r))
    let go!: () => void
    const resume = new Promise<void>((r) => (go = r))
    fsA.inject({ op: 'link', path: /c\.jsonl$/, times: 1, before: () => (reached(), resume) })
    const batch = turn(0, 1)
    const first = a.append('c', batch)
    await atLink
    expect(await codeOf(b.append('c', turn(0, 2)))).toBe('E_LOCKED')
    const bucket = join(root, '_no-cwd')
    // Only A's temporary file remains (B removed its own); no log is published yet.
    expect((await readdir(bucket)).filter((n) => n.startsWith('.tmp-'))).toHaveLength(1)
    expect(await readdir(bucket)).not.toContain('c.jsonl')
    go()
    await first
    expect((await readdir(bucket)).sort()).toEqual(['c.jsonl'])
    expect((await a.inspect('c')).events).toEqual(batch)
    await a.closeAll()
    await b.closeAll()
  })
})
