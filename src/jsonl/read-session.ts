import { isUtf8 } from 'node:buffer'
import { SessionPersistenceCorruptionError } from '../errors.js'
import type { SessionRange } from '../persistence.js'
import { envelopeProblem } from '../session/envelope.js'
import { metaFromHeader } from '../session/meta.js'
import { type ParsedRange, rangeBounds } from '../session/read-options.js'
import type { SessionEvent, SessionHeader } from '../session/schema.js'
import type { FileHandle } from './fs/file-system.js'
import { forEachBlockBackward } from './read-back.js'
import { forEachLine } from './read-lines.js'
import { planRepair } from './repair-plan.js'
import { scanLog } from './scan-log.js'
import { MAX_HEADER_BYTES, parseHeaderLine } from '../session/header-line.js'
import { bisectSeq, seqPrefix, WINDOW_BYTES } from './seq-search.js'
import { MAX_LINE_BYTES } from '../session/prepare-batch.js'
import { checkLine, type FormatVersion, unsealLineInPlace, unsealText } from '../session/line-codec.js'


/** Line 1 of a log and its length with the `\n` (one 4 KiB read for any ordinary header). */
export async function readHeaderLine(handle: FileHandle, path: string, sessionId?: string): Promise<{ header: SessionHeader; headerBytes: number }> {
  let found: { header: SessionHeader; headerBytes: number } | undefined
  let failure: unknown
  await forEachLine(
    handle,
    (buf, start, end, _offset, complete) => {
      try {
        found = { header: parseHeaderLine(buf, start, end, complete, { path, sessionId }), headerBytes: end - start + 1 }
      } catch (err) {
        failure = err
      }
      return false
    },
    { chunkBytes: 4096, to: MAX_HEADER_BYTES },
  )
  if (failure) throw failure
  if (!found) throw new SessionPersistenceCorruptionError(1, 0, 'the file is empty: no header line', { path, sessionId })
  return found
}

/**
 * An event line parsed, or undefined when the bytes are not one as a load judges a line (scan-log.ts):
 * the checksum in version 1, valid UTF-8 (decoding invalid bytes would turn them into U+FFFD and
 * make a line a load cuts look valid), JSON, no `crc` of its own inside a sealed line, the envelope.
 */
export function parseEventLine(line: Buffer, version: FormatVersion, unsealInPlace = false): SessionEvent | undefined {
  if (version === 1 && checkLine(line, 0, line.length) !== 'ok') return undefined
  if (!isUtf8(line)) return undefined
  // `unsealInPlace`: the caller's bytes may be changed (the checksum field made `}` and spaces),
  // sparing a copy of the line's text (a 64 MiB line, §15.5).
  if (version === 1 && unsealInPlace) unsealLineInPlace(line, line.length)
  let value: unknown
  try {
    const text = line.toString('utf8')
    value = JSON.parse(version === 1 && !unsealInPlace ? unsealText(text) : text)
  } catch {
    return undefined
  }
  if (version === 1 && (value as { crc?: unknown } | null)?.crc !== undefined) return undefined
  return envelopeProblem(value) === undefined ? (value as SessionEvent) : undefined
}

/**
 * The last event line of `[from, to)` that parses with a valid envelope, read backwards (a torn
 * tail is skipped), and the offset just after it; undefined for a log with no event.
 */
export async function lastEventLine(
  handle: FileHandle,
  from: number,
  to: number,
  version: FormatVersion,
): Promise<{ seq: number; start: number; end: number; event: SessionEvent } | undefined> {
  let found: { seq: number; start: number; end: number; event: SessionEvent } | undefined
  await forEachBlockBackward(handle, from, to, (block, offset) => {
    let end = block.length
    while (end > 0) {
      const start = end >= 2 ? block.lastIndexOf(10, end - 2) + 1 : 0
      // A line longer than a line may hold (§15.5) is no event, as a scan judges it (damage,
      // which the read of what follows the last event then refuses): never the log's last one.
      if (end - 1 - start > MAX_LINE_BYTES) {
        end = start
        continue
      }
      // The block's bytes are this read's own (what is carried past it was copied first).
      const event = parseEventLine(block.subarray(start, end - 1), version, true)
      // A last line whose seq does not follow the line before it (a gap, a line again) is not the
      // log's last event: a load cuts it, so every range must count the events before it.
      if (event && followsLineBefore(block, start, event.seq, offset === from)) {
        found = { seq: event.seq, start: offset + start, end: offset + end, event }
        return false
      }
      end = start
    }
  }, 64 * 1024)
  return found
}

/**
 * Whether the event `seq` whose line starts at `block[start]` follows the line before it, as far
 * as one block shows: the line before, when the block holds it whole and it begins as the writer
 * writes every line (`{"seq":N,`), must be seq - 1; the first line after the header (`atFrom`,
 * `start` 0) must be seq 0. A line before it in another block, or one written another way, is
 * not looked at (the range's own scan judges what it reads).
 */
function followsLineBefore(block: Buffer, start: number, seq: number, atFrom: boolean): boolean {
  if (start === 0) return !atFrom || seq === 0
  const before = start >= 2 ? block.lastIndexOf(10, start - 2) + 1 : 0
  if (before === 0 && !atFrom) return true // that line may begin in the block before
  const prior = seqPrefix(block.subarray(before, start - 1))
  return prior === undefined || prior === seq - 1
}

/**
 * `read` of the JSONL backend (§15.2): the header, the length from the last valid line, the
 * range's start found by bisection, then a forward scan of the range only, checked as `load`
 * checks (committed damage is `E_CORRUPT`; a torn tail is not returned). `size` bounds what is
 * read (a log this instance is writing is read up to its acknowledged length).
 */
