import { dirname } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { isSessionPersistenceError } from '../errors.js'
import { metaFromHeader } from '../session/meta.js'
import type { SessionEvent, SessionMeta } from '../session/schema.js'
import type { WatchPoll, WatchSource } from '../session/watch-loop.js'
import { findOneLog, listBuckets } from './find-logs.js'
import { forEachLine } from './read-lines.js'
import { parseEventLine, readHeaderLine } from './read-session.js'
import { bisectSeq, type SeqPoint } from './seq-search.js'
import type { StoreContext } from './store-context.js'
import type { FileHandle } from './fs/file-system.js'
import type { FormatVersion } from '../session/line-codec.js'

/** How often a watcher looks even without a notification (a missed inotify event, a network file system). */
const SAFETY_POLL_MS = 1000
/** A watcher reads what was appended since its last look: small reads (a longer line still comes whole). */
const WATCH_CHUNK = 64 * 1024
/** At most this many events a poll: a watcher from seq 0 of a huge log never holds all of it. */
const POLL_EVENTS = 1000

/**
 * The JSONL backend's `watch` source (§15.3): directory notifications through the seam (the log's
 * bucket once it exists; the root and every bucket before), a slow safety poll, and reads from
 * where the last one stopped. A read yields complete, valid lines in seq order and stops at the
 * first that is not one (a line being written, or a torn tail that a repair will cut and close).
 */
