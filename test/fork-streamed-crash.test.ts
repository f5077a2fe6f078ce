// §5.1, §4.7: a fork whose seed is copied in pieces (over 1 MiB) keeps the crash protocol of
// every new log: written to a temporary file, synced, linked to its name, the bucket synced. A
// crash at any change to the disk during the fork leaves the parent as it was and the child
// either absent or holding the whole seed; once the fork has resolved, the child is there.
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { isSessionPersistenceError } from '../src/errors.js'
import type { SessionEvent } from '../src/session/schema.js'
import { type CrashImage, createCrashFileSystem } from '../src/testing/crash-fs.js'
import { checkImage, type Expectation } from '../src/torture/crash-enumeration.js'
import { crc32 } from 'node:zlib'

const ROOT = '/sessions'

/**
 * What a reader can see of an image: every name but temporary ones, with its file's bytes. The
 * temporary file's contents before its sync take hundreds of forms that nothing ever reads (a
 * listing and a load skip `.tmp-` names): images that differ only there are checked once.
 */
function visibleKey(image: CrashImage): string {
  const parts: string[] = []
  for (const [dir, entries] of [...image.dirs].sort(([a], [b]) => a.localeCompare(b))) {
    for (const [name, ino] of [...entries].sort(([a], [b]) => a.localeCompare(b))) {
      if (name.startsWith('.tmp-')) continue
      const bytes = image.files.get(ino)
      parts.push(`${dir}/${name}:${bytes ? `${bytes.length}:${crc32(bytes)}` : 'dir'}`)
    }
  }
  return parts.join('|')
}
const FILL = 'q'.repeat(300_000)

function turnEvents(t: number): SessionEvent[] {
  const seq = 3 * t
  return [
    { seq, type: 'turn/start', time: 1 + seq, data: { turn: t } },
    { seq: seq + 1, type: 'user/message', time: 2 + seq, data: { content: `${t} ${FILL}` } },
    { seq: seq + 2, type: 'turn/end', time: 3 + seq, data: { turn: t, reason: { kind: 'completed' } } },
  ]
}

describe('crash states of a fork whose seed is copied in pieces', () => {
  test('every crash point of the fork: the parent intact, the child absent or whole; durable once it resolves', async () => {
    const fs = createCrashFileSystem()
    const p = createJsonlPersistence({ root: ROOT, fs })
    await p.create({ id: 'a', createdAt: 1, delegationDepth: 0 })
    const parent: SessionEvent[] = []
    for (let t = 0; t < 5; t++) {
      const batch = turnEvents(t)
      await p.append('a', batch)
      parent.push(...batch)
    }
    await p.close('a')
    const seedLength = 12 // four turns: ~1.2 MiB, over the size a seed is read at once
    const seed = parent.slice(0, seedLength)

    const points: { images: CrashImage[]; expect: Expectation }[] = []
    const ops: string[] = []
    let during: Expectation = new Map([
      ['a', { acked: parent, inflight: [] }],
      ['child', { acked: [], inflight: seed }],
    ])
    fs.onMutation = (op, path) => {
      ops.push(`${op} ${path.startsWith(ROOT) ? path.slice(ROOT.length) : path}`)
      // A write to the temporary file changes only bytes no reader reads (below: nothing else
      // happens between its creation and its sync), and a crash then has hundreds of forms of
      // them: the states of these points are those of the point before, checked there.
      if (op === 'write' && path.includes('/.tmp-')) return
      points.push({ images: fs.crashStates({ maxImages: 512 }).images, expect: during })
    }
    await p.fork('a', { id: 'child', seedLength, createdAt: 2 })
    during = new Map([
      ['a', { acked: parent, inflight: [] }],
      ['child', { acked: seed, inflight: [] }],
    ])
    points.push({ images: fs.crashStates({ maxImages: 512 }).images, expect: during })
    fs.onMutation = undefined
    await p.close('child')

    // The seed went to the temporary file in more than one write, all before its sync and link.
    // The child's log: a temporary file, the seed written to it in more than one piece, synced,
    // then linked to its name, the temporary name removed and the bucket synced.
    const log = ops.filter((o) => /\/_no-cwd(\/|$)/.test(o)).map((o) => o.replace(/\.tmp-[0-9a-f]+/, '.tmp'))
    const writes = log.filter((o) => o === 'write /_no-cwd/.tmp').length
    expect(writes).toBeGreaterThan(1)
    expect(log).toEqual([
      'create /_no-cwd/.tmp',
      ...Array<string>(writes).fill('write /_no-cwd/.tmp'),
      'fdatasync /_no-cwd/.tmp',
      'link /_no-cwd/child.jsonl',
      'unlink /_no-cwd/.tmp',
      'syncDir /_no-cwd',
    ])

    const failures: string[] = []
    const children = { absent: 0, whole: 0 }
    /** What a load after the crash finds of the child: none, the whole seed, or something else. */
    const childAfter = async (image: CrashImage): Promise<string> => {
      const r = createJsonlPersistence({ root: ROOT, fs: createCrashFileSystem(image) })
      try {
        const events = (await r.inspect('child')).events
        return JSON.stringify(events) === JSON.stringify(seed) ? 'whole' : `${events.length} events, not the seed's ${seed.length}`
      } catch (err) {
        return isSessionPersistenceError(err, 'E_NOT_FOUND') ? 'absent' : `unreadable (${String(err)})`
      } finally {
        await r.closeAll()
      }
    }
    let states = 0
    const seen = new Set<string>()
    for (const [k, point] of points.entries()) {
      for (const image of point.images) {
        const key = `${k === points.length - 1 ? 'after' : 'during'} ${visibleKey(image)}`
        if (seen.has(key)) continue
        seen.add(key)
        states++
        const problem = await checkImage(image, point.expect, { root: ROOT })
        if (problem && failures.length < 10) failures.push(`crash point ${k}: ${problem}`)
        // checkImage allows any prefix of what was in flight; a fork's child is all or nothing.
        const child = await childAfter(image)
        if (child !== 'absent' && child !== 'whole' && failures.length < 10) failures.push(`crash point ${k}: the child is ${child}`)
        children[child === 'whole' ? 'whole' : 'absent']++
      }
    }
    expect(failures).toEqual([])
    expect(states).toBeGreaterThan(points.length)
    // Among them: the child absent, and the child whole.
    expect(children.absent).toBeGreaterThan(0)
    expect(children.whole).toBeGreaterThan(0)
  }, 60_000)
})
