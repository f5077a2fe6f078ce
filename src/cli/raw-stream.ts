import type { RawLogStreaming, RawPageOptions, SessionStore } from '../persistence.js'

// Moving a session's exact lines in memory bounded by a page (§15.5): the CLI streams when
// both backends implement `RawLogStreaming` and falls back to `readRaw`/`importRaw` otherwise.
export type { RawLogStreaming, RawPageOptions, RawSessionStream } from '../persistence.js'

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
