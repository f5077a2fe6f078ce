import { basename } from 'node:path'
import { isSessionPersistenceError, SessionPersistenceCorruptionError, SessionPersistenceError } from '../errors.js'
import { CRC_FIELD_BYTES, type FormatVersion, SealedLines, sealLine, unsealText } from '../session/line-codec.js'
import { LineBuffer } from '../session/line-buffer.js'
import { OpenTurnTracker } from '../session/closers.js'
import { MAX_LINE_BYTES } from '../session/prepare-batch.js'
import { headerLine, metaFromHeader } from '../session/meta.js'
import type { JsonValue, SessionEvent, SessionHeader } from '../session/schema.js'
import { isEnvelopeKey } from '../session/envelope.js'
import { setField } from '../session/as-object.js'
import { copyRange } from './copy-range.js'
import type { FileHandle } from './fs/file-system.js'
import type { BodyWriter } from './materialize.js'
import type { RepairReport } from '../persistence.js'
import { LOG_SUFFIX, uniqueToken } from './paths.js'
import { createHash } from 'node:crypto'
import { StringDecoder } from 'node:string_decoder'
import { forEachLine } from './read-lines.js'
import { readHeaderLine } from './read-session.js'
import { planRepair } from './repair-plan.js'
import { scanLog } from './scan-log.js'

// The operator's rewrites of a closed log (§16): migrate, redact and repair --truncate-at-damage.
// Each builds the new log as a body that `rewriteLog` writes beside the old one and renames over
// it; the caller holds the session's lock and has repaired the tail first.

/** Pieces of about this size go to the file at once. */
const WRITE_BYTES = 1 << 20

/** The JSON text of a stored line of a log of `version` (its checksum removed). */
function jsonOf(line: string, version: FormatVersion): string {
  return version === 1 ? unsealText(line) : line
}

/**
 * Refuses a line a rewrite would make longer than a line may be (§15.5: `append` refuses such an
 * event, and every reader reports a log holding one): the rewrite fails before anything is
 * replaced. `bytes` is the line's length without its `\n`.
 */
function assertLineFits(bytes: number, event: SessionEvent, id: string, path: string, outcome: string): void {
  if (bytes <= MAX_LINE_BYTES) return
  throw new SessionPersistenceError(
    'E_INVALID_EVENT',
    `event '${event.type}' (seq ${event.seq}) of ${basename(path)} would be rewritten as a line of ${bytes} bytes; a line holds at most ${MAX_LINE_BYTES} (64 MiB): ${outcome}`,
    { sessionId: id, path },
  )
}

/**
 * What a migration refuses of one valid event line `buf[start, end)` (the dry run as the real
 * one): an event version 1 cannot hold, a line its checksum would take past 64 MiB.
 */
export function assertMigratable(buf: Buffer, start: number, end: number, event: SessionEvent, id: string, path: string): void {
  assertSealable(event, id, path)
  assertLineFits(end - start + CRC_FIELD_BYTES, event, id, path, 'the log cannot be migrated and stays version 0')
}

/**
 * The line (with its `\n`) of an event a redaction rewrote, refused (`E_INVALID_EVENT`) when a
 * replacement longer than what it replaced made it outgrow 64 MiB: the plan refuses it as the
 * writing pass would, so a dry run says what the redaction will do.
 */
function redactedLine(event: SessionEvent, version: FormatVersion, id: string, path: string): string {
  let json: string
  try {
    json = JSON.stringify(event)
  } catch (err) {
    // Nested deeper than the engine serializes here (append's own check ran on a shallower stack).
    if (!(err instanceof RangeError)) throw err
    throw new SessionPersistenceError('E_NOT_JSON', `event '${event.type}' (seq ${event.seq}) of ${basename(path)} is nested too deeply to be written again (${err.message}): nothing was replaced`, { sessionId: id, path, cause: err })
  }
  const line = `${sealLine(json, version)}\n`
  if (line.length * 3 > MAX_LINE_BYTES) assertLineFits(Buffer.byteLength(line) - 1, event, id, path, 'nothing was replaced')
  return line
}

/**
 * Refuses an event that version 1 cannot hold: a version-0 log written before `crc` was reserved
 * (§16) may carry a top-level `crc` of its own, which a sealed line would hold twice and every
 * reader refuse. `E_INVALID_EVENT`, so that `migrate` leaves the log untouched in version 0.
 */
