import { TAIL_MARKER_TYPES, TailStart } from '../session/tail-start.js'
import type { FileHandle } from './fs/file-system.js'
import { forEachBlockBackward } from './read-back.js'
import { parseEventLine } from './read-session.js'
import { bisectSeq, type SeqPoint } from './seq-search.js'
import type { FormatVersion } from '../session/line-codec.js'

// The marker types as they stand in a line (a JSON string value), found by what they begin
// with: three searches of a block instead of five; the turn markers (the most frequent) only
// until the last turn's state is known, the others only until the compaction and the request
// header are (then nothing older of their kind can move firstSeq).
const TURN_MARKERS = Buffer.from('"turn/')
const OTHER_MARKERS = [Buffer.from('"history/'), Buffer.from('"request/header"')]
/** The first backward read: the markers of a resume are usually near the end of the log. */
const FIRST_BLOCK = 64 * 1024

export interface LogTail {
  /** Where the load starts (§15.1). */
  firstSeq: number
  /** A line start at or before `firstSeq`'s line, and its seq: where the forward scan begins. */
  start: SeqPoint
  /**
   * The offset of the newest marker line the decision used: a scan that finds a defect at or
   * before it cannot trust the decision (the line may be cut), and loads from the start instead.
   */
  newestMarker: number
}

/**
 * Finds where a load from the last compaction starts (§15.1) by reading the log backwards from
 * its end and parsing only the lines that hold a marker type (`turn/…`, `request/header`,
 * `history/…`), until the compaction in force, the last request header and the state of the
 * last turn are known. Undefined when no compaction is in force (a full load).
 */
export async function findLogTail(handle: FileHandle, headerBytes: number, size: number, version: FormatVersion): Promise<LogTail | undefined> {
  const finder = new TailStart()
  const offsets = new Map<number, number>() // seq → line start, for the marker lines seen
  let newestMarker = -1
  let compactionLine = -1
  await forEachBlockBackward(handle, headerBytes, size, (block, offset) => {
    const starts = new Set<number>()
    for (const marker of [...(finder.turnKnown ? [] : [TURN_MARKERS]), ...(finder.needsOnlyTurns ? [] : OTHER_MARKERS)]) {
      for (let at = block.indexOf(marker); at !== -1; at = block.indexOf(marker, at + marker.length)) {
        starts.add(at > 0 ? block.lastIndexOf(10, at - 1) + 1 : 0)
      }
    }
    for (const start of [...starts].sort((a, b) => b - a)) {
      const event = parseEventLine(block.subarray(start, block.indexOf(10, start)), version)
      if (!event || !(TAIL_MARKER_TYPES as readonly string[]).includes(event.type)) continue
      newestMarker = Math.max(newestMarker, offset + start)
      offsets.set(event.seq, offset + start)
      const before = finder.compactionSeq
      finder.feed(event)
      if (before === undefined && finder.compactionSeq !== undefined) compactionLine = offset + start
      if (finder.done) return false
    }
  }, undefined, FIRST_BLOCK)
  const firstSeq = finder.firstSeq
  if (firstSeq === undefined) return undefined
  const exact = offsets.get(firstSeq)
  const start = exact !== undefined ? { offset: exact, seq: firstSeq } : await bisectSeq(handle, { offset: headerBytes, seq: 0 }, compactionLine, firstSeq, finder.compactionSeq)
  return { firstSeq, start, newestMarker }
}
