import { checkLine } from '../session/line-codec.js'
import { MAX_LINE_BYTES } from '../session/prepare-batch.js'
import type { FileHandle } from './fs/file-system.js'

/** A probe of the bisection reads this much at a time. */
export const PROBE_BYTES = 4096
/** Bisection stops when the window is this small; the forward read then skips at most this. */
export const WINDOW_BYTES = 16 * 1024

/** A line start and the seq of the event there. */
export interface SeqPoint {
  offset: number
  seq: number
}

/**
 * The seq of an event line's bytes, or undefined when they are not an event line. Lines the
 * package writes start with `{"seq":N,` when the caller put `seq` first (the adapters and the
 * plugin do); any other line is parsed whole.
 */
function seqOfLine(line: Buffer): number | undefined {
  const quick = seqPrefix(line)
  if (quick !== undefined) return quick
  try {
    const seq = (JSON.parse(line.toString('utf8')) as { seq?: unknown } | null)?.seq
    return typeof seq === 'number' && Number.isSafeInteger(seq) && seq >= 0 ? seq : undefined
  } catch {
    return undefined
  }
}

/**
 * The seq of a complete line as a bound of the search: in a log of version 1 (`sealed`) only a
 * line whose checksum matches has one. Damage can leave a line that still starts `{"seq":N,`
 * with the wrong N (a changed digit): trusted, it would steer the search past the target or be
 * taken for the target's own line, and a read would judge damage that lies before its range.
 */
function seqOfCheckedLine(line: Buffer, sealed: boolean): number | undefined {
  if (sealed && checkLine(line, 0, line.length) !== 'ok') return undefined
  return seqOfLine(line)
}

/** The seq of a line that starts `{"seq":N,` (or `{"seq":N}`), from its first bytes alone. */
export function seqPrefix(line: Buffer): number | undefined {
  const prefix = '{"seq":'
  if (line.length <= prefix.length || line.toString('latin1', 0, prefix.length) !== prefix) return undefined
  let n = 0
  let i = prefix.length
  for (; i < line.length && i < prefix.length + 16; i++) {
    const c = line[i]!
    if (c < 48 || c > 57) break
    n = n * 10 + (c - 48)
  }
  return i > prefix.length && (line[i] === 44 || line[i] === 125) && Number.isSafeInteger(n) ? n : undefined
}

/**
 * The first complete line that starts at or after `pos` and before `limit`, and the seq it holds:
 * small reads forward from `pos` (a long line costs its length). Undefined when none starts there;
 * `seq` undefined when it is not an event line, `nul` when it holds a NUL byte (a crash's bytes).
 */
async function lineAfter(
  handle: FileHandle,
  pos: number,
  limit: number,
  lineStart: boolean,
  sealed: boolean,
): Promise<{ offset: number; seq: number | undefined; end: number; nul: boolean } | undefined> {
  const buf = Buffer.allocUnsafe(PROBE_BYTES)
  let start = lineStart ? pos : -1
  const pieces: Buffer[] = []
  let at = pos
  // `limit` bounds where the line may start; one that starts before it is read to its end (a
  // long line just past a damaged one must not leave the search without a bound: the read after
  // it would then meet the damage), up to the longest line a log may hold.
  let held = 0
  while (start === -1 ? at < limit : held <= MAX_LINE_BYTES) {
    const n = await handle.read(buf, 0, start === -1 ? Math.min(PROBE_BYTES, limit - at) : PROBE_BYTES, at)
    if (n === 0) return undefined
    let from = 0
    if (start === -1) {
      const nl = buf.indexOf(10)
      if (nl === -1 || nl >= n) {
        at += n
        continue
      }
      start = at + nl + 1
      from = nl + 1
    }
    const nl = buf.subarray(from, n).indexOf(10)
    if (nl !== -1) {
      pieces.push(Buffer.from(buf.subarray(from, from + nl)))
      const line = Buffer.concat(pieces)
      return { offset: start, seq: seqOfCheckedLine(line, sealed), end: start + line.length + 1, nul: line.includes(0) }
    }
    pieces.push(Buffer.from(buf.subarray(from, n)))
    held += n - from
    at += n
  }
  return undefined
}

/**
 * Bisects `[lo.offset, end)` on seq for `target` (§15.2): lines are in seq order, so about
 * log₂((end - lo) / PROBE_BYTES) small reads find a line start at most about WINDOW_BYTES before
 * the line holding `target` (or that line itself), never reading what lies before it. `lo` must be
 * a line whose seq is at most `target`. When the seq at `end` is known (`endSeq`: the seq a line
 * starting there has, or would have), the first probes are placed by interpolation — lines of
 * one log are of similar sizes — a little before where the target should be, so a few reads
 * usually do. A damaged probe (no event line where one was expected) only narrows the window
 * from above, so the answer stays at or before the target. The window is then read once to find
 * the target's own line (`lineOf`): a reader that starts there judges nothing before its range.
 */