export function assertSealable(event: SessionEvent, id: string, path: string): void {
  if ((event as { crc?: unknown }).crc === undefined) return
  throw new SessionPersistenceError(
    'E_INVALID_EVENT',
    `event '${event.type}' (seq ${event.seq}) of ${basename(path)} has a top-level 'crc' field, reserved in version 1 (§16): the log cannot be migrated and stays version 0`,
    { sessionId: id, path },
  )
}

/**
 * The log as version 1 (§16), in one pass that also checks it as `load` does: the header
 * sealed, each valid event line sealed as it stands (its JSON text kept byte for byte), the
 * closers of an open turn after them. Damage is refused (`E_CORRUPT`: the body fails and its
 * file is removed); a torn tail is left out, as a load would cut it. `done` receives the
 * repair that the load would have made and the number of events.
 */
export function migratedBody(
  handle: FileHandle,
  path: string,
  id: string,
  header: SessionHeader,
  done: (result: { events: number; repair: Omit<RepairReport, 'persisted'> | undefined }) => void,
): BodyWriter {
  return async (write) => {
    const out = new SealedLines()
    out.addText(headerLine(metaFromHeader(header), 1))
    const openTurn = new OpenTurnTracker() // what the closers need, not the events
    const scan = await scanLog(handle, {
      path,
      sessionId: id,
      keepEvents: false,
      onEventLine: (buf, start, end, event) => {
        assertMigratable(buf, start, end, event, id, path) // as its dry run judges it
        out.add(buf, start, end)
        openTurn.add(event)
      },
      afterChunk: async () => {
        if (out.length >= WRITE_BYTES) await write(out.take())
      },
    })
    const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn: true, openTurn }) // committed damage: E_CORRUPT
    for (const closer of plan.closers) out.addText(`${sealLine(JSON.stringify(closer), 1)}\n`)
    await write(out.take())
    done({ events: scan.eventCount + plan.closers.length, repair: plan.report })
  }
}

/**
 * Where a LangGraph thread's structure is in the data of each event its adapter writes (the
 * shapes of src/adapters/langgraph/events.ts, named here: the core never loads the adapter),
 * which `redact` never touches (§16): what is not named is content. `true` is a field whose
 * whole value is structure, an object names the structural fields of an object, `[shape]` is
 * the shape of each item of an array. Structure is what identifies checkpoints, parents,
 * namespaces, tasks, channels and versions: the whole stored `checkpoint` (id, ts,
 * channel_versions, versions_seen), the metadata's `source`, `step` and `parents`, and of a
 * stored value its serializer `type` and its `base64` bytes (not text). A field the adapter
 * adds to its records is content until it is listed here (test/langgraph-hunt-redact checks).
 */
export type StructureShape = true | { readonly [field: string]: StructureShape } | readonly [StructureShape]

const STORED_TYPED: StructureShape = { type: true, base64: true }

/** LangGraph's channel of pending tasks (`TASKS` in @langchain/langgraph): its values are Sends. */
const TASKS_CHANNEL = '__pregel_tasks'

/** A stored value of the tasks channel: as any stored value, and inside its JSON each Send's `node` (`SEND_NODE`). */
const STORED_TASKS: StructureShape = { type: true, base64: true }

/** The shape of a Send as the serializer writes it (`{node, args, timeout?}`): its node is structure. */
const SEND_NODE: StructureShape = { node: true }

/**
 * Whether `parent[key]` is structure of a record the serializer itself writes, which names
 * what the value is read back as: a LangChain serializable (`lc: 1`, `type` constructor, secret
 * or not_implemented, `id` its class path) or a record of LangGraph's serializer (`lc: 2`, `type`
 * constructor, undefined or delta_snapshot; a constructor's `id` and `method`: `from` revives a
 * Uint8Array). Only the serializer's own shapes: an object of the user's that happens to have an
 * `lc` field is content, all of it.
 */
function serializerRecordField(parent: { [k: string]: JsonValue }, key: string | number): boolean {
  if (key !== 'type' && key !== 'id' && key !== 'method') return false
  const { lc, type, id } = parent
  const classPath = Array.isArray(id) && id.every((x) => typeof x === 'string')
  if (lc === 1) return key !== 'method' && classPath && (type === 'constructor' || type === 'secret' || type === 'not_implemented')
  if (lc !== 2) return false
  if (type === 'constructor') return classPath
  return key === 'type' && (type === 'undefined' || type === 'delta_snapshot')
}

