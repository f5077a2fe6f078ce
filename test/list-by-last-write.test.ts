import { mkdir, utimes, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { bucketName, createJsonlPersistence, createNodeFileSystem, encodeSessionId, type FileSystem, type ListProblem } from '../src/index.js'
import { headerLine } from '../src/session/meta.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { tapPaths } from './helpers/tap-paths.js'

/**
 * A seam that counts the files opened (each header read opens its log once) and stat'ed, one by
 * one or through `peekFiles` (a stat of each path when it reads no bytes, an open when it does).
 */
function countingFs(): { fs: FileSystem; opened: string[]; stats: number } {
  const base = createNodeFileSystem()
  const counts = { fs: undefined as unknown as FileSystem, opened: [] as string[], stats: 0 }
  counts.fs = {
    ...base,
    supportsDsync: base.supportsDsync,
    open: (path, flags, mode) => {
      counts.opened.push(path)
      return base.open(path, flags, mode)
    },
    stat: (path) => {
      counts.stats++
      return base.stat(path)
    },
    peekFiles: (paths, headBytes) =>
      base.peekFiles!(
        tapPaths(paths, (chunk) => {
          if (headBytes === 0) counts.stats += chunk.length
          else counts.opened.push(...chunk)
        }),
        headBytes,
      ),
  }
  return counts
}

test('list by last write with a limit over 10,000 logs reads at most limit headers (plus those it reports), newest first', async () => {
  const root = await tmpRoot()
  const bucket = join(root, bucketName(undefined))
  await mkdir(bucket, { recursive: true })
  const N = 10_000
  const base = Date.UTC(2026, 0, 1) / 1000
  const write = async (i: number) => {
    const id = `s${i}`
    const path = join(bucket, `${encodeSessionId(id)}.jsonl`)
    // createdAt runs the other way from the last write, so the two orders differ
    await writeFile(path, `${headerLine(meta(id, { createdAt: 1_000_000 + (N - i) }))}{"seq":0,"type":"x","time":1}\n`)
    await utimes(path, base + i, base + i)
  }
  for (let i = 0; i < N; i += 500) await Promise.all(Array.from({ length: 500 }, (_, k) => write(i + k)))
  // the two newest logs are damaged: reported, and the next ones read in their place
  await writeFile(join(bucket, `${encodeSessionId(`s${N - 1}`)}.jsonl`), 'not a header\n')
  await writeFile(join(bucket, `${encodeSessionId(`s${N - 2}`)}.jsonl`), '')
  await utimes(join(bucket, `${encodeSessionId(`s${N - 1}`)}.jsonl`), base + N + 10, base + N + 10)
  await utimes(join(bucket, `${encodeSessionId(`s${N - 2}`)}.jsonl`), base + N + 9, base + N + 9)

  const counting = countingFs()
  const problems: ListProblem[] = []
  const p = createJsonlPersistence({ root, fs: counting.fs })
  const listed = await p.list({ orderBy: 'lastWrite', limit: 50, onProblem: (x) => problems.push(x) })
  expect(listed.map((l) => l.meta.id)).toEqual(Array.from({ length: 50 }, (_, k) => `s${N - 3 - k}`))
  expect(listed.map((l) => l.mtimeMs)).toEqual([...listed.map((l) => l.mtimeMs)].sort((a, b) => b - a))
  expect(problems.map((x) => x.code)).toEqual(['E_CORRUPT', 'E_CORRUPT'])
  const logsOpened = counting.opened.filter((path) => path.endsWith('.jsonl'))
  expect(logsOpened.length).toBeLessThanOrEqual(52)
  expect(counting.stats).toBeGreaterThanOrEqual(N) // one stat per log is the price of the order

  // without a limit, every header is read; without options, the order of §4.6 is unchanged
  counting.opened.length = 0
  const all = await p.list({ onProblem: () => {} })
  expect(all).toHaveLength(N - 2)
  expect(all[0]!.meta.id).toBe('s0') // newest createdAt
  expect(counting.opened.filter((path) => path.endsWith('.jsonl')).length).toBe(N)
}, 120_000)

test('a picker among logs written at the same instants lists the first `limit` of the whole last-write order: ties by id, then newest', async () => {
  const root = await tmpRoot()
  const bucket = join(root, bucketName(undefined))
  await mkdir(bucket, { recursive: true })
  const base = Date.UTC(2026, 0, 1) / 1000
  // 60 logs over 4 instants (15 each), ids not in write order
  const ids = Array.from({ length: 60 }, (_, i) => `t${(i * 37) % 60}`)
  await Promise.all(
    ids.map(async (id, i) => {
      const path = join(bucket, `${encodeSessionId(id)}.jsonl`)
      await writeFile(path, `${headerLine(meta(id))}`)
      await utimes(path, base + (i % 4), base + (i % 4))
    }),
  )
  // one id in two buckets, both written at the newest instant: ordered by path between them
  for (const cwd of ['/b', '/a']) {
    const other = join(root, bucketName(cwd))
    await mkdir(other, { recursive: true })
    await writeFile(join(other, 't0.jsonl'), headerLine(meta('t0', { cwd })))
    await utimes(join(other, 't0.jsonl'), base + 3, base + 3)
  }
  // The header of the duplicate whose path sorts first is read last: the order between the two
  // must come from their paths, not from which read finished first.
  const dups = [bucketName('/a'), bucketName('/b')].map((b) => join(root, b, 't0.jsonl')).sort()
  const base0 = createNodeFileSystem()
  const fs: FileSystem = {
    ...base0,
    supportsDsync: base0.supportsDsync,
    open: async (path, flags, mode) => {
      if (path === dups[0]) await new Promise((r) => setTimeout(r, 50))
      return base0.open(path, flags, mode)
    },
  }
  const p = createJsonlPersistence({ root, fs })
  const whole = await p.list({ orderBy: 'lastWrite' })
  expect(whole).toHaveLength(62)
  expect(whole.filter((l) => l.meta.id === 't0').slice(0, 2).map((l) => (l.location as { path: string }).path)).toEqual(dups)
  const at = (l: (typeof whole)[number]) => (l.location as { path: string }).path
  for (let k = 1; k < whole.length; k++) {
    const [a, b] = [whole[k - 1]!, whole[k]!]
    expect(a.mtimeMs > b.mtimeMs || (a.mtimeMs === b.mtimeMs && (a.meta.id < b.meta.id || (a.meta.id === b.meta.id && at(a) < at(b))))).toBe(true)
  }
  expect(whole.filter((l) => l.meta.id === 't0').map((l) => l.meta.cwd)).toHaveLength(3)
  for (const limit of [1, 2, 3, 7, 15, 16, 61]) {
    const picked = await p.list({ orderBy: 'lastWrite', limit })
    expect(picked.map(at)).toEqual(whole.slice(0, limit).map(at))
  }
})
