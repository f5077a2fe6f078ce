import type { SessionStore } from '../persistence.js'

// Moving a session's exact lines in memory bounded by a page (§15.5). `RawLogTransfer`'s
// `readRaw`/`importRaw` hold every line of a log at once; a backend that also has the two
// methods below lets `copy` (and `show --raw` of a PostgreSQL root) move a log of any size. The
// CLI uses them when both ends have them and falls back to `readRaw`/`importRaw` otherwise.
// These declarations are the CLI's request to the backends; they belong beside
// `RawLogTransfer` in src/persistence.ts once a backend implements them.

/** A stored session's exact lines, handed out page by page. */
export interface RawSessionStream {
  readonly id: string
  /** The header line, without its `\n`. */
  readonly headerLine: string
  /**
   * The valid event lines in seq order, without `\n`, in pages of at most `pageLines` lines and
   * about `pageBytes` bytes (a longer line is a page of its own). It can be iterated once; it
   * ends at the last valid line stored when the iteration started (a torn tail is left out, no
   * closers are added) and rejects (`E_CORRUPT` with line and byte) at damage. It holds no file
   * or connection until iterated, and releases it when the iteration ends or is abandoned.
   */
  readonly eventPages: AsyncIterable<readonly string[]>
}

export interface RawPageOptions {
  pageLines?: number
  pageBytes?: number
}

/** The streaming counterpart of `RawLogTransfer`. */
export interface RawLogStreaming {
  /**
   * Opens `id` without a lock: resolves once the header is read and checked (`E_NOT_FOUND`,
   * `E_CORRUPT`, `E_FORMAT_UNSUPPORTED` as `readRaw`), before any event line is read.
   */
  openRawStream(id: string, options?: RawPageOptions): Promise<RawSessionStream>
  /**
   * `importRaw` page by page, holding one page at a time: each line is checked as `importRaw`
   * checks it (envelope, seqs from 0 without a gap), the lines are written where no reader
   * sees them, and the session appears, durably and under its lock, only when the last page
   * is in (`E_EXISTS` if the id is stored by then). A rejection of `eventPages` or any failure
   * stores nothing and leaves nothing behind. Resolves with the number of event lines stored.
   */
  importRawStream(log: RawSessionStream): Promise<{ eventLines: number }>
}

/** How the CLI pages raw lines: a thousand lines or 4 MiB, whichever comes first. */
export const RAW_PAGE: Required<RawPageOptions> = { pageLines: 1_000, pageBytes: 4 * 1024 * 1024 }

/** Whether a backend can stream raw lines (both methods present). */
export function streamsRaw(store: SessionStore): store is SessionStore & RawLogStreaming {
  const s = store as Partial<RawLogStreaming>
  return typeof s.openRawStream === 'function' && typeof s.importRawStream === 'function'
}

/**
 * Copies one session's exact lines from `from` to `to`: streamed when both backends stream,
 * else whole through `readRaw`/`importRaw`. Resolves with the number of event lines copied.
 */
export async function transferRaw(from: SessionStore, to: SessionStore, id: string): Promise<number> {
  if (streamsRaw(from) && streamsRaw(to)) return (await to.importRawStream(await from.openRawStream(id, RAW_PAGE))).eventLines
  const raw = await from.readRaw(id)
  await to.importRaw(raw)
  return raw.eventLines.length
}

/** A session's stored lines (header first), each without its `\n`, in pages. */
export async function* rawLinePages(store: SessionStore, id: string): AsyncGenerator<readonly string[]> {
  if (streamsRaw(store)) {
    const log = await store.openRawStream(id, RAW_PAGE)
    yield [log.headerLine]
    yield* log.eventPages
    return
  }
  const raw = await store.readRaw(id)
  yield [raw.headerLine, ...raw.eventLines]
}
