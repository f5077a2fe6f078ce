// Durable appends: this package against the physical limit (raw write + fdatasync of the same bytes).
import { closeSync, fdatasyncSync, openSync, writeSync } from 'node:fs'
import { open } from 'node:fs/promises'
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



/**
 * One run: every contender appends the same batches, interleaved batch by batch (package, raw
 * non-blocking, raw synchronous, stringify+write) so that all of them see the same disk
 * conditions; returns the mean ms per batch of each.
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
    const total = { pkg: 0, asyncRaw: 0, syncRaw: 0, stringify: 0 }
    for (let i = 1; i <= count; i++) {
      let t = now()
      await p.append('bench', batches[i])
      total.pkg += now() - t
      const b = buffers[i]
      t = now()
      await h.write(b, 0, b.length, posA)
      await h.datasync()
      total.asyncRaw += now() - t
      posA += b.length
      t = now()
      writeSync(fd, b)
      fdatasyncSync(fd)
      total.syncRaw += now() - t
      t = now()
      const sb = serialize(batches[i])
      await hs.write(sb, 0, sb.length, posS)
      await hs.datasync()
      total.stringify += now() - t
      posS += sb.length
    }
    await p.closeAll()
    await h.close()
    await hs.close()
    closeSync(fd)
    return Object.fromEntries(Object.entries(total).map(([k, v]) => [k, v / count]))
  } finally {
    cleanup(dir)
  }
}

/** Sixteen sessions appending batches of 10 at once, against one synchronous raw writer. */
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
    const t = now()
    await Promise.all(ids.map(async (id, i) => {
      for (let b = 1; b <= count; b++) await p.append(id, all[i][b])
    }))
    const pkgEventsPerSec = (sessions * count * size) / ((now() - t) / 1000)
    await p.closeAll()
    const buffers = all[0].slice(1).map(serialize)
    const syncMs = rawSync(join(dir, 'raw-sync'), buffers)
    const syncEventsPerSec = (count * size) / (syncMs / 1000)
    return { pkgEventsPerSec, syncEventsPerSec }
  } finally {
    cleanup(dir)
  }
}

/** Creating a session: first append (materialization) against create + write + fdatasync + directory fsync. */
export async function materializeRun(count) {
  const dir = scratch('materialize')
  try {
    const batch = events(0, 10)
    const bytes = serialize(batch)
    const p = createJsonlPersistence({ root: dir })
    await p.create(meta('warm'))
    await p.append('warm', batch) // the bucket and lock directories exist from here on
    let createMs = 0
    let appendMs = 0
    for (let i = 0; i < count; i++) {
      let t = now()
      await p.create(meta(`m${i}`))
      createMs += now() - t
      t = now()
      await p.append(`m${i}`, batch)
      appendMs += now() - t
    }
    const pkg = (createMs + appendMs) / count
    const firstAppend = appendMs / count
    await p.closeAll()
    const rawDir = join(dir, '_no-cwd')
    const t = now()
    for (let i = 0; i < count; i++) {
      const h = await open(join(rawDir, `raw-${i}`), 'wx', 0o600)
      await h.write(bytes, 0, bytes.length, 0)
      await h.datasync()
      await h.close()
      const d = await open(rawDir, 'r')
      await d.sync()
      await d.close()
    }
    const raw = (now() - t) / count
    return { pkg, firstAppend, raw }
  } finally {
    cleanup(dir)
  }
}
