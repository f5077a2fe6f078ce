import { open } from 'node:fs/promises'
import { StringDecoder } from 'node:string_decoder'
import { ERROR_CODES, SessionPersistenceError } from '../errors.js'
import type { ListProblem, SessionListing } from '../persistence.js'
import type { Io } from './commands.js'
import { MarkdownWriter, markdownHeader } from './markdown.js'
import type { OpenedRoot } from './open-root.js'
import { rawLinePages } from './raw-stream.js'
import { shown, type Style } from './render.js'
import { fileSink, ioSink, refuseStoreTarget, type Sink } from './sink.js'
import { INSPECT_MAX_BYTES, openSessionView, type SessionView, type ViewRange } from './session-view.js'
import { repairNote, transcriptHeader, TranscriptWriter } from './transcript.js'

/** The events `show` prints when a range is given: the last n, or `fromSeq <= seq < toSeq`. */
export type ShowPage = ViewRange

const RAW_CHUNK = 1024 * 1024

/** A session id as resolved, and its listing (the root is listed once: to resolve it). */
type Listed = { id: string; listing: SessionListing | undefined; problem?: ListProblem }

/** The stored text of a log, streamed: a file's bytes as they are (torn tail included), or a backend's lines. */
async function writeRaw(root: OpenedRoot, { id, listing: found, problem }: Listed, sink: Sink): Promise<void> {
  if (!found) {
    // A log the listing reported (a damaged or unsupported header): its own code, as the other views give.
    const code = ERROR_CODES.find((c) => c === problem?.code)
    if (problem && code) throw new SessionPersistenceError(code, problem.message, { sessionId: id, path: problem.path })
    throw new SessionPersistenceError('E_NOT_FOUND', `no listable session '${id}' under ${root.name}`, { sessionId: id })
  }
  if (found.location.kind === 'jsonl') {
    const handle = await open(found.location.path, 'r')
    try {
      const decoder = new StringDecoder('utf8') // a character split between two chunks stays whole
      const buffer = Buffer.alloc(RAW_CHUNK)
      for (;;) {
        const { bytesRead } = await handle.read(buffer, 0, RAW_CHUNK, null)
        if (bytesRead === 0) break
        sink.write(decoder.write(buffer.subarray(0, bytesRead)))
        await sink.flush()
      }
      sink.write(decoder.end())
    } finally {
      await handle.close()
    }
    return
  }
  for await (const page of rawLinePages(root.store, id)) {
    for (const line of page) sink.write(`${line}\n`)
    await sink.flush()
  }
}

/**
 * `show`: the whole session, or a range of it (`--last`, `--from`/`--to`), as a transcript or
 * as JSON, written page by page: memory stays that of a page whatever the log's size.
 */
export async function show(root: OpenedRoot, io: Io, target: Listed, opts: { json: boolean; raw: boolean; page: ShowPage | undefined }): Promise<number> {
  const sink = ioSink(io)
  try {
    if (opts.raw) await writeRaw(root, target, sink)
    else {
      const view = await openSessionView(root.store, target.id, { sizeBytes: target.listing?.sizeBytes, range: opts.page })
      if (opts.json) await writeJson(view, sink)
      else await writeTranscript(view, io.style, sink, opts.page)
    }
  } finally {
    await sink.close()
  }
  return 0
}

/** `export`: the whole session as Markdown or JSON, to stdout or a file, page by page. */
export async function exportSession(root: OpenedRoot, io: Io, target: Listed, opts: { format: 'md' | 'json'; out: string | undefined }): Promise<number> {
  const location = target.listing?.location
  // Judged before the session is read (a refusal reads nothing); the opened file is held to it.
  const judged = opts.out ? await refuseStoreTarget(opts.out, root.directory, location?.kind === 'jsonl' ? location.path : undefined) : undefined
  const view = await openSessionView(root.store, target.id, { sizeBytes: target.listing?.sizeBytes })
  const sink = opts.out ? await fileSink(opts.out, judged) : ioSink(io)
  try {
    if (opts.format === 'json') await writeJson(view, sink)
    else await writeMarkdown(view, sink)
  } finally {
    await sink.close()
  }
  if (opts.out) io.err(`wrote ${shown(opts.out, true)}\n`)
  return 0
}

/** What a view's header says beyond the session itself: the repair, or which seqs a range shows. */
function viewNotes(view: SessionView, style: Style, page: ShowPage | undefined): string[] {
  if (page !== undefined) {
    const end = view.firstSeq + view.count
    if (view.count > 0) return [style.dim(`showing seqs ${view.firstSeq} to ${end - 1} of ${view.length} event(s)`)]
    if ('last' in page || view.length === 0) return [style.dim(`showing no events: the session has ${view.length} event(s)`)]
    return [style.dim(`showing no events: seq ${page.fromSeq} is past the end (${view.length} event(s), seqs 0 to ${view.length - 1})`)]
  }
  if (view.repair) return [repairNote(view.repair, style)]
  if (view.closers.length > 0) {
    return [
      style.yellow(
        `needs repair: the last turn is open; ${view.closers.length} closing event(s) would be written (a torn tail is not looked for in a log over ${INSPECT_MAX_BYTES / 1024 / 1024} MiB: \`session-jsonl verify\` checks it)`,
      ),
    ]
  }
  return []
}

async function writeTranscript(view: SessionView, style: Style, sink: Sink, page: ShowPage | undefined): Promise<void> {
  const emit = (line: string) => sink.write(`${line}\n`)
  for (const line of transcriptHeader(view.meta, style, viewNotes(view, style, page))) emit(line)
  const closers = { seqs: new Set(view.closers.map((c) => c.seq)), persisted: view.repair?.persisted ?? false }
  const writer = new TranscriptWriter({ style, marks: view.marks, closers, emit })
  for await (const events of view.pages()) {
    for (const e of events) writer.event(e)
    await sink.flush()
  }
  writer.end()
}

async function writeMarkdown(view: SessionView, sink: Sink): Promise<void> {
  const writer = new MarkdownWriter({ marks: view.marks, emit: (text) => sink.write(text) })
  writer.lines(markdownHeader(view.meta, view.count))
  for await (const events of view.pages()) {
    for (const e of events) writer.event(e)
    await sink.flush()
  }
  writer.end()
}

const indent = (json: string, by: string) => json.replace(/\n/g, `\n${by}`)

/**
 * JSON of a view: `inspect`'s result for a log small enough to inspect; otherwise what `read`
 * returns for the range (`{meta, events, firstSeq, length}`: the stored events, no closers),
 * written event by event.
 */
async function writeJson(view: SessionView, sink: Sink): Promise<void> {
  if (view.inspected) {
    sink.write(`${JSON.stringify(view.inspected, null, 2)}\n`)
    return
  }
  sink.write(`{\n  "meta": ${indent(JSON.stringify(view.meta, null, 2), '  ')},\n  "events": [`)
  let first = true
  for await (const events of view.pages()) {
    for (const e of events) {
      if (e.seq >= view.length) continue // a closer: not stored
      sink.write(`${first ? '' : ','}\n    ${indent(JSON.stringify(e, null, 2), '    ')}`)
      first = false
    }
    await sink.flush()
  }
  sink.write(`${first ? '' : '\n  '}],\n  "firstSeq": ${view.firstSeq},\n  "length": ${view.length}\n}\n`)
}
