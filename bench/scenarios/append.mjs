// Durable appends: this package against the physical limit (raw write + sync of the same bytes),
// against an O_DSYNC writer, and against the least the contract itself allows (its floor).
import { constants, closeSync, fdatasync, fdatasyncSync, openSync, stat, statSync, utimes, write, writeFileSync, writeSync } from 'node:fs'
import { open } from 'node:fs/promises'
import { join } from 'node:path'
import { createJsonlPersistence } from '../../dist/index.js'
import { callback, cleanup, events, interleave, scratch, serialize } from '../lib.mjs'

export const meta = (id) => ({ id, createdAt: 1_764_489_600_000, delegationDepth: 0 })

/** Flags of a raw O_DSYNC writer: every write returns once its data is durable, as write + fdatasync. */
export const DSYNC_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_DSYNC

/** Writes all of `bytes` at `pos` through the callback API (looping on short writes, as any writer must). */
export async function writeAt(fd, bytes, pos) {
  let done = 0
  while (done < bytes.length) done += await callback((cb) => write(fd, bytes, done, bytes.length - done, pos + done, cb))
}

/**
 * The writer lock as a lease, with no package code: the holder keeps the monotonic time at which
 * it last confirmed the lock (its inode is still the one it published) and refreshes it every
 * `staleLockMs / 3` in the background; an append within `staleLockMs / 2` of that time does no
 * file-system call for the lock, a later one confirms first.
 */
export function floorLease(lockPath, staleLockMs = 10_000) {
  const ino = statSync(lockPath).ino
  const lease = { confirmedAt: performance.now(), ino }
  const confirm = async () => {
    if ((await callback((cb) => stat(lockPath, cb))).ino !== ino) throw new Error('lock lost')
    lease.confirmedAt = performance.now()
  }
  const timer = setInterval(() => {
    confirm().then(() => callback((cb) => utimes(lockPath, new Date(), new Date(), cb))).catch(() => {})
  }, staleLockMs / 3)
  timer.unref()
  return {
    /** Resolves when the lease allows a write (at once, with no I/O, within its term). */
    check: () => (performance.now() - lease.confirmedAt < staleLockMs / 2 ? undefined : confirm()),
    stop: () => clearInterval(timer),
  }
}

/**
 * The least any implementation of docs/contract.md §5.2 + §5.3 can do per batch, written with
 * no package code: serialize the caller's events when append is called (they may be mutated
 * after the call), check the lease, then write + fdatasync (or, with `dsync`, one write on an
 * O_DSYNC descriptor), all through Node's cheapest non-blocking calls (the callback API).
 */
export async function protocolFloor(state, batch) {
  const bytes = serialize(batch)
  await state.lease.check()
  await writeAt(state.fd, bytes, state.pos)
  if (!state.dsync) await callback((cb) => fdatasync(state.fd, cb))
  state.pos += bytes.length
}

/**
 * One run: every contender appends the same batches, interleaved batch by batch in a rotating
 * order so that all of them see the same disk conditions; returns the mean ms per batch of each.
 * `modes` (dsync-config.mjs): the package's configuration for write + fdatasync (`pkg`) and, when
 * it has one, for O_DSYNC writes (`pkgDsync`).
 */
export async function appendRun(size, count, modes = { pair: {}, dsync: undefined }) {
  const dir = scratch(`append-${size}`)
  const closers = []
  try {
    const batches = Array.from({ length: count + 1 }, (_, b) => events(b * size, size))
    const buffers = batches.map(serialize)
    const packageWith = async (config, id) => {
      const p = createJsonlPersistence({ root: dir, ...config })
      await p.create(meta(id))
      await p.append(id, batches[0]) // materialization is measured separately
      closers.push(() => p.closeAll())
      return (i) => p.append(id, batches[i])
    }
    const fileHandle = async (name) => {
      const h = await open(join(dir, name), 'a')
      closers.push(() => h.close())
      let pos = 0
      return async (b) => {
        await h.write(b, 0, b.length, pos)
        await h.datasync()
        pos += b.length
      }
    }
    const fd = (name, flags = 'a') => {
      const n = openSync(join(dir, name), flags, 0o600)
      closers.push(() => closeSync(n))
      return n
    }
    const lock = join(dir, 'floor.lock')
    writeFileSync(lock, '{}\n')
    const lease = floorLease(lock)
    closers.push(() => lease.stop())
    const floor = { fd: fd('floor'), pos: 0, lease, dsync: false }
    const floorDsync = { fd: fd('floor-dsync', DSYNC_FLAGS), pos: 0, lease, dsync: true }
    const syncFd = fd('raw-sync')
    const cbFd = fd('raw-callback')
    const dsyncFd = fd('raw-dsync', DSYNC_FLAGS)
    const pos = { cb: 0, dsync: 0 }
    const asyncRaw = await fileHandle('raw-async')
    const stringified = await fileHandle('stringify')
    const contenders = [
      ['pkg', await packageWith(modes.pair, 'bench')],
      ['asyncRaw', (i) => asyncRaw(buffers[i])],
      ['callbackRaw', async (i) => {
        await writeAt(cbFd, buffers[i], pos.cb)
        await callback((cb) => fdatasync(cbFd, cb))
        pos.cb += buffers[i].length
      }],
      ['dsyncRaw', async (i) => {
        await writeAt(dsyncFd, buffers[i], pos.dsync)
        pos.dsync += buffers[i].length
      }],
      ['syncRaw', (i) => {
        writeSync(syncFd, buffers[i])
        fdatasyncSync(syncFd)
      }],
      ['stringify', (i) => stringified(serialize(batches[i]))],
      ['floor', (i) => protocolFloor(floor, batches[i])],
      ['floorDsync', (i) => protocolFloor(floorDsync, batches[i])],
    ]
    if (modes.dsync) contenders.push(['pkgDsync', await packageWith(modes.dsync, 'bench-dsync')])
    const total = await interleave(contenders, count)
    return Object.fromEntries(Object.entries(total).map(([k, v]) => [k, v / count]))
  } finally {
    for (const close of closers.reverse()) await close()
    cleanup(dir)
  }
}
