import { isUtf8 } from 'node:buffer'
import { SessionPersistenceCorruptionError } from '../errors.js'
import type { FileHandle } from './fs/file-system.js'
import { envelopeProblem } from '../session/envelope.js'
import { forEachLine } from './read-lines.js'
import { MAX_LINE_BYTES } from '../session/prepare-batch.js'
import { checkLine, checksumReason, unsealLineInPlace, unsealText } from '../session/line-codec.js'
import { type SessionEvent, type SessionHeader } from '../session/schema.js'
import { parseHeaderLine } from '../session/header-line.js'

/** Where a scan that does not start at the header starts. */
export interface TailStartPoint {
  offset: number
  seq: number
  header: SessionHeader
  headerBytes: number
}

export interface Defect {
  line: number // 1-based
  byteOffset: number
  reason: string
  hasNul: boolean
}

/** What one pass over a log found (docs/contract.md §6). It decides nothing; repair-plan.ts does. */
export interface LogScan {
  header: SessionHeader
  /** Raw bytes of line 1 including its `\n` (a fork copies the parent's event lines, not this). */
  headerBytes: number
  /** The valid prefix: events[i].seq === first seq + i (none kept with `keepEvents: false`). */
  events: SessionEvent[]
  /** How many valid events were read, kept or not. */
  eventCount: number
  /** The valid event with seq `markSeq`, when asked for and read: its type and the file offset just after its `\n` (a fork's seed end). */
  mark?: { type: string; end: number } | undefined
  /** Where the kept prefix ends: the first defect's offset, or the end of what was read. */
  validEnd: number
  /** Total bytes read. */
  size: number
  defect: Defect | undefined
  /** 1-based line number of the last complete line that parses as JSON with type `turn/end`. */
  commitLine: number | undefined
  /** Lines from the first defect on (a last line without `\n` counts). */
  droppedLines: number
  /** Complete, parseable `turn/end` lines from the first defect on. */
  droppedTurnEnds: number
  /**
   * Version 1: the first complete line after the first defect that fails its checksum and holds
   * no NUL byte (§16: damage wherever it lies). The log is refused: at the first defect when that
   * one refuses it by itself (§6: the first defect decides), else here.
   */
  damage: Defect | undefined
}

function lineDefectReason(buf: Buffer, start: number, end: number, complete: boolean): string | undefined {
  return !complete ? 'torn tail: the last line has no newline' : start === end ? 'blank line' : undefined
}

function hasNulByte(buf: Buffer, start: number, end: number): boolean {
  const at = buf.indexOf(0, start)
  return at !== -1 && at < end
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (err) {
    return { ok: false, message: (err as Error).message }
  }
}

function isTurnEnd(value: unknown): boolean {
  return typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'turn/end'
}

/**
 * Reads a log line by line (header first) and classifies every line by docs/contract.md §6.1–6.3. Throws
 * `E_FORMAT_UNSUPPORTED` or `E_CORRUPT` for a bad header; defects in event lines are returned.
 */