/** The shape inside a stored value's JSON text: a Send's, or each Send's of an array, for the tasks channel. */
function embeddedShape(shape: StructureShape | undefined, inner: JsonValue): StructureShape | undefined {
  if (shape !== STORED_TASKS) return undefined
  return Array.isArray(inner) ? [SEND_NODE] : SEND_NODE
}

export const LANGGRAPH_STRUCTURE: { readonly [eventType: string]: StructureShape } = {
  'langgraph/checkpoint': {
    ns: true,
    id: true,
    parent: true,
    checkpoint: true,
    metadata: { source: true, step: true, parents: true },
    values: [{ channel: true, version: true, value: STORED_TYPED }],
  },
  'langgraph/writes': {
    ns: true,
    checkpoint: true,
    task: true,
    path: true,
    writes: [{ idx: true, channel: true, value: STORED_TYPED }],
  },
}

/**
 * How the strings of a value are read by a redaction: `plain` outside LangGraph's events (every
 * string is content); `langgraph` in the events the LangGraph adapter writes (`langgraph/…`),
 * whose stored values hold the serializer's JSON as text (`embeddedJson`) and whose serializer
 * structure is kept (`childShape`); `serialized` inside such a JSON text (no JSON text again).
 */
type ReadAs = 'plain' | 'langgraph' | 'serialized'

/**
 * The JSON value inside a LangGraph thread's stored value (`{type: 'json', text}`: the
 * serializer's JSON as a string, docs/adapters.md), in the events the LangGraph adapter writes
 * (`langgraph/…`), when its text parses. A pattern is applied to that value's strings, never to
 * the text, whose quotes and braces a pattern such as `password: .*` would cut through and leave
 * the thread unreadable; a value without a match keeps its text byte for byte, one with a match is
 * written back with `JSON.stringify` (a serializer that indents loses its indentation there).
 */
function embeddedJson(value: JsonValue, readAs: ReadAs): JsonValue | undefined {
  if (readAs !== 'langgraph' || value === null || typeof value !== 'object' || Array.isArray(value)) return undefined
  const keys = Object.keys(value)
  if (keys.length !== 2 || value.type !== 'json' || typeof value.text !== 'string') return undefined
  try {
    return JSON.parse(value.text) as JsonValue
  } catch {
    return undefined
  }
}

/** Where a LangGraph event's data keeps the thread's structure (LANGGRAPH_STRUCTURE), or none. */
function structureOf(event: SessionEvent, key: string): StructureShape | undefined {
  return key === 'data' && isLangGraphEvent(event) && Object.hasOwn(LANGGRAPH_STRUCTURE, event.type) ? LANGGRAPH_STRUCTURE[event.type] : undefined
}

/**
 * The structure shape of `parent[key]` (`true`: structure, never redacted). In LangGraph's
 * events the serializer's own structure is kept too: the `type` and `id` of an object with an
 * `lc` field (a LangChain serializable: `{lc, type: 'constructor', id: ['langchain_core', …],
 * kwargs}`), which name the class the value is read back as; an ordinary word (`messages`)
 * replaced there left the thread unreadable (E_CORRUPT 'Invalid namespace'). Its `kwargs` are content.
 */
function childShape(parent: JsonValue[] | { [k: string]: JsonValue }, key: string | number, readAs: ReadAs, shape: StructureShape | undefined): StructureShape | undefined {
  const isArray = Array.isArray(parent)
  if (readAs !== 'plain' && !isArray && serializerRecordField(parent, key)) return true
  if (shape === undefined || shape === true) return undefined
  // A stored value of the channel of pending tasks holds Sends: their `node` names a node of
  // the graph (`worker`, `tools`: ordinary words), which a replacement would send to no node.
  if (key === 'value' && !isArray && parent.channel === TASKS_CHANNEL && typeof shape === 'object' && !Array.isArray(shape) && (shape as { value?: StructureShape }).value === STORED_TYPED) {
    return STORED_TASKS
  }
  if (Array.isArray(shape)) return isArray ? (shape as readonly [StructureShape])[0] : undefined
  if (isArray) return undefined
  const fields = shape as { readonly [field: string]: StructureShape }
  return Object.hasOwn(fields, key) ? fields[key as string] : undefined
}

