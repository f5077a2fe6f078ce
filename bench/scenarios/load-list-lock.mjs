// Loading a large log, listing many sessions, and what the writer lock costs.
import { spawnSync } from 'node:child_process'
import { appendFileSync, closeSync, fsyncSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createJsonlPersistence } from '../../dist/index.js'
import { SessionLocks } from '../../dist/jsonl/lock/session-lock.js'
import { createFaultInjectingFileSystem } from '../../dist/testing/index.js'
import { cleanup, events, median, now, scratch, serialize } from '../lib.mjs'

const header = (id) => `{"type":"session","version":0,"id":"${id}","createdAt":1764489600000,"delegationDepth":0}\n`

/** Writes a balanced log of `count` ~400-byte events under `<root>/_no-cwd/<id>.jsonl`. */
export function writeLog(root, id, count, durable = true) {
  mkdirSync(join(root, '_no-cwd'), { recursive: true })
  const evs = events(0, count)
  evs[count - 1] = { seq: count - 1, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } }
  const path = join(root, '_no-cwd', `${id}.jsonl`)
  writeFileSync(path, Buffer.concat([Buffer.from(header(id)), serialize(evs)]))
  if (durable) {
    const fd = openSync(path, 'r+')
    fsyncSync(fd) // or the first timed sync would flush the fixture's dirty pages
    closeSync(fd)
  }
  return path
}

/** A log of `count` events written 100k events at a time (a single string cannot exceed 512 MiB). */
export function makeBigFixture(count) {
  const root = scratch('big')
  mkdirSync(join(root, '_no-cwd'), { recursive: true })
  const path = join(root, '_no-cwd', 'big.jsonl')
  writeFileSync(path, header('big'))
  for (let from = 0; from < count; from += 100_000) {
    const n = Math.min(100_000, count - from)
    const evs = events(from, n)
    if (from + n === count) evs[n - 1] = { seq: count - 1, type: 'turn/end', time: 1, data: { turn: 1, reason: { kind: 'completed' } } }
    appendFileSync(path, serialize(evs))
  }
  return { root, path, cleanup: () => cleanup(root) }
}

export function makeLoadFixture(count) {
  const root = scratch('load')
  const path = writeLog(root, 'big', count)
  return { root, path, cleanup: () => cleanup(root) }
}

/** One run: package load vs readFileSync + split + JSON.parse of the same file (ms). */
export async function loadRun({ root, path }) {
  let t = now()
  const text = readFileSync(path, 'utf8')
  const lines = text.split('\n')
  const parsed = []
  for (let i = 1; i < lines.length; i++) if (lines[i]) parsed.push(JSON.parse(lines[i]))
  const baseline = now() - t
  const p = createJsonlPersistence({ root })
  t = now()
  const loaded = await p.load('big')
  const pkg = now() - t
  await p.closeAll()
  if (loaded.events.length !== parsed.length) throw new Error('load returned a different number of events')
  return { pkg, baseline }
}

/** Peak RSS above the process's baseline, measured in a fresh process for each reader. */
export function peakRss(mode, root, path) {
  const probe = fileURLToPath(new URL('../probes/rss.mjs', import.meta.url))
  const r = spawnSync(process.execPath, ['--max-old-space-size=16384', probe, mode, root, path], { encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`rss probe failed: ${r.stderr}`)
  return JSON.parse(r.stdout)
}

/** list over `count` sessions, through a counting file system: reads per file and bytes asked. */
export async function listRun(count) {
  const root = scratch('list')
  try {
    mkdirSync(join(root, '_no-cwd'), { recursive: true })
    const line = `${JSON.stringify(events(0, 1)[0])}\n`.repeat(20)
    for (let i = 0; i < count; i++) writeFileSync(join(root, '_no-cwd', `s${i}.jsonl`), header(`s${i}`) + line)
    const fs = createFaultInjectingFileSystem()
    const p = createJsonlPersistence({ root, fs })
    const t = now()
    const listing = await p.list()
    const ms = now() - t
    const reads = fs.calls.filter((c) => c.op === 'read')
    if (listing.length !== count) throw new Error(`listed ${listing.length} of ${count}`)
    return { ms, readsPerFile: reads.length / count, maxBytesPerRead: Math.max(...reads.map((r) => r.detail)) }
  } finally {
    cleanup(root)
  }
}

/**
 * What the writer lock adds to loading a session, appending one batch and closing it: the same
 * work with the real lock and with a no-op lock (patched in for the measurement only),
 * interleaved iteration by iteration.
 */
export async function lockRun(iterations) {
  const root = scratch('lock')
  const realAcquire = SessionLocks.prototype.acquire
  const noLock = async () => ({ path: '', assertHeld: async () => {}, release: async () => {} })
  try {
    writeLog(root, 'locked', 100)
    const once = async () => {
      const t = now()
      const p = createJsonlPersistence({ root })
      const { events: evs } = await p.load('locked')
      await p.append('locked', events(evs.length, 10))
      await p.closeAll()
      return now() - t
    }
    // Interleaved A/B; a run's figures are the median iteration of each side, so that one stray
    // journal commit does not decide a difference of a few hundred microseconds.
    const withLock = []
    const without = []
    for (let i = 0; i < iterations; i++) {
      SessionLocks.prototype.acquire = realAcquire
      withLock.push(await once())
      SessionLocks.prototype.acquire = noLock
      without.push(await once())
    }
    const [a, b] = [median(withLock), median(without)]
    return { withLock: a, without: b, ratio: (a - b) / b }
  } finally {
    SessionLocks.prototype.acquire = realAcquire
    cleanup(root)
  }
}

/** `session-jsonl verify` over `count` sessions of 100 events vs loading them one after another. */
export async function verifyRun(count) {
  const root = scratch('verify')
  try {
    for (let i = 0; i < count; i++) writeLog(root, `v${i}`, 100, false) // read-only work: no sync needed
    const { verify } = await import('../../dist/cli/commands.js')
    const { openRoot } = await import('../../dist/cli/open-root.js')
    const { makeStyle } = await import('../../dist/cli/render.js')
    const io = { out: () => {}, err: () => {}, style: makeStyle(false), progress: undefined }
    let t = now()
    const opened = await openRoot(root, { warn: () => {} })
    const code = await verify(opened, io, { json: true })
    await opened.close()
    const verifyMs = now() - t
    if (code !== 0) throw new Error('verify found problems in healthy logs')
    const p = createJsonlPersistence({ root })
    t = now()
    for (let i = 0; i < count; i++) {
      await p.load(`v${i}`)
      await p.close(`v${i}`)
    }
    const loadMs = now() - t
    return { verifyMs, loadMs, ratio: loadMs / verifyMs }
  } finally {
    cleanup(root)
  }
}
