// Durable appends: this package against the physical limit (raw write + fdatasync of the same bytes).
import {
  close,
  closeSync,
  fdatasync,
  fdatasyncSync,
  fstat,
  fsync,
  link as linkCallback,
  open as openCallback,
  openSync,
  readdir as readdirCallback,
  stat,
  statSync,
  unlink as unlinkCallback,
  write,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { mkdir, open } from 'node:fs/promises'
import { join } from 'node:path'
import { createJsonlPersistence } from '../../dist/index.js'
import { cleanup, events, now, scratch, serialize } from '../lib.mjs'

const meta = (id) => ({ id, createdAt: 1_764_489_600_000, delegationDepth: 0 })

function rawSync(path, buffers) {
  const fd = openSync(path, 'a')
  const t = now()
  for (const b of buffers) {
    writeSync(fd, b)
    fdatasyncSync(fd)
  }
  const ms = now() - t
  closeSync(fd)
  return ms
}

const callback = (start) => new Promise((resolve, reject) => start((err, value) => (err ? reject(err) : resolve(value))))

/**
 * The least any implementation of SPEC 5.2 + 5.3 can do per batch, written with no package code:
 * serialize the caller's events (they may be mutated after the call) while the writer lock is
 * stat'ed (a holder that lost its lock must find out before writing), then write + fdatasync,
 * all through Node's cheapest non-blocking calls (the callback API).
 */
async function protocolFloor(state, batch) {
  const checked = callback((done) => stat(state.lock, done))
  const bytes = serialize(batch)
  if ((await checked).ino !== state.lockIno) throw new Error('lock lost')
  await callback((done) => write(state.fd, bytes, 0, bytes.length, state.pos, done))
  await callback((done) => fdatasync(state.fd, done))
  state.pos += bytes.length
}

/**
 * One run: every contender appends the same batches, interleaved batch by batch (package, raw
 * non-blocking, raw synchronous, stringify+write, protocol floor, in an order rotated at every
 * batch) so that all of them see the same disk conditions; returns the mean ms per batch of each.
 */
export async function appendRun(size, count) {
  const dir = scratch(`append-${size}`)
  try {
    const batches = Array.from({ length: count + 1 }, (_, b) => events(b * size, size))
    const buffers = batches.map(serialize)
    const p = createJsonlPersistence({ root: dir })
    await p.create(meta('bench'))
    await p.append('bench', batches[0]) // materialization is measured separately
    const h = await open(join(dir, 'raw-async'), 'a')
    const hs = await open(join(dir, 'stringify'), 'a')
    const fd = openSync(join(dir, 'raw-sync'), 'a')
    let posA = 0
    let posS = 0
    const lock = join(dir, 'floor.lock')
    writeFileSync(lock, '{}\n')
    const floor = { fd: openSync(join(dir, 'floor'), 'a'), pos: 0, lock, lockIno: statSync(lock).ino }
    const total = { pkg: 0, asyncRaw: 0, syncRaw: 0, stringify: 0, floor: 0 }
    const contenders = [
      ['pkg', (i) => p.append('bench', batches[i])],
      ['asyncRaw', async (i) => {
        const b = buffers[i]
        await h.write(b, 0, b.length, posA)
        await h.datasync()
        posA += b.length
      }],
      ['syncRaw', (i) => {
        writeSync(fd, buffers[i])
        fdatasyncSync(fd)
      }],
      ['stringify', async (i) => {
        const sb = serialize(batches[i])
        await hs.write(sb, 0, sb.length, posS)
        await hs.datasync()
        posS += sb.length
      }],
      ['floor', (i) => protocolFloor(floor, batches[i])],
    ]
    for (let i = 1; i <= count; i++) {
      // Each batch starts with a different contender, so none always follows the same one
      // (what ran just before, a blocking sync or an idle pool, shifts the next one's time).
      for (let k = 0; k < contenders.length; k++) {
        const [name, run] = contenders[(i + k) % contenders.length]
        const t = now()
        await run(i)
        total[name] += now() - t
      }
    }
    closeSync(floor.fd)
    await p.closeAll()
    await h.close()
    await hs.close()
    closeSync(fd)
    return Object.fromEntries(Object.entries(total).map(([k, v]) => [k, v / count]))
  } finally {
    cleanup(dir)
  }
}

/**
 * Sixteen sessions appending batches of 10 at once, against one synchronous raw writer and
 * against sixteen raw non-blocking writers (FileHandle write + datasync) doing the same.
 */
export async function concurrentRun(sessions, count) {
  const dir = scratch('concurrent')
  try {
    const size = 10
    const p = createJsonlPersistence({ root: dir })
    const ids = Array.from({ length: sessions }, (_, i) => `s${i}`)
    const all = ids.map(() => Array.from({ length: count + 1 }, (_, b) => events(b * size, size)))
    for (const [i, id] of ids.entries()) {
      await p.create(meta(id))
      await p.append(id, all[i][0])
    }
    let t = now()
    await Promise.all(ids.map(async (id, i) => {
      for (let b = 1; b <= count; b++) await p.append(id, all[i][b])
    }))
    const pkgEventsPerSec = (sessions * count * size) / ((now() - t) / 1000)
    await p.closeAll()
    const buffers = all[0].slice(1).map(serialize)
    const syncMs = rawSync(join(dir, 'raw-sync'), buffers)
    const syncEventsPerSec = (count * size) / (syncMs / 1000)
    const handles = await Promise.all(ids.map((id) => open(join(dir, `raw-async-${id}`), 'a')))
    t = now()
    await Promise.all(handles.map(async (h) => {
      let pos = 0
      for (const b of buffers) {
        await h.write(b, 0, b.length, pos)
        await h.datasync()
        pos += b.length
      }
    }))
    const asyncEventsPerSec = (sessions * count * size) / ((now() - t) / 1000)
    await Promise.all(handles.map((h) => h.close()))
    return { pkgEventsPerSec, syncEventsPerSec, asyncEventsPerSec }
  } finally {
    cleanup(dir)
  }
}

/**
 * The least any implementation of SPEC 4.2, 5.1 and 5.3 can do to create a session and append
 * its first batch, written with no package code, through Node's cheapest non-blocking calls (the
 * callback API), with every independent step overlapped: look for the id in every bucket
 * (create; its own bucket while the root is listed); take the writer lock (a temporary file
 * linked into place, its inode noted) and re-check the buckets under it, while the log's
 * temporary file is written and synced; then link, unlink the temporary name, fsync the bucket.
 * Resolves with the log's open descriptor.
 */
async function newSessionFloor(root, name, batch) {
  const bucket = join(root, '_no-cwd')
  const bytes = Buffer.concat([Buffer.from(`${JSON.stringify({ type: 'session', version: 0, ...meta(name) })}\n`), serialize(batch)])
  const lockBytes = Buffer.from(`${JSON.stringify({ pid: process.pid, host: 'bench', since: Date.now() })}\n`)
  const assertAbsent = async () => {
    // The own bucket is known without listing the root: it is looked at during the listing.
    const absent = (path) => callback((done) => stat(path, (err) => done(err ? null : new Error('exists'))))
    const [entries] = await Promise.all([
      callback((done) => readdirCallback(root, { withFileTypes: true }, done)),
      absent(join(bucket, `${name}.jsonl`)),
    ])
    const others = entries.filter((e) => e.isDirectory() && !e.name.startsWith('.') && join(root, e.name) !== bucket)
    await Promise.all(others.map((e) => absent(join(root, e.name, `${name}.jsonl`))))
  }
  await assertAbsent()
  const lock = (async () => {
    const tmp = join(root, '.locks', `.tmp-${name}`)
    const path = join(root, '.locks', `${name}.lock`)
    const fd = await callback((done) => openCallback(tmp, 'wx', 0o600, done))
    await Promise.all([
      callback((done) => write(fd, lockBytes, 0, lockBytes.length, 0, done)),
      callback((done) => fstat(fd, done)), // the inode the holder keeps
    ])
    await Promise.all([callback((done) => close(fd, done)), callback((done) => linkCallback(tmp, path, done))])
    await callback((done) => unlinkCallback(tmp, done))
    await assertAbsent()
  })()
  const tmp = join(bucket, `.tmp-${name}`)
  const log = (async () => {
    const fd = await callback((done) => openCallback(tmp, 'wx', 0o600, done))
    await callback((done) => write(fd, bytes, 0, bytes.length, 0, done))
    await callback((done) => fdatasync(fd, done))
    return fd
  })()
  const [, fd] = await Promise.all([lock, log])
  await callback((done) => linkCallback(tmp, join(bucket, `${name}.jsonl`), done))
  await callback((done) => unlinkCallback(tmp, done))
  const d = await callback((done) => openCallback(bucket, 'r', done))
  await callback((done) => fsync(d, done))
  await callback((done) => close(d, done))
  return fd // kept open, as the package keeps its log open for the next append
}

/**
 * Creating a session: create + first append (materialization) against create + write +
 * fdatasync + directory fsync of one file, and against the protocol floor, interleaved session
 * by session (in a rotating order) so that all three see the same disk conditions.
 */
export async function materializeRun(count) {
  const dir = scratch('materialize')
  try {
    const batch = events(0, 10)
    const bytes = serialize(batch)
    const p = createJsonlPersistence({ root: join(dir, 'package') })
    await p.create(meta('warm'))
    await p.append('warm', batch) // the bucket and lock directories exist from here on
    const rawDir = join(dir, 'raw')
    const floorRoot = join(dir, 'floor')
    await mkdir(rawDir, { mode: 0o700 })
    await mkdir(join(floorRoot, '_no-cwd'), { recursive: true, mode: 0o700 })
    await mkdir(join(floorRoot, '.locks'), { mode: 0o700 })
    const opened = []
    const total = { create: 0, firstAppend: 0, raw: 0, floor: 0 }
    const contenders = [
      async (i) => {
        let t = now()
        await p.create(meta(`m${i}`))
        total.create += now() - t
        t = now()
        await p.append(`m${i}`, batch)
        total.firstAppend += now() - t
      },
      async (i) => {
        const t = now()
        const h = await open(join(rawDir, `raw-${i}`), 'wx', 0o600)
        await h.write(bytes, 0, bytes.length, 0)
        await h.datasync()
        await h.close()
        const d = await open(rawDir, 'r')
        await d.sync()
        await d.close()
        total.raw += now() - t
      },
      async (i) => {
        const t = now()
        opened.push(await newSessionFloor(floorRoot, `f${i}`, batch))
        total.floor += now() - t
      },
    ]
    for (let i = 0; i < count; i++) {
      // The order rotates with every session, as in appendRun.
      for (let k = 0; k < contenders.length; k++) await contenders[(i + k) % contenders.length](i)
    }
    await p.closeAll()
    for (const fd of opened) closeSync(fd)
    return {
      pkg: (total.create + total.firstAppend) / count,
      firstAppend: total.firstAppend / count,
      raw: total.raw / count,
      floor: total.floor / count,
    }
  } finally {
    cleanup(dir)
  }
}