export async function bisectSeq(handle: FileHandle, lo: SeqPoint, end: number, target: number, endSeq?: number, sealed = false): Promise<SeqPoint> {
  const { low, high } = await narrow(handle, lo, end, target, endSeq, sealed)
  if (low.seq === target) return low
  return (await lineOf(handle, low, Math.min(high, low.offset + 2 * WINDOW_BYTES), target, sealed)) ?? low
}

/**
 * The line of `target` itself, when it starts in `[low.offset, limit)` and every line before it
 * there has a readable seq below it or is a complete line that is no event (damage, which only
 * a read of it would judge: §15.2 rejects damage inside the range, and these lines lie before it).
 * Undefined, and the caller reads from `low` as before, at bytes a crash leaves (a NUL: §6.3
 * judges them, they may end the log), at a line past `target`, or when none is found.
 */
async function lineOf(handle: FileHandle, low: SeqPoint, limit: number, target: number, sealed: boolean): Promise<SeqPoint | undefined> {
  if (limit <= low.offset) return undefined
  // The window and the first bytes of a line starting at its end (its seq).
  const buf = Buffer.allocUnsafe(limit - low.offset + SEQ_PREFIX_BYTES)
  let n = 0
  while (n < buf.length) {
    const got = await handle.read(buf, n, buf.length - n, low.offset + n)
    if (got === 0) break
    n += got
  }
  for (let s = 0; s < n && low.offset + s < limit; ) {
    const nl = buf.subarray(0, n).indexOf(10, s)
    const line = buf.subarray(s, nl === -1 ? n : nl)
    if (line.includes(0)) return undefined
    const seq = nl === -1 ? seqPrefix(line) : seqOfCheckedLine(line, sealed)
    if (seq === target) {
      // A line the window holds only the start of is the target's once its checksum is checked.
      if (nl === -1 && sealed && (await lineAfter(handle, low.offset + s, Number.MAX_SAFE_INTEGER, true, true))?.seq !== target) return undefined
      return { offset: low.offset + s, seq }
    }
    if ((seq !== undefined && seq > target) || nl === -1) return undefined
    s = nl + 1
  }
  return undefined
}

/** Enough of a line's first bytes for `{"seq":` and 16 digits. */
const SEQ_PREFIX_BYTES = 32

/** The bisection itself: a line at or before `target` (`low`) and the bound above it. */
async function narrow(handle: FileHandle, lo: SeqPoint, end: number, target: number, endSeq: number | undefined, sealed: boolean): Promise<{ low: SeqPoint; high: number }> {
  let low = lo
  let high = end // a line start (or end of file) whose seq, if any, is above target
  let highSeq = endSeq
  for (let step = 0; high - low.offset > WINDOW_BYTES; step++) {
    let mid = low.offset + Math.floor((high - low.offset) / 2)
    if (highSeq !== undefined && highSeq > low.seq && step < INTERPOLATED_PROBES) {
      const ahead = Math.floor(((target - low.seq) / (highSeq - low.seq)) * (high - low.offset))
      // A probe that landed a little before the target (as they are placed) ends the search:
      // the forward read from it skips about `ahead` bytes, less than a window. (Probing again
      // would only advance line by line, and halving the rest of the range would follow.)
      if (step > 0 && ahead <= WINDOW_BYTES) return { low, high: Math.min(high, low.offset + 2 * WINDOW_BYTES) }
      mid = Math.min(Math.max(low.offset + ahead - WINDOW_BYTES / 2, low.offset + 1), high - 1)
    }
    let found = await lineAfter(handle, mid, high, false, sealed)
    // A complete line that is no event, and no crash's bytes, is damage a read before its range
    // must not judge, nor let it steer the search below the target: the line after it is probed.
    for (let skipped = 0; found?.seq === undefined && found && !found.nul && found.end < high && skipped < MAX_SKIPPED; skipped++) {
      found = await lineAfter(handle, found.end, high, true, sealed)
    }
    if (found === undefined || found.seq === undefined || found.offset >= high) {
      high = mid
      highSeq = undefined // what holds `mid` is not known: halve from here
      continue
    }
    if (found.seq === target) return { low: { offset: found.offset, seq: found.seq }, high }
    if (found.seq < target) low = { offset: found.offset, seq: found.seq }
    else {
      high = found.offset
      highSeq = found.seq
    }
  }
  return { low, high }
}

/** Damaged lines a probe passes over before it takes the bound from where it landed. */
const MAX_SKIPPED = 16

/** Probes placed by interpolation before falling back to halving. */
const INTERPOLATED_PROBES = 4