export function jsonlWatchSource(ctx: StoreContext, id: string): WatchSource {
  let path: string | undefined
  // The log as this watcher has it open: kept across wakes while its inode stays the log's.
  let open: { handle: FileHandle; ino: number; version: FormatVersion; headerBytes: number } | undefined
  const release = async () => {
    const h = open?.handle
    open = undefined
    await h?.close().catch(() => {})
  }
  let point: SeqPoint | undefined // where the next unread line starts, and its seq
  // The meta of the log as first opened. A rewrite (§16: migrate, redact, truncate-at-damage)
  // keeps it and only `version` may change; another file under the name with other meta is
  // another session (deleted and re-created under the same id): the watch ends there.
  let identity: SessionMeta | undefined
  const watchers = new Map<string, { close(): void }>()
  let dirty = false
  let wake: (() => void) | undefined
  let seen: { ino: number; size: number; mtimeMs: number } | undefined // the file as the last poll left it
  // Every change in the watched directories wakes the watcher: inotify names a write by the name
  // the writer opened the file as, which for a log published by link() is its temporary name.
  // A wake that changed nothing costs one stat (below).
  let notified = false // a notification came since the last poll (not only the safety timer)
  let safety: ReturnType<typeof setTimeout> | undefined // the safety poll's timer, refreshed by each wait
  let watchedSignal: AbortSignal | undefined
  const onAbort = () => wake?.()
  const notify = () => {
    dirty = true
    notified = true
    wake?.()
  }
  const watchDir = (dir: string) => {
    if (watchers.has(dir) || !ctx.fs.watchDir) return
    try {
      watchers.set(dir, ctx.fs.watchDir(dir, notify))
    } catch {
      // not there (yet), or no notifications on this file system: the safety poll covers it
    }
  }
  const unwatchAllBut = (keep: string) => {
    for (const [dir, w] of watchers) {
      if (dir !== keep) {
        w.close()
        watchers.delete(dir)
      }
    }
  }

  async function locate(): Promise<string | undefined> {
    try {
      return await findOneLog(ctx, id)
    } catch (err) {
      if (isSessionPersistenceError(err, 'E_NOT_FOUND')) return undefined
      throw err
    }
  }

  /**
   * The complete valid lines from `from` (up to `to`, or to where a read comes back short),
   * advancing `point`; `refused` when the read stopped at a complete line that is not the next
   * event (a defect a repair will cut, or bytes rewritten under `point`).
   */
  async function readFrom(handle: FileHandle, version: FormatVersion, from: SeqPoint, next: number, to: number): Promise<{ events: SessionEvent[]; refused: boolean }> {
    const events: SessionEvent[] = []
    let at = from
    let refused = false
    await forEachLine(
      handle,
      (buf, start, end, offset, complete) => {
        if (!complete) return false
        // Unsealed in place (the chunk is the reader's, never kept past this call): a huge
        // version-1 line is not copied once more to drop its checksum (§15.5).
        const event = parseEventLine(buf.subarray(start, end), version, true)
        if (!event || event.seq !== at.seq) {
          refused = true
          return false
        }
        at = { offset: offset + end - start + 1, seq: event.seq + 1 }
        if (event.seq >= next) events.push(event)
        return events.length < POLL_EVENTS
      },
      { from: from.offset, to, chunkBytes: WATCH_CHUNK, stopAtShortRead: true },
    )
    point = at
    return { events, refused }
  }

  return {
    async poll(next: number): Promise<WatchPoll> {
      if (path === undefined) {
        // Not found yet: notice a new bucket or a new log in any bucket.
        watchDir(ctx.root)
        for (const bucket of await listBuckets(ctx)) watchDir(bucket)
        path = await locate()
        if (path === undefined) return { kind: 'missing' }
        unwatchAllBut(dirname(path))
        watchDir(dirname(path))
      }
      const byNotification = notified
      notified = false
      // A notification with the log open where it was left: one read from there, nothing else
      // when it finds events. One that finds none may be the log's delete or its replacement
      // (a rewrite, or another session under the id): the stat below looks at once.
      if (byNotification && open && point?.seq === next) {
        const { events } = await readFrom(open.handle, open.version, point, next, Number.POSITIVE_INFINITY)
        if (events.length > 0) {
          seen = undefined
          return { kind: 'events', events }
        }
      }
      // One stat a wake: the log's name (deleted, or another file under it) and its size. The
      // descriptor and the header's length are kept while the file stays the same.
      let st
      try {
        st = await ctx.fs.stat(path)
      } catch (err) {
        if ((err as { code?: unknown }).code !== 'ENOENT') throw err
        await release()
        return { kind: 'missing' }
      }
      if (seen && st.ino === seen.ino && st.size === seen.size && st.mtimeMs === seen.mtimeMs && point?.seq === next) return { kind: 'events', events: [] }
      if (open && open.ino !== st.ino) await release()
      if (!open) {
        let handle
        try {
          handle = await ctx.fs.open(path, 'r')
        } catch (err) {
          if ((err as { code?: unknown }).code === 'ENOENT') return { kind: 'missing' }
          throw err
        }
        let meta: SessionMeta
        try {
          const { header, headerBytes } = await readHeaderLine(handle, path, id)
          meta = metaFromHeader(header)
          // Opened after the stat: the inode the handle holds is the one to follow.
          open = { handle, ino: (await handle.stat()).ino, version: header.version, headerBytes }
          point = undefined // a rewrite under that name (or the first look): start over by seq
        } catch (err) {
          await handle.close()
          throw err
        }
        if (identity === undefined) identity = meta
        else if (!isDeepStrictEqual(meta, identity)) {
          // Another session under the id: the one watched was deleted.
          await release()
          return { kind: 'missing' }
        }
      }
      const { handle, version, headerBytes } = open
      const size = open.ino === st.ino ? st.size : (await handle.stat()).size
      const seek = async () => {
        point = next === 0 ? { offset: headerBytes, seq: 0 } : await bisectSeq(handle, { offset: headerBytes, seq: 0 }, size, next, undefined, version === 1)
      }
      const sought = point === undefined || point.seq !== next || point.offset > size
      if (sought) await seek()
      const read = await readFrom(handle, version, point!, next, size)
      let { events } = read
      if (read.refused && events.length === 0 && !sought) {
        // Stopped at a complete line that is not the next event, where it read before: the bytes
        // there may have been rewritten in place (a repair that cut what this watcher had read
        // past). Found again by seq; where nothing moved, it waits at the same line.
        const at = point!.offset
        await seek()
        if (point!.offset !== at) ({ events } = await readFrom(handle, version, point!, next, size))
      }
      seen = events.length < POLL_EVENTS && open.ino === st.ino ? { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs } : undefined
      return { kind: 'events', events }
    },
    changed(signal: AbortSignal): Promise<void> {
      return new Promise<void>((resolve) => {
        if (dirty || signal.aborted) {
          dirty = false
          return resolve()
        }
        // One safety timer and one abort listener for the watcher's life, not one of each per
        // wait (every wake sets up the next wait on the way to the event it reads).
        if (watchedSignal !== signal) {
          watchedSignal?.removeEventListener('abort', onAbort)
          watchedSignal = signal
          signal.addEventListener('abort', onAbort, { once: true })
        }
        // (A timer that fired is armed again by refresh; it keeps the process alive while the
        // watcher waits, as each wait's own timer did.)
        if (safety) safety.refresh()
        else safety = setTimeout(() => wake?.(), SAFETY_POLL_MS)
        wake = () => {
          wake = undefined
          dirty = false
          resolve()
        }
      })
    },
    async close() {
      clearTimeout(safety)
      safety = undefined
      watchedSignal?.removeEventListener('abort', onAbort)
      watchedSignal = undefined
      for (const w of watchers.values()) w.close()
      watchers.clear()
      await release()
    },
  }
}