/**
 * Replaces every match of `pattern` in the content strings of `value` (never keys, never the
 * structure `shape` names); counts them. A walk with a stack of its own, not a call per level: an
 * event `append` accepted may be nested thousands deep (a redaction of one failed `E_IO`:
 * maximum call stack size exceeded).
 */
function redactValue(value: JsonValue, pattern: RegExp, replacement: string, count: { n: number }, readAs: ReadAs, shape: StructureShape | undefined): JsonValue {
  type Frame = { value: JsonValue; readAs: ReadAs; shape: StructureShape | undefined; set: (v: JsonValue) => void } | { after: () => void }
  let result: JsonValue = null
  const stack: Frame[] = [{ value, readAs, shape, set: (v) => (result = v) }]
  while (stack.length > 0) {
    const frame = stack.pop()!
    if ('after' in frame) {
      frame.after()
      continue
    }
    const { value: v, readAs: as, shape: sh, set } = frame
    if (sh === true) {
      set(v) // the thread's structure: kept as it is
      continue
    }
    const inner = embeddedJson(v, as)
    if (inner !== undefined) {
      // Its text written again only when the value it holds had a match (the `after` runs once
      // the inner value's whole walk is done: it is on the stack below it).
      const before = count.n
      let redacted: JsonValue = null
      stack.push({
        after: () => {
          if (count.n === before) return set(v)
          const out: { [k: string]: JsonValue } = {}
          for (const [k, x] of Object.entries(v as { [k: string]: JsonValue })) setField(out, k, k === 'text' ? JSON.stringify(redacted) : x)
          set(out)
        },
      })
      stack.push({ value: inner, readAs: 'serialized', shape: embeddedShape(sh, inner), set: (x) => (redacted = x) })
    } else if (typeof v === 'string') {
      set(
        v.replace(pattern, () => {
          count.n++
          return replacement
        }),
      )
    } else if (Array.isArray(v)) {
      const out: JsonValue[] = new Array<JsonValue>(v.length)
      set(out)
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i]!, readAs: as, shape: childShape(v, i, as, sh), set: (x) => (out[i] = x) })
    } else if (v !== null && typeof v === 'object') {
      const out: { [k: string]: JsonValue } = {}
      set(out)
      const entries = Object.entries(v)
      // Popped in order, so the keys keep theirs.
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, x] = entries[i]!
        stack.push({ value: x, readAs: as, shape: childShape(v, k, as, sh), set: (y) => setField(out, k, y) })
      }
    } else set(v)
  }
  return result
}

/**
 * An event with every match of `pattern` in its content (`data` and extra fields, never the
 * envelope nor any key, nor a LangGraph thread's structure) replaced, and how many there were.
 */
export function redactEvent(event: SessionEvent, pattern: RegExp, replacement: string): { event: SessionEvent; matches: number } {
  const count = { n: 0 }
  const out: Record<string, unknown> = {}
  const readAs: ReadAs = isLangGraphEvent(event) ? 'langgraph' : 'plain'
  for (const [k, v] of Object.entries(event)) {
    setField(out, k, isEnvelopeKey(k) || v === undefined ? v : redactValue(v as JsonValue, pattern, replacement, count, readAs, structureOf(event, k)))
  }
  return { event: out as SessionEvent, matches: count.n }
}

/**
 * Counts the matches `redactValue` would replace in `value`, building nothing.
 * A pattern that matches no text but a place (`\b`, a lookahead) would insert the replacement
 * there: a redaction replaces text, never adds it (`E_CONFIG`).
 */