export async function scanLog(
  handle: FileHandle,
  context: {
    path: string
    sessionId?: string
    to?: number
    /**
     * Note the type and end offset of the valid event with this seq in `mark` (a fork point: with
     * `keepEvents: false`, what a fork needs of a parent of any size, §15.5).
     */
    markSeq?: number
    /**
     * Start at a line past the header (a tail, §15.1, or a range, §15.2): its byte offset and
     * seq, and the header already read. Lines before it are not read, so not checked (§12).
     */
    start?: TailStartPoint
    /** Stop once an event with this seq would be read, unless a defect was found before it. */
    untilSeq?: number
    /**
     * False: check every line but keep no event (a pass over a log of any size, §15.5; what an
     * open turn's closers need is followed through `onEvent` by an `OpenTurnTracker`).
     */
    keepEvents?: boolean
    /** Told each valid event line's bytes `buf[start, end)` and its event as it is read (§16 migrate, redact). */
    onEventLine?: (buf: Buffer, start: number, end: number, event: SessionEvent) => void
    /** Told each valid event as it is read (a pass that keeps none, `verify`); unlike `onEventLine`, the bytes may have been unsealed in place. */
    onEvent?: (event: SessionEvent) => void
    /** Awaited after each chunk's lines (see forEachLine). */
    afterChunk?: () => Promise<void>
    /** Bytes a read (default 1 MiB): a range read asks for about what its range holds. */
    chunkBytes?: number
  },
): Promise<LogScan> {
  const { path, start, untilSeq } = context
  let header: SessionHeader | undefined = start?.header
  let headerError: Error | undefined
  let headerBytes = start?.headerBytes ?? 0
  // Line numbers stay 1-based file lines only for a scan from the start; a tail counts from its
  // first line as line 2 + its seq (exact for an undamaged log: line i + 2 holds seq i).
  let lineNo = start ? start.seq + 1 : 0
  const firstSeq = start?.seq ?? 0
  let validEnd = start?.offset ?? 0
  const events: SessionEvent[] = []
  let sealed = start?.header.version === 1 // version 1: every line carries its checksum
  const keepEvents = context.keepEvents !== false
  const { onEventLine, onEvent, markSeq } = context
  let mark: { type: string; end: number } | undefined
  let count = 0 // valid events read (kept or not)
  let defect: Defect | undefined
  let commitLine: number | undefined
  let droppedLines = 0
  let droppedTurnEnds = 0
  let damage: Defect | undefined

  // Version 1: the lines of the chunk being visited whose checksum was checked before they were
  // decoded, their checksum field then turned into `}` and spaces in place, so that JSON.parse
  // reads the line's text as it is (no copy without the field: a tenth of a load's time).
  let unsealedIn: Buffer | undefined
  const unsealed: number[] = []
  let nextUnsealed = 0
  const beforeLines = (buf: Buffer, from: number, _to: number, newlines: readonly number[]) => {
    unsealedIn = buf
    unsealed.length = 0
    nextUnsealed = 0
    if (!sealed || onEventLine) return // line 1 not read yet, or a caller that wants the bytes as they are
    let s = from
    for (const nl of newlines) {
      if (checkLine(buf, s, nl) === 'ok') {
        unsealLineInPlace(buf, nl)
        unsealed.push(s)
      }
      s = nl + 1
    }
  }

  const size = await forEachLine(
    handle,
    (buf, start, end, offset, complete, decoded, oversized) => {
      lineNo++
      // Checked (and unsealed in place) before the chunk was decoded: parsed as it is.
      const preChecked = buf === unsealedIn && unsealed[nextUnsealed] === start
      if (preChecked) nextUnsealed++
      if (oversized !== undefined) {
        // No append writes such a line (§15.5) and no crash makes one without zeros: it is
        // damage wherever it lies, reported without holding it in memory.
        const reason = `a line of ${oversized} bytes, longer than the ${MAX_LINE_BYTES} a line may hold`
        if (lineNo === 1) {
          headerError = new SessionPersistenceCorruptionError(1, 0, reason, { path, sessionId: context.sessionId })
          return false
        }
        const hasNul = hasNulByte(buf, start, end)
        if (!hasNul) throw new SessionPersistenceCorruptionError(lineNo, offset, reason, { path, sessionId: context.sessionId })
        if (defect === undefined) {
          defect = { line: lineNo, byteOffset: offset, reason: `NUL bytes (blocks never synced before a crash); ${reason}`, hasNul }
          droppedLines = 1
        } else droppedLines++
        return
      }
      if (lineNo === 1) {
        try {
          header = parseHeaderLine(buf, start, end, complete, context)
        } catch (err) {
          headerError = err as Error
          return false
        }
        headerBytes = end - start + 1
        validEnd = headerBytes
        sealed = header.version === 1
        return
      }
      // Version 1 (§16): a complete line that fails its checksum and holds no NUL byte is damage
      // wherever it lies, past the commit boundary too: no crash leaves such a line.
      let checked = preChecked
      let unsealedHere = false
      if (sealed && complete && !preChecked) {
        const check = checkLine(buf, start, end)
        if (check !== 'ok') {
          if (!hasNulByte(buf, start, end)) {
            const reason = checksumReason(check)
            // The first defect: refused here. After one, the first defect may refuse the log
            // itself, at its own line: that is decided once the commit boundary is known.
            if (defect === undefined) throw new SessionPersistenceCorruptionError(lineNo, offset, reason, { path, sessionId: context.sessionId })
            damage ??= { line: lineNo, byteOffset: offset, reason, hasNul: false }
          }
        } else {
          checked = true
          // A line that spanned reads comes joined in a buffer of its own: unsealed there, it
          // parses without a copy of its text (a 64 MiB line, §15.5, held one more copy).
          if (decoded === undefined && !onEventLine && defect === undefined) {
            unsealLineInPlace(buf, end)
            unsealedHere = true
          }
        }
      }
      if (defect !== undefined) {
        droppedLines++
        // Only JSON text (valid UTF-8) can be a commit boundary: decoding invalid bytes with
        // replacement characters would make a damaged turn/end look committed.
        if (complete && start !== end && (decoded !== undefined || isUtf8(buf.subarray(start, end)))) {
          const parsed = parseJson(decoded ?? buf.toString('utf8', start, end))
          if (parsed.ok && isTurnEnd(parsed.value)) {
            commitLine = lineNo
            droppedTurnEnds++
          }
        }
        return
      }
      let reason = lineDefectReason(buf, start, end, complete)
      if (reason === undefined && sealed && !checked) reason = checksumReason(checkLine(buf, start, end) === 'missing' ? 'missing' : 'mismatch')
      let value: unknown
      if (reason === undefined) {
        if (decoded === undefined && !isUtf8(buf.subarray(start, end))) {
          reason = 'invalid UTF-8'
        } else {
          const text = decoded ?? buf.toString('utf8', start, end)
          const parsed = parseJson(sealed && !preChecked && !unsealedHere ? unsealText(text) : text)
          if (!parsed.ok) {
            reason = `not JSON: ${parsed.message}`
          } else {
            value = parsed.value
            // A sealed line carrying a `crc` of its own was not written by a writer (§16: reserved).
            reason = sealed && (value as { crc?: unknown } | null)?.crc !== undefined ? 'a reserved crc field inside the line' : envelopeProblem(value)
            if (reason === undefined) {
              const expected = firstSeq + count
              const seq = (value as SessionEvent).seq
              if (seq !== expected) reason = `seq ${seq} where ${expected} was expected`
            }
          }
        }
      }
      if (reason === undefined) {
        const event = value as SessionEvent
        if (untilSeq !== undefined && event.seq >= untilSeq) return false
        count++
        if (keepEvents) events.push(event)
        onEventLine?.(buf, start, end, event)
        onEvent?.(event)
        if (event.seq === markSeq) mark = { type: event.type, end: offset + end - start + 1 }
        validEnd = offset + end - start + 1
        if (event.type === 'turn/end') commitLine = lineNo
        if (untilSeq !== undefined && event.seq + 1 >= untilSeq) return false // the range is complete
        return
      }
      const hasNul = hasNulByte(buf, start, end)
      if (hasNul) reason = `NUL bytes (blocks never synced before a crash); ${reason}`
      defect = { line: lineNo, byteOffset: offset, reason, hasNul }
      droppedLines = 1
      if (complete && value !== undefined && isTurnEnd(value)) {
        commitLine = lineNo
        droppedTurnEnds = 1
      }
    },
    {
      decode: true,
      beforeLines,
      ...(context.to === undefined ? {} : { to: context.to }),
      ...(start ? { from: start.offset } : {}),
      ...(context.afterChunk ? { afterChunk: context.afterChunk } : {}),
      ...(context.chunkBytes ? { chunkBytes: context.chunkBytes } : {}),
    },
  )
  if (headerError) throw headerError
  if (!header) {
    throw new SessionPersistenceCorruptionError(1, 0, 'the file is empty: no header line', {
      path,
      sessionId: context.sessionId,
    })
  }

  return {
    header,
    headerBytes,
    events,
    eventCount: count,
    mark,
    validEnd,
    size,
    defect,
    commitLine,
    droppedLines,
    droppedTurnEnds,
    damage,
  }
}
