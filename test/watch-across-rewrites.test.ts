import { open, readFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence, createNodeFileSystem, type FileSystem, type SessionEvent } from '../src/index.js'
import { codeOf } from './helpers/codes.js'
import { meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §15.3 watch across the rewrites of §16 (migrate, redact, repair --truncate-at-damage), which
// rename a new log over the one a watcher has open. The watchers here run on a seam whose
// directory notifications the test fires itself (`fire`), so each wake comes when the test says.

function controlledFs(): { fs: FileSystem; fire: () => void; opens: () => number } {
  const base = createNodeFileSystem()
  const listeners = new Set<(name: string | undefined) => void>()
  let opened = 0
  const fs: FileSystem = {
    ...base,
    open: async (path, flags, mode) => {
      if (path.endsWith('.jsonl') && flags === 'r') opened++
      return base.open(path, flags, mode)
    },
    watchDir(_dir, onChange) {
      const listener = (name: string | undefined) => onChange(name) // one per directory watched
      listeners.add(listener)
      return { close: () => listeners.delete(listener) }
    },
  }
  return { fs, fire: () => [...listeners].forEach((l) => l(undefined)), opens: () => opened }
}

/** Flips one byte of `needle`'s first occurrence in the file (in place, the same inode). */
async function damage(path: string, needle: string): Promise<void> {
  const at = (await readFile(path)).indexOf(needle)
  expect(at).toBeGreaterThan(0)
  const h = await open(path, 'r+')
  await h.write(Buffer.from('#'), 0, 1, at)
  await h.close()
}

test('a redaction under a watcher that is behind: nothing unredacted is read after the rename, then the record and the appends after it', async () => {
  const root = await tmpRoot()
  const writer = createJsonlPersistence({ root, sync: 'none' })
  await writer.create(meta('r'))
  const events: SessionEvent[] = Array.from({ length: 1500 }, (_, seq) => ({ seq, type: 'x/note', time: 1000 + seq, data: { text: `token secret-${seq}`, n: seq } }))
  await writer.append('r', events)
  await writer.close('r')
  const { fs, fire } = controlledFs()
  const stop = new AbortController()
  const it = createJsonlPersistence({ root, fs, sync: 'none' }).watch('r', { signal: stop.signal })[Symbol.asyncIterator]()
  // A first poll reads at most 1,000 events: the consumer takes them, the rest is still unread.
  for (let seq = 0; seq < 1000; seq++) expect((await it.next()).value).toEqual(events[seq])
  const report = await createJsonlPersistence({ root }).redact('r', { pattern: /secret-\d+/ })
  expect(report).toMatchObject({ rewritten: true, matches: 1500 })
  fire() // the rename's notification
  const after: SessionEvent[] = []
  for (let seq = 1000; seq <= 1500; seq++) after.push((await it.next()).value as SessionEvent)
  expect(after.slice(0, 500)).toEqual(events.slice(1000).map((e) => ({ ...e, data: { text: 'token [REDACTED]', n: e.seq } })))
  expect(after[500]).toMatchObject({ seq: 1500, type: 'log/redacted', ignorable: true })
  expect(JSON.stringify(after)).not.toContain('secret-')
  // appends after the rewrite are seen, once
  await writer.load('r')
  await writer.append('r', [{ seq: 1501, type: 'x/note', time: 9000, data: { text: 'later', n: 1501 } }])
  await writer.close('r')
  fire()
  expect((await it.next()).value).toEqual({ seq: 1501, type: 'x/note', time: 9000, data: { text: 'later', n: 1501 } })
  stop.abort()
  expect((await it.next()).done).toBe(true)
})

test('a truncation that cut events a watcher yielded rejects it (E_CORRUPT); a watcher that meets the damage first rejects as load does, and one started after the cut goes on with the closers, the record and the appends', async () => {
  const root = await tmpRoot()
  const writer = createJsonlPersistence({ root, sync: 'none' })
  await writer.create(meta('d'))
  const events = [...turn(0, 1), ...turn(4, 2), ...turn(8, 3)]
  await writer.append('d', events)
  await writer.close('d')
  const path = writer.locate(meta('d')).path
  const { fs, fire } = controlledFs()
  const watcher = createJsonlPersistence({ root, fs, sync: 'none' })
  const stop = new AbortController()
  const ahead = watcher.watch('d', { signal: stop.signal })[Symbol.asyncIterator]()
  for (const e of events) expect((await ahead.next()).value).toEqual(e)
  // Seq 9's line is damaged after `ahead` yielded it: a watcher from here on yields what lies
  // before it, then rejects with the E_CORRUPT a load gives (damage is never waited at: no
  // repair writes over it; PostgreSQL's watch rejects the same way).
  await damage(path, 'question 3')
  const loadError = await createJsonlPersistence({ root }).load('d').catch((e: unknown) => e as { code?: string; line?: number; byteOffset?: number })
  expect(loadError).toMatchObject({ code: 'E_CORRUPT', line: 11 })
  const short = watcher.watch('d', { signal: stop.signal })[Symbol.asyncIterator]()
  for (const e of events.slice(0, 9)) expect((await short.next()).value).toEqual(e)
  const shortError = await short.next().then(
    () => undefined,
    (e: unknown) => e as { code?: string; line?: number; byteOffset?: number },
  )
  expect(shortError).toMatchObject({ code: 'E_CORRUPT', line: 11, byteOffset: (loadError as { byteOffset?: number }).byteOffset })
  const report = await createJsonlPersistence({ root }).truncateAtDamage('d')
  expect(report).toMatchObject({ cut: { line: 11 }, keptEvents: 9 })
  // the session goes on after the truncation (seq 9: a closer, 10: the record)
  await writer.load('d')
  const more = turn(11, 4)
  await writer.append('d', more)
  await writer.close('d')
  fire()
  const after = watcher.watch('d', { fromSeq: 9, signal: stop.signal })[Symbol.asyncIterator]()
  expect((await after.next()).value).toMatchObject({ seq: 9, type: 'turn/end' })
  expect((await after.next()).value).toMatchObject({ seq: 10, type: 'log/truncated', data: { line: 11 } })
  for (const e of more) expect((await after.next()).value).toEqual(e)
  // `ahead` yielded seqs 9, 10 and 11 of the history that was cut: never seq 12 of another one
  const err = await ahead.next().then(
    () => undefined,
    (e: unknown) => e as { code?: string; line?: number },
  )
  expect(err).toMatchObject({ code: 'E_CORRUPT', line: 13 })
  stop.abort()
  expect((await after.next()).done).toBe(true)
})

test('a migration under a watcher: nothing twice, appends after it seen; a truncation after it that cuts what the watcher yielded is still caught', async () => {
  const root = await tmpRoot()
  const writer = createJsonlPersistence({ root, sync: 'none', formatVersion: 0 })
  await writer.create(meta('m'))
  const events = [...turn(0, 1), ...turn(4, 2)]
  await writer.append('m', events)
  await writer.close('m')
  const path = writer.locate(meta('m')).path
  const { fs, fire, opens } = controlledFs()
  const stop = new AbortController()
  const it = createJsonlPersistence({ root, fs, sync: 'none' }).watch('m', { signal: stop.signal })[Symbol.asyncIterator]()
  for (const e of events) expect((await it.next()).value).toEqual(e)
  const other = createJsonlPersistence({ root })
  expect(await other.migrate('m')).toMatchObject({ migrated: true, events: 8 })
  fire()
  const opened = opens()
  const pending = it.next()
  // the watcher has looked at the migrated log (and waits there) before it is rewritten again
  for (let i = 0; i < 500 && opens() === opened; i++) await new Promise((r) => setTimeout(r, 5))
  expect(opens()).toBeGreaterThan(opened)
  expect(JSON.parse((await readFile(path, 'utf8')).split('\n')[0]!).version).toBe(1)
  await damage(path, 'question 2')
  expect(await other.truncateAtDamage('m')).toMatchObject({ keptEvents: 5 })
  await other.load('m')
  await other.append('m', turn(7, 3))
  await other.close('m')
  fire()
  expect(await codeOf(pending)).toBe('E_CORRUPT')
  // a watcher started now follows the log as it is
  const seen: SessionEvent[] = []
  for await (const e of createJsonlPersistence({ root }).watch('m', { fromSeq: 5 })) {
    seen.push(e)
    if (e.seq === 10) break
  }
  expect(seen.map((e) => e.type)).toEqual(['turn/end', 'log/truncated', ...turn(7, 3).map((e) => e.type)])
  stop.abort()
})
