import { basename, dirname } from 'node:path'
import { isDeepStrictEqual } from 'node:util'
import { isSessionPersistenceError, SessionPersistenceCorruptionError } from '../errors.js'
import { metaFromHeader } from '../session/meta.js'
import { isEnvelopeKey } from '../session/envelope.js'
import type { JsonValue, SessionEvent, SessionHeader, SessionMeta } from '../session/schema.js'
import type { WatchPoll, WatchSource } from '../session/watch-loop.js'
import { findOneLog, listBuckets } from './find-logs.js'
import { forEachLine } from './read-lines.js'
import { parseEventLine, readHeaderLine } from './read-session.js'
import { planRepair } from './repair-plan.js'
import { scanLog } from './scan-log.js'
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

/** The log as a watcher has it open (one file: an inode). */
interface OpenLog {
  handle: FileHandle
  ino: number
  version: FormatVersion
  header: SessionHeader
  headerBytes: number
}

/** Where one event's line lies in the open log: `[start, end)`, its `\n` excluded. */
interface LineAt {
  seq: number
  start: number
  end: number
}

/**
 * Whether `after` is `before` with nothing changed but the text of string values (never a key,
 * the structure, a number, nor the envelope): what a redaction (§16) makes of an event.
 */
function onlyStringsChanged(before: JsonValue, after: JsonValue): boolean {
  if (typeof before === 'string' || typeof after === 'string') return typeof before === typeof after
  if (before === null || after === null || typeof before !== 'object' || typeof after !== 'object') return before === after
  if (Array.isArray(before) !== Array.isArray(after)) return false
  if (Array.isArray(before)) {
    const a = after as JsonValue[]
    return before.length === a.length && before.every((v, i) => onlyStringsChanged(v, a[i]!))
  }
  const a = after as { [k: string]: JsonValue }
  const keys = Object.keys(before)
  const otherKeys = Object.keys(a)
  return keys.length === otherKeys.length && keys.every((k, i) => otherKeys[i] === k && onlyStringsChanged(before[k]!, a[k]!))
}

/** `after` is the event `before` still, perhaps redacted: the same envelope, only string values changed. */
export function stillTheEvent(before: SessionEvent, after: SessionEvent): boolean {
  if (isDeepStrictEqual(before, after)) return true
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const b = (before as Record<string, unknown>)[key]
    const a = (after as Record<string, unknown>)[key]
    if (isEnvelopeKey(key) ? !isDeepStrictEqual(b, a) : b === undefined || a === undefined || !onlyStringsChanged(b as JsonValue, a as JsonValue)) return false
  }
  return Object.keys(before).join() === Object.keys(after).join()
}

/**
 * The JSONL backend's `watch` source (§15.3): directory notifications through the seam (the log's
 * bucket once it exists; the root and every bucket before), a slow safety poll, and reads from
 * where the last one stopped. A read yields complete, valid lines in seq order and stops at the
 * first that is not one: a torn tail that a repair will cut and close is waited at, damage
 * rejects (judgeStop).
 */