function countInValue(value: JsonValue, pattern: RegExp, seq: number, readAs: ReadAs, shape: StructureShape | undefined): number {
  let n = 0
  // A stack of its own, as redactValue's: however deep the event.
  const stack: [JsonValue, ReadAs, StructureShape | undefined][] = [[value, readAs, shape]]
  while (stack.length > 0) {
    const [v, as, sh] = stack.pop()!
    if (sh === true) continue
    const inner = embeddedJson(v, as)
    if (inner !== undefined) stack.push([inner, 'serialized', embeddedShape(sh, inner)])
    else if (typeof v === 'string') {
      for (const m of v.matchAll(pattern)) {
        if (m[0] === '') {
          throw new SessionPersistenceError('E_CONFIG', `redact: the pattern ${pattern} matches an empty string in event seq ${seq}: a redaction replaces text, it never inserts any`)
        }
        n++
      }
    } else if (Array.isArray(v)) v.forEach((x, i) => stack.push([x, as, childShape(v, i, as, sh)]))
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) stack.push([x, as, childShape(v, k, as, sh)])
  }
  return n
}

/** An event the LangGraph adapter writes (`langgraph/checkpoint`, `langgraph/writes`, …). */
function isLangGraphEvent(event: SessionEvent): boolean {
  return event.type.startsWith('langgraph/')
}

/** The matches `redactEvent` would replace in an event. */
function countInEvent(event: SessionEvent, pattern: RegExp): number {
  let n = 0
  const readAs: ReadAs = isLangGraphEvent(event) ? 'langgraph' : 'plain'
  for (const [k, v] of Object.entries(event)) if (!isEnvelopeKey(k) && v !== undefined) n += countInValue(v as JsonValue, pattern, event.seq, readAs, structureOf(event, k))
  return n
}

/** The bytes searched at a time for matches in what a repair cuts; each piece also holds the last CUT_OVERLAP of the one before. */
const CUT_PIECE = 1 << 20
const CUT_OVERLAP = 64 * 1024

const JSON_ESCAPES: { readonly [c: string]: string } = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }

/**
 * `text` with its JSON string escapes decoded (`\"`, `\\`, `\n`, `\u0001`, …) wherever they are:
 * the cut bytes are a torn line, which may end mid-string, so where its strings begin and end is
 * not known (best effort: an escape outside a string is decoded too, a bad one kept as it is).
 * An escape that `text` may end in the middle of is left in `rest` for the next piece.
 */
function decodeJsonEscapes(text: string, last: boolean): { decoded: string; rest: string } {
  let decoded = ''
  let from = 0
  for (let at = text.indexOf('\\'); at !== -1; at = text.indexOf('\\', from)) {
    decoded += text.slice(from, at)
    const c = text[at + 1]
    const hex = c === 'u' ? text.slice(at + 2, at + 6) : ''
    if (!last && (c === undefined || (c === 'u' && hex.length < 4))) return { decoded, rest: text.slice(at) }
    if (c !== undefined && Object.hasOwn(JSON_ESCAPES, c)) {
      decoded += JSON_ESCAPES[c]
      from = at + 2
    } else if (/^[0-9a-fA-F]{4}$/.test(hex)) {
      decoded += String.fromCharCode(parseInt(hex, 16))
      from = at + 6
    } else {
      decoded += '\\'
      from = at + 1
    }
  }
  return { decoded: decoded + text.slice(from), rest: '' }
}

/**
 * The matches of `pattern` in one text of the cut bytes, read a piece at a time: each piece is
 * searched with the last CUT_OVERLAP of the one before (a match that ends inside that overlap was
 * counted with the piece before). A match of an empty string is refused as `countInValue`
 * refuses one (`E_CONFIG`): the replacement would be inserted, and the cut decided by it.
 */
