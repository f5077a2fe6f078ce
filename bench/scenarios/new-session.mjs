// Creating a session: create + first append (materialization) against the bare minimum of a new
// durable file, and against the least the contract itself allows (its floor).
import { close, closeSync, constants, fdatasync, fstat, fsync, link, open as openCallback, readdir, stat, unlink, write } from 'node:fs'
import { mkdir, open } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import { createJsonlPersistence } from '../../dist/index.js'
import { callback, cleanup, events, now, scratch, serialize } from '../lib.mjs'
import { meta, writeAt } from './append.mjs'

// What a v0.2 lock records (pid, process start time, host, boot and pid-namespace identity,
// staleLockMs, a token); read once per process, as any implementation would.
const identity = { pid: process.pid, startTime: '123456789', host: hostname(), bootId: '0'.repeat(36), pidNs: 'pid:[4026531836]' }

/**
 * The least any implementation of docs/contract.md §4.2, §5.1 and §5.3 can do to create a
 * session and append its first batch, written with no package code, through Node's cheapest
 * non-blocking calls (the callback API), with every independent step overlapped: look for the
 * id in every bucket (create; its own bucket while the root is listed); take the writer lock (a
 * temporary file linked into place, its inode noted; the lease starts then, with no I/O) and
 * re-check the buckets under it, while the log's temporary file is written and synced; then
 * link, unlink the temporary name, fsync the bucket. Files are created 0600 (no chmod: with the
 * usual umasks the mode is already exact; the package chmods, whatever the umask). With
 * `dsync`, the log's temporary file is opened with O_DSYNC and its one write is its sync.
 * Resolves with the log's open descriptor.
 */
async function newSessionFloor(root, name, batch, dsync) {
  const bucket = join(root, '_no-cwd')
  const bytes = Buffer.concat([Buffer.from(`${JSON.stringify({ type: 'session', version: 0, ...meta(name) })}\n`), serialize(batch)])
  const lockBytes = Buffer.from(`${JSON.stringify({ ...identity, since: Date.now(), staleLockMs: 10_000, token: Math.random().toString(36).slice(2) })}\n`)
  const assertAbsent = async () => {
    // The own bucket is known without listing the root: it is looked at during the listing.
    const absent = (path) => callback((done) => stat(path, (err) => done(err ? null : new Error('exists'))))
    const [entries] = await Promise.all([
      callback((done) => readdir(root, { withFileTypes: true }, done)),
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
    await Promise.all([callback((done) => close(fd, done)), callback((done) => link(tmp, path, done))])
    // The lock's temporary name can go while the buckets are checked again.
    await Promise.all([callback((done) => unlink(tmp, done)), assertAbsent()])
  })()
  const tmp = join(bucket, `.tmp-${name}`)
  const log = (async () => {
    const flags = dsync ? constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_DSYNC : 'wx'
    const fd = await callback((done) => openCallback(tmp, flags, 0o600, done))
    await writeAt(fd, bytes, 0)
    if (!dsync) await callback((done) => fdatasync(fd, done))
    return fd
  })()
  const [, fd] = await Promise.all([lock, log])
  await callback((done) => link(tmp, join(bucket, `${name}.jsonl`), done))
  await callback((done) => unlink(tmp, done))
  const d = await callback((done) => openCallback(bucket, 'r', done))
  await callback((done) => fsync(d, done))
  await callback((done) => close(d, done))
  return fd // kept open, as the package keeps its log open for the next append
}

/**
 * Creating a session: create + first append (materialization) against create + write +
 * fdatasync + directory fsync of one file, and against the protocol floor, interleaved session
 * by session (in a rotating order) so that all three see the same disk conditions. The package
 * runs in its default configuration; `dsync` says whether that writes with O_DSYNC, and the
 * floor then does too.
 */
export async function materializeRun(count, dsync = false) {
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
        opened.push(await newSessionFloor(floorRoot, `f${i}`, batch, dsync))
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