export async function readSessionRange(handle: FileHandle, id: string, path: string, range: ParsedRange, size: number): Promise<SessionRange> {
  const { header, headerBytes } = await readHeaderLine(handle, path, id)
  const meta = metaFromHeader(header)
  const last = await lastEventLine(handle, headerBytes, size, header.version)
  const ctx: RangeContext = { handle, id, path, header, headerBytes, size, last }
  const first = await readRange(ctx, range, last ? last.seq + 1 : 0)
  // A defect the backward look did not see (zeroed blocks before valid lines: 6.3) ends the log
  // there: the range is bounded again by that length and read again (`last: n` moves back).
  if (first.defect === undefined) return { meta, ...first.range }
  const again = await readRange({ ...ctx, last: undefined, end: first.defect.offset }, range, first.defect.seq)
  return { meta, ...again.range }
}

interface RangeContext {
  handle: FileHandle
  id: string
  path: string
  header: SessionHeader
  headerBytes: number
  size: number
  last: Awaited<ReturnType<typeof lastEventLine>>
  /** Where the valid events end, when a defect before the last valid line was found (else the last line's end). */
  end?: number
}

/**
 * One read of `range` bounded by `length` valid events: the events, and the seq at which a
 * defect the backward look did not see ends the valid events, when it is below `length`.
 */
async function readRange(
  ctx: RangeContext,
  range: ParsedRange,
  length: number,
): Promise<{ range: Omit<SessionRange, 'meta'>; defect?: { seq: number; offset: number } }> {
  const { handle, id, path, header, headerBytes, size } = ctx
  const { last } = ctx
  const { from, to } = rangeBounds(range, length)
  if (from >= to) {
    // Nothing to return, but a range reaching the end still judges what follows the last valid
    // line as a load does: a torn tail is nothing, damage (a complete line failing its
    // checksum, §16) rejects.
    if (to === length && last && last.end < size) {
      const after = await scanLog(handle, { path, sessionId: id, to: size, start: { offset: last.end, seq: last.seq + 1, header, headerBytes }, chunkBytes: WINDOW_BYTES })
      planRepair(after, { path, sessionId: id, closeOpenTurn: false })
    } else if (to === length && !last && ctx.end === undefined && headerBytes < size) {
      const after = await scanLog(handle, { path, sessionId: id, to: size, start: { offset: headerBytes, seq: 0, header, headerBytes }, chunkBytes: WINDOW_BYTES })
      planRepair(after, { path, sessionId: id, closeOpenTurn: false })
    }
    return { range: { events: [], firstSeq: from, length } }
  }
  const lastEnd = ctx.end ?? last?.end ?? size
  const start = from === 0 ? { offset: headerBytes, seq: 0 } : await bisectSeq(handle, { offset: headerBytes, seq: 0 }, lastEnd, from, length, header.version === 1)
  // A range that runs to the end reads to the end: what follows the last valid line is judged as
  // a load judges it (a torn tail left out, damage refused).
  const untilSeq = to < length ? { untilSeq: to } : {}
  // Reads of about what the range holds (from the log's mean line), not a whole 1 MiB chunk.
  const mean = last ? (last.end - headerBytes) / length : 0
  const chunkBytes = Math.min(1 << 20, Math.max(64 * 1024, 2 ** Math.ceil(Math.log2(mean * (to - start.seq) + WINDOW_BYTES + 1))))
  // A range that ends with a long last line takes the event the backward look parsed, and reads
  // only what lies before and after that line: a line of up to 64 MiB is not held twice (§15.5).
  if (last && to === length && last.end - last.start > REUSE_LAST_BYTES && start.offset <= last.start) {
    const before = await scanLog(handle, { path, sessionId: id, to: last.start, start: { ...start, header, headerBytes }, chunkBytes })
    planRepair(before, { path, sessionId: id, closeOpenTurn: false })
    if (!before.defect && before.size === last.start && start.seq + before.eventCount === last.seq) {
      const after = await scanLog(handle, { path, sessionId: id, to: size, start: { offset: last.end, seq: last.seq + 1, header, headerBytes }, chunkBytes: WINDOW_BYTES })
      planRepair(after, { path, sessionId: id, closeOpenTurn: false }) // damage after it: E_CORRUPT, as a full scan refuses
      if (after.eventCount === 0) {
        const events = [...before.events, last.event].slice(from - start.seq)
        return { range: { events, firstSeq: Math.min(from, length), length } }
      }
    }
    // Otherwise (what lies before it is not what the backward look saw): the range read as usual.
  }
  const scan = await scanLog(handle, { path, sessionId: id, to: size, start: { ...start, header, headerBytes }, ...untilSeq, chunkBytes })
  planRepair(scan, { path, sessionId: id, closeOpenTurn: false }) // committed damage in the range: E_CORRUPT
  const validEnd = start.seq + scan.events.length
  if (scan.defect && validEnd < length) {
    // Read again with that length when it changes the range (`last: n`); else what was read stands.
    if (rangeBounds(range, validEnd).from !== from) return { range: { events: [], firstSeq: 0, length: validEnd }, defect: { seq: validEnd, offset: scan.validEnd } }
    length = validEnd
  }
  const events = scan.events.slice(from - start.seq)
  return { range: { events, firstSeq: Math.min(from, length), length } }
}

/** A last line longer than this is not read again by a range that ends with it. */
const REUSE_LAST_BYTES = 1 << 20