class CutMatches {
  #carry = ''
  n = 0
  constructor(private readonly pattern: RegExp) {}
  add(piece: string): void {
    const text = this.#carry + piece
    for (const m of text.matchAll(this.pattern)) {
      if (m[0] === '') {
        throw new SessionPersistenceError('E_CONFIG', `redact: the pattern ${this.pattern} matches an empty string in the bytes a load's repair would cut: a redaction replaces text, it never inserts any`)
      }
      if (m.index + m[0].length > this.#carry.length) this.n++
    }
    this.#carry = text.slice(-CUT_OVERLAP)
  }
}

/**
 * The matches of `pattern` in the bytes of the file from `from` to its end, read as UTF-8 text
 * (NUL bytes and all), a piece at a time: memory is a piece whatever the length. Searched twice:
 * as the bytes are, and with their JSON string escapes decoded, since a secret holding a quote,
 * a backslash, a newline or a tab is escaped there (`my\"pw`) and a pattern for the secret
 * (`my"pw`) would find nothing in the raw text; the count is the larger of the two. A match
 * longer than CUT_OVERLAP that crosses a piece boundary is missed; the count is what decides
 * whether the log is rewritten, and is reported, not exact for matches that overlap a boundary.
 */
async function countInBytes(handle: FileHandle, from: number, pattern: RegExp): Promise<number> {
  const end = (await handle.stat()).size
  const decoder = new StringDecoder('utf8')
  const raw = new CutMatches(pattern)
  const unescaped = new CutMatches(pattern)
  let rest = '' // an escape a piece ended in the middle of
  const buf = Buffer.allocUnsafe(Math.min(CUT_PIECE, Math.max(1, end - from)))
  try {
    for (let at = from; at < end; ) {
      const got = await handle.read(buf, 0, Math.min(buf.length, end - at), at)
      if (got === 0) break
      at += got
      const piece = decoder.write(buf.subarray(0, got))
      raw.add(piece)
      const decoded = decodeJsonEscapes(rest + piece, false)
      rest = decoded.rest
      unescaped.add(decoded.decoded)
    }
    const tail = decodeJsonEscapes(rest + decoder.end(), true).decoded
    if (tail !== '') unescaped.add(tail)
  } finally {
    pattern.lastIndex = 0
  }
  return Math.max(raw.n, unescaped.n)
}

/** What the checking pass of a redaction found (§16): the log as a load would repair it, and its matches. */
export interface RedactionPlan {
  /** Matches in the bytes the repair cuts (a torn tail; zeros and what follows them): no event holds them. */
  cutMatches: number
  header: SessionHeader
  headerBytes: number
  /** The valid event lines end here: the new log keeps `[headerBytes, keepBytes)`, a torn tail left out. */
  keepBytes: number
  /** The valid event lines (seqs 0 … eventCount - 1, one a line). */
  eventCount: number
  /** What a load would append to close an open final turn. */
  closers: SessionEvent[]
  /** The repair a load would make (a torn tail cut, closers), made in the new log only. */
  repair: Omit<RepairReport, 'persisted'> | undefined
  /** The time of the last event, closers included (the record's time is never before it). */
  lastTime: number
  matches: number
  /** The seqs of the events (closers included) that hold a match, ascending. */
  seqs: number[]
}

/**
 * The checking pass of a redaction (§16): the log read once as `load` reads it, keeping no event
 * (an open turn followed for its closers), each valid event's matches counted as it is read.
 * Damage is refused (`E_CORRUPT`), nothing written; a torn tail and an open turn are planned as
 * a load would repair them, their closers counted too. Memory: a chunk, the longest line, an
 * open turn's pending calls and the seqs that matched.
 */
export async function planRedaction(handle: FileHandle, path: string, id: string, pattern: RegExp, replacement: string): Promise<RedactionPlan> {
  const { version } = (await readHeaderLine(handle, path, id)).header
  let matches = 0
  const seqs: number[] = []
  let lastTime: number | undefined
  const openTurn = new OpenTurnTracker()
  const scan = await scanLog(handle, {
    path,
    sessionId: id,
    keepEvents: false,
    onEvent: (event) => {
      // The scan has checked the line (its checksum, JSON and envelope) and parsed it.
      openTurn.add(event)
      const n = countInEvent(event, pattern)
      lastTime = event.time
      if (n > 0) {
        matches += n
        seqs.push(event.seq)
        // A replacement longer than what it replaces grows the line: refused now, as the writing pass would.
        redactedLine(redactEvent(event, pattern, replacement).event, version, id, path)
      }
    },
  })
  const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn: true, openTurn }) // committed damage: E_CORRUPT
  for (const closer of plan.closers) {
    const n = countInEvent(closer, pattern)
    if (n > 0) {
      matches += n
      seqs.push(closer.seq)
      redactedLine(redactEvent(closer, pattern, replacement).event, version, id, path) // as the writing pass judges it
    }
  }
  // What the repair cuts is no event, but it is on disk: a secret in a torn tail (or after zeros)
  // would outlive a redaction that found no match in the events and so rewrote nothing.
  const cutMatches = plan.report && plan.report.droppedBytes > 0 ? await countInBytes(handle, plan.keepBytes, pattern) : 0
  const recordTime = plan.closers.at(-1)?.time ?? lastTime ?? scan.header.createdAt
  // The record a rewrite ends with holds the replacement and every seq that matched: it may
  // outgrow a line where no event does. Judged here, so a dry run refuses what the run refuses.
  if (matches + cutMatches > 0) {
    const record = redactionRecord({ eventCount: scan.eventCount, closers: plan.closers, lastTime: recordTime, seqs, cutMatches }, matches, replacement, Date.now())
    redactedLine(record, version, id, path)
  }
  return {
    cutMatches,
    header: scan.header,
    headerBytes: scan.headerBytes,
    keepBytes: plan.keepBytes,
    eventCount: scan.eventCount,
    closers: plan.closers,
    repair: plan.report,
    lastTime: recordTime,
    matches,
    seqs,
  }
}

