import { TAIL_MARKER_TYPES, TailStart } from '../session/tail-start.js'
import type { FileHandle } from './fs/file-system.js'
import { forEachBlockBackward } from './read-back.js'
import { parseEventLine } from './read-session.js'
import { bisectSeq, type SeqPoint } from './seq-search.js'
import type { FormatVersion } from '../session/line-codec.js'

// The marker types as they stand in a line (a JSON string value), found by native searches of
// each block: three needles, each only until what it finds is known (the last turn's state, the
// compaction in force, the last request header). The value alone, not `"type":"…`: a line
// written by another tool (`"type": "turn/start"`, keys in another order) is found too. A type
// spelled with escapes (`"turn\/start"`) is not; the load checks the decision against the events
// it then scans and loads the whole log when they disagree (open-log.ts).
const TURN_MARKER = Buffer.from('"turn/')
const HISTORY_MARKER = Buffer.from('"history/')
const HEADER_MARKER = Buffer.from('"request/header"')
/**
 * The largest backward read: the search stops in the block that holds the decision, so a
 * smaller block wastes less past it (the compaction of a resume is often within 1 MiB).
 */
const MAX_BLOCK = 256 * 1024
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
  let afterTurnEnd: SeqPoint | undefined // the line after the turn/end that closed the last turn
  await forEachBlockBackward(handle, headerBytes, size, (block, offset) => {
    const starts = new Set<number>()
    // Each kind is searched only until it is known: older lines of that kind change nothing.
    const markers = [
      ...(finder.turnKnown ? [] : [TURN_MARKER]),
      ...(finder.compactionKnown ? [] : [HISTORY_MARKER]),
      ...(finder.headerKnown ? [] : [HEADER_MARKER]),
    ]
    for (const marker of markers) {
      for (let at = block.indexOf(marker); at !== -1; at = block.indexOf(marker, at + marker.length)) {
        starts.add(at > 0 ? block.lastIndexOf(10, at - 1) + 1 : 0)
      }
    }
    for (const start of [...starts].sort((a, b) => b - a)) {
      const end = block.indexOf(10, start)
      const event = parseEventLine(block.subarray(start, end), version)
      if (!event || !(TAIL_MARKER_TYPES as readonly string[]).includes(event.type)) continue
      newestMarker = Math.max(newestMarker, offset + start)
      offsets.set(event.seq, offset + start)
      const before = finder.compactionSeq
      const turnWasKnown = finder.turnKnown
      finder.feed(event)
      if (before === undefined && finder.compactionSeq !== undefined) compactionLine = offset + start
      if (!turnWasKnown && finder.turnKnown && event.type === 'turn/end') afterTurnEnd = { offset: offset + end + 1, seq: event.seq + 1 }
      if (finder.done) return false
    }
  }, MAX_BLOCK, FIRST_BLOCK)
  const firstSeq = finder.firstSeq
  if (firstSeq === undefined) return undefined
  // The scan begins right after the turn/end that closed the last turn when that lies before
  // firstSeq: the events it then reads hold every line that could reopen the turn (one the
  // search did not recognize), so the load's check sees it (open-log.ts). Usually the last turn
  // ends after firstSeq, or just before it (a compaction between turns keeps from itself).
  if (afterTurnEnd && afterTurnEnd.seq < firstSeq) return { firstSeq, start: afterTurnEnd, newestMarker }
  const exact = offsets.get(firstSeq)
  const start = exact !== undefined ? { offset: exact, seq: firstSeq } : await bisectSeq(handle, { offset: headerBytes, seq: 0 }, compactionLine, firstSeq, finder.compactionSeq, version === 1)
  return { firstSeq, start, newestMarker }
}