export function jsonlWatchSource(ctx: StoreContext, id: string): WatchSource {
  let path: string | undefined
  // The log as this watcher has it open: kept across wakes while its inode stays the log's.
  let open: OpenLog | undefined
  // The line of the last event this watcher yielded (seq `next - 1`) in the open log: after a
  // rewrite renamed over the log, the new log must still hold that event (a redaction may have
  // changed its strings); a truncation that cut it rejects the watch (E_CORRUPT).
  let last: LineAt | undefined
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
  let judged: { ino: number; size: number; offset: number } | undefined // the stop judged a torn tail, and the file then
  let changedWhileJudged = 0 // judgements in a row that found damage in a log that changed meanwhile
  // Every change in the watched directories wakes the watcher: inotify names a write by the name
  // the writer opened the file as, which for a log published by link() is its temporary name.
  // A wake that changed nothing costs one stat (below).
  let notified = false // a notification came since the last poll (not only the safety timer)
  let safety: ReturnType<typeof setTimeout> | undefined // the safety poll's timer, refreshed by each wait
  let watchedSignal: AbortSignal | undefined
  const onAbort = () => wake?.()
  // Whether the log's own name may have been created, removed or renamed since the last stat of
  // it (a rewrite renames a new log over it, §16): the notification path then stats the name
  // before it reads, where it otherwise reads at once from the open log (one round trip a wake).
  let renamed = true
  const notify = (name: string | undefined, kind?: 'change' | 'rename') => {
    if (kind !== 'change' && (name === undefined || path === undefined || name === basename(path))) renamed = true
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
  async function readFrom(handle: FileHandle, version: FormatVersion, from: SeqPoint, next: number, to: number): Promise<{ events: SessionEvent[]; refused: boolean; lastLine: LineAt | undefined }> {
    const events: SessionEvent[] = []
    let at = from
    let refused = false
    let lastLine: LineAt | undefined
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
        lastLine = { seq: event.seq, start: offset, end: offset + end - start }
        at = { offset: offset + end - start + 1, seq: event.seq + 1 }
        if (event.seq >= next) events.push(event)
        return events.length < POLL_EVENTS
      },
      { from: from.offset, to, chunkBytes: WATCH_CHUNK, stopAtShortRead: true },
    )
    point = at
    return { events, refused, lastLine }
  }

  /** The events of a read handed to the loop: the line of the last one is kept (see `last`). */
  const accept = (read: { events: SessionEvent[]; lastLine: LineAt | undefined }, next: number): SessionEvent[] => {
    const end = next + read.events.length - 1
    if (read.lastLine?.seq === end) last = read.lastLine
    else if (read.events.length > 0) last = undefined
    return read.events
  }

  /**
   * Whether the log at `path` is still the file the watcher read from: a read that raced a
   * rewrite renamed over it (§16) may hold the old bytes (the unredacted ones), which are never
   * handed on once the new log is in place. A log gone (deleted) keeps what was read before.
   */
  async function stillAt(file: string, log: OpenLog): Promise<boolean> {
    try {
      return (await ctx.fs.stat(file)).ino === log.ino
    } catch (err) {
      if ((err as { code?: unknown }).code === 'ENOENT') return true
      throw err
    }
  }

  /** The event at `seq` in `log` and its line, when a complete valid line holds it (up to `size`). */
  async function eventAt(log: OpenLog, seq: number, size: number, at?: number): Promise<{ event: SessionEvent; line: LineAt } | undefined> {
    const from = at !== undefined ? { offset: at } : seq === 0 ? { offset: log.headerBytes } : await bisectSeq(log.handle, { offset: log.headerBytes, seq: 0 }, size, seq, undefined, log.version === 1)
    let found: { event: SessionEvent; line: LineAt } | undefined
    await forEachLine(
      log.handle,
      (buf, start, end, offset, complete) => {
        if (!complete) return false
        const event = parseEventLine(buf.subarray(start, end), log.version, true)
        if (!event || event.seq > seq) return false
        if (event.seq === seq) {
          found = { event, line: { seq, start: offset, end: offset + end - start } }
          return false
        }
      },
      { from: from.offset, to: size, chunkBytes: WATCH_CHUNK, stopAtShortRead: true },
    )
    return found
  }

  /**
   * Whether the line that ends right before `at` is still the event before `next`: the one this
   * watcher last yielded, at the same place and length, or (none known) the one a search by seq
   * finds. The header's end for `next` 0.
   */
  async function intactBefore(log: OpenLog, at: number, next: number, size: number): Promise<boolean> {
    if (next === 0) return at === log.headerBytes
    const known = last?.seq === next - 1 ? last : undefined
    const before = await eventAt(log, next - 1, size, known?.start)
    return before !== undefined && before.line.end + 1 === at && (known === undefined || before.line.end === known.end)
  }

  /**
   * A read that stopped at a complete line that is not the next event, with nothing moved there:
   * the bytes from there are judged as `read` and `load` judge them (§6.2, §16). Damage (a
   * complete version-1 line failing its checksum, a defect before the commit boundary) rejects
   * the watch with the E_CORRUPT a load gives: no repair ever writes over it, so waiting there
   * would leave the consumer waiting in silence, forever. A torn tail, which the next writer's
   * load cuts and closes, is waited at. One valid event there (a read that raced a repair's
   * rewrite of those bytes) ends the look at once; the next poll reads it. True when it judged a
   * place to wait at (kept in `judged`: not judged again while the file keeps its size), false
   * when the log changed while it was judged (judged again by the next poll).
   */
  async function judgeStop(path: string, log: OpenLog, at: SeqPoint, size: number, st: { ino: number; size: number }): Promise<boolean> {
    const { handle, header, headerBytes } = log
    try {
      const scan = await scanLog(handle, {
        path,
        sessionId: id,
        to: size,
        start: { offset: at.offset, seq: at.seq, header, headerBytes },
        untilSeq: at.seq + 1,
        keepEvents: false,
        chunkBytes: WATCH_CHUNK,
      })
      planRepair(scan, { path, sessionId: id, closeOpenTurn: false })
      changedWhileJudged = 0
      return true
    } catch (err) {
      // Damage never changes under a watcher: a log that changed while it was judged (a writer's
      // rewrite racing the read) is judged again by the next poll, never refused on a mixed read.
      // At most a few times in a row: a log touched more often than a judgement takes must not
      // hide its damage for good.
      if (isSessionPersistenceError(err, 'E_CORRUPT') && changedWhileJudged < 3) {
        const now = await ctx.fs.stat(path).catch(() => undefined)
        if (now === undefined || now.ino !== st.ino || now.size !== st.size) {
          changedWhileJudged++
          return false
        }
      }
      throw err
    }
  }

  /**
   * After a rewrite renamed `now` over `before` (§16: migrate, redact, truncate-at-damage): the
   * watch goes on by seq in the new log only if it still holds the last event the watcher yielded
   * (the same event, or one a redaction changed only the strings of). A truncation that cut it
   * cut history the consumer has seen: E_CORRUPT, never a silent jump into other events.
   */
  async function followRewrite(before: OpenLog, now: OpenLog, next: number): Promise<void> {
    const yielded = last
    last = undefined
    if (next === 0 || yielded?.seq !== next - 1) return // nothing yielded from the old log that is known
    const old = await eventAt(before, yielded.seq, yielded.end + 1, yielded.start)
    const found = await eventAt(now, yielded.seq, (await now.handle.stat()).size)
    if (old && found && stillTheEvent(old.event, found.event)) {
      last = found.line
      return
    }
    throw new SessionPersistenceCorruptionError(
      yielded.seq + 2,
      yielded.start,
      `the log was rewritten under this watch and no longer holds the event seq ${yielded.seq} it yielded (events it yielded were cut: repair --truncate-at-damage)`,
      { sessionId: id, ...(path === undefined ? {} : { path }) },
    )
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
      let byNotification = notified
      notified = false
      // Until a read that the log at `path` still holds: one that raced a rewrite renamed over
      // the log (§16) is read again from the new log, by seq.
      for (;;) {
        // A notification with the log open where it was left, and no sign of a rename of its name
        // since the last stat: one read from there. A notification that may be a rename (a
        // rewrite renamed over the log, its delete) goes through the stat below, and so does a
        // read that finds nothing. A rename so close to the read that its notification has not
        // come yet is the one case the read may still hand on the old log's events (docs).
        if (byNotification && open && point?.seq === next && !renamed) {
          byNotification = false
          const read = await readFrom(open.handle, open.version, point, next, Number.POSITIVE_INFINITY)
          if (read.events.length > 0 && !renamed) {
            seen = undefined
            return { kind: 'events', events: accept(read, next) }
          }
        }
        // One stat a wake: the log's name (deleted, or another file under it) and its size. The
        // descriptor and the header's length are kept while the file stays the same.
        let st
        try {
          renamed = false // what the stat below sees: a rename after it is notified again
          st = await ctx.fs.stat(path)
        } catch (err) {
          if ((err as { code?: unknown }).code !== 'ENOENT') throw err
          await release()
          return { kind: 'missing' }
        }
        if (seen && st.ino === seen.ino && st.size === seen.size && st.mtimeMs === seen.mtimeMs && point?.seq === next) return { kind: 'events', events: [] }
        // A rewrite renamed over the log: the old one stays open until the new one is found to
        // hold what this watcher yielded from it.
        let before: OpenLog | undefined
        if (open && open.ino !== st.ino) {
          before = open
          open = undefined
        }
        try {
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
              open = { handle, ino: (await handle.stat()).ino, version: header.version, header, headerBytes }
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
            if (before) await followRewrite(before, open, next) // E_CORRUPT when it cut what was yielded
            else last = undefined
          }
        } finally {
          await before?.handle.close().catch(() => {})
        }
        const { handle, version, headerBytes } = open
        const size = open.ino === st.ino ? st.size : (await handle.stat()).size
        const seek = async () => {
          point = next === 0 ? { offset: headerBytes, seq: 0 } : await bisectSeq(handle, { offset: headerBytes, seq: 0 }, size, next, undefined, version === 1)
        }
        const sought = point === undefined || point.seq !== next || point.offset > size
        if (sought) await seek()
        let read = await readFrom(handle, version, point!, next, size)
        if (read.refused && read.events.length === 0 && !sought && !(await intactBefore(open, point!.offset, next, size))) {
          // Stopped at a complete line that is not the next event, where it read before, and the
          // line before it is no longer the event before `next`: the bytes there were rewritten in
          // place (a writer that rolled back a failed append and wrote others, what this watcher
          // had read unsynced). Found again by seq. Where the event before is still in place, the
          // refusal is the bytes' own (a duplicated or blank line): judged below, never stepped
          // over by a search by seq that would land on a later line with that seq.
          const at = point!.offset
          await seek()
          if (point!.offset !== at) read = await readFrom(handle, version, point!, next, size)
        }
        // The stop judged already, the file's inode and size the same (a touch, a notification of
        // another file): waited at again without reading what follows it once more (the bytes
        // before it were still checked above: rewritten in place, they are found again by seq).
        const waitedAt = judged?.ino === open.ino && judged.size === size && judged.offset === point!.offset
        if (read.refused && read.events.length === 0 && !waitedAt) {
          if (await judgeStop(path, open, point!, size, st)) judged = { ino: open.ino, size, offset: point!.offset }
        }
        const { events } = read
        if (events.length > 0) changedWhileJudged = 0 // the log moved on: a later race gets its retries again
        if (events.length > 0 && !(await stillAt(path, open))) continue // renamed over while read: read the new log
        // A read that stopped at a line that is not the next event, after events: the next poll
        // reads again from there (unchanged file or not) and judges that line (judgeStop).
        const stopped = read.refused && events.length > 0
        seen = events.length < POLL_EVENTS && !stopped && open.ino === st.ino ? { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs } : undefined
        return { kind: 'events', events: accept(read, next) }
      }
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