/**
 * The ignorable `log/redacted` event a redaction ends with (§16): when, how many matches and
 * which seqs, never the matched text; its seq follows the events and closers. One builder for
 * the plan (which judges its size) and the writing pass.
 */
function redactionRecord(
  plan: Pick<RedactionPlan, 'eventCount' | 'closers' | 'lastTime' | 'seqs' | 'cutMatches'>,
  matches: number,
  replacement: string,
  now: number,
): SessionEvent {
  return {
    seq: plan.eventCount + plan.closers.length,
    type: 'log/redacted',
    time: Math.max(plan.lastTime, now),
    ignorable: true,
    // Matches in the cut bytes (a torn tail) are gone with them: said, never shown.
    data: { at: now, matches, seqs: plan.seqs, replacement, ...(plan.cutMatches > 0 ? { cutMatches: plan.cutMatches } : {}) },
  }
}

/**
 * The writing pass of a redaction (§16), after `planRedaction`: the header, the valid event
 * lines (a line without a match keeps its bytes: line i holds seq i, so only the lines of the
 * planned seqs are parsed and rewritten, sealed in the log's version), the closers a load would
 * append (redacted too), then an ignorable `log/redacted` event recording when, how many
 * matches and which seqs, never the matched text. `done` receives that event. A log that does
 * not read back as planned (changed under the lock) fails the body: nothing is replaced.
 */
export function redactedBody(
  handle: FileHandle,
  plan: RedactionPlan,
  options: { path: string; pattern: RegExp; replacement: string; now: number; done: (record: SessionEvent) => void },
): BodyWriter {
  const { path, pattern, replacement } = options
  const { header, seqs } = plan
  const version = header.version
  const changed = (why: string) => new Error(`the log changed while it was redacted (${why}): nothing was replaced`)
  return async (write) => {
    const out = new LineBuffer(WRITE_BYTES * 2)
    out.addText(headerLine(metaFromHeader(header), version))
    let seq = 0 // line i after the header holds seq i (the plan's pass checked it)
    let next = 0 // the next planned seq
    let matches = 0
    const lineOf = (event: SessionEvent): string => redactedLine(event, version, plan.header.id, path)
    const redactLine = (json: string): string => {
      const event = JSON.parse(json) as SessionEvent
      const redacted = redactEvent(event, pattern, replacement)
      if (event.seq !== seq || redacted.matches === 0) throw changed(`seq ${seq}`)
      matches += redacted.matches
      return lineOf(redacted.event)
    }
    let failure: Error | undefined
    await forEachLine(
      handle,
      (buf, start, end, _offset, complete) => {
        if (!complete) {
          failure = changed('a line without its newline')
          return false
        }
        try {
          if (seq === seqs[next]) {
            out.addText(redactLine(jsonOf(buf.toString('utf8', start, end), version)))
            next++
          } else out.addLine(buf, start, end)
        } catch (err) {
          failure = err instanceof SyntaxError ? changed(`seq ${seq}`) : (err as Error)
          return false
        }
        seq++
      },
      {
        from: plan.headerBytes,
        to: plan.keepBytes,
        afterChunk: async () => {
          if (out.length >= WRITE_BYTES) await write(out.take())
        },
      },
    )
    if (failure) throw failure
    if (seq !== plan.eventCount) throw changed(`${seq} event lines where ${plan.eventCount} were read`)
    for (const closer of plan.closers) {
      if (closer.seq === seqs[next]) {
        const redacted = redactEvent(closer, pattern, replacement)
        matches += redacted.matches
        out.addText(lineOf(redacted.event))
        next++
      } else out.addText(`${sealLine(JSON.stringify(closer), version)}\n`)
      seq++
    }
    if (matches !== plan.matches || next !== seqs.length) throw changed(`${matches} matches where ${plan.matches} were counted`)
    const record = redactionRecord(plan, matches, replacement, options.now)
    // It lists every seq that matched: a log with millions of them would outgrow a line too (the
    // plan refused it already, as this judges it).
    out.addText(lineOf(record))
    await write(out.take())
    options.done(record)
  }
}

export interface DamageCut {
  /** 1-based line and file offset of the first damaged line. */
  line: number
  byteOffset: number
  reason: string
}

/** Where a log is damaged: the first `E_CORRUPT` a full read meets (a header is never cut), or undefined. */
export async function findDamage(handle: FileHandle, path: string, id: string): Promise<DamageCut | undefined> {
  try {
    const scan = await scanLog(handle, { path, sessionId: id, keepEvents: false })
    planRepair(scan, { path, sessionId: id, closeOpenTurn: false })
    return undefined
  } catch (err) {
    if (!isSessionPersistenceError(err, 'E_CORRUPT')) throw err
    const { line, byteOffset, reason } = err as SessionPersistenceCorruptionError
    if (line <= 1) {
      throw new SessionPersistenceError('E_CORRUPT', `the header of session '${id}' is damaged (${reason}): there is nothing before it to keep`, { sessionId: id, path, cause: err })
    }
    return { line, byteOffset, reason }
  }
}

/**
 * The name the whole damaged log is kept under, beside it: a dot name, never listed nor loaded.
 * It holds the log's own name while that fits in a file name (255 bytes), else a hash of it, so
 * no valid id can make it fail (§3.2); `log/truncated` records it either way.
 */
export function keptAsideName(path: string): string {
  const name = basename(path)
  const plain = `.damaged-${uniqueToken()}-${name}`
  if (Buffer.byteLength(plain) <= 255) return plain
  return `.damaged-${uniqueToken()}-${createHash('sha256').update(name).digest('hex').slice(0, 32)}${LOG_SUFFIX}`
}

/**
 * The log cut at its first damaged line (§16): the valid prefix before it (what a load keeps of
 * it, a torn tail in it cut as a load cuts it), the closers of an open turn, then an ignorable
 * `log/truncated` event recording where it cut and where the whole log was kept.
 */
export async function truncatedBody(
  handle: FileHandle,
  path: string,
  id: string,
  cut: DamageCut,
  keptAt: string,
  now: number,
  fileSize: number,
): Promise<{ body: BodyWriter; cut: DamageCut; kept: number; closers: SessionEvent[]; record: SessionEvent }> {
  const openTurn = new OpenTurnTracker() // what the closers need, not the events
  const scan = await scanLog(handle, { path, sessionId: id, to: cut.byteOffset, keepEvents: false, onEvent: (event) => openTurn.add(event) })
  const plan = planRepair(scan, { path, sessionId: id, closeOpenTurn: true, openTurn })
  // The prefix before the damage may itself end in what a load cuts (a torn or zeroed line
  // before a later damaged one): the log is then cut there, and that is where it says it cut.
  const at: DamageCut = plan.keepBytes < cut.byteOffset && scan.defect ? { line: scan.defect.line, byteOffset: scan.defect.byteOffset, reason: scan.defect.reason } : cut
  const version = scan.header.version
  const last = openTurn.last()
  const { closers } = plan
  const record: SessionEvent = {
    seq: scan.eventCount + closers.length,
    type: 'log/truncated',
    time: Math.max(closers.at(-1)?.time ?? last?.time ?? scan.header.createdAt, now),
    ignorable: true,
    data: { at: now, line: at.line, byteOffset: at.byteOffset, reason: at.reason, droppedBytes: fileSize - plan.keepBytes, keptAt },
  }
  const keep = plan.keepBytes
  const tail = [...closers, record].map((e) => `${sealLine(JSON.stringify(e), version)}\n`).join('')
  const body: BodyWriter = async (write) => {
    await copyRange(handle, path, 0, keep, write)
    await write(Buffer.from(tail, 'utf8'))
  }
  return { body, cut: at, kept: scan.eventCount, closers, record }
}

