import { SessionPersistenceError } from '../errors.js'
import type { RawPageOptions, RawSessionStream } from '../persistence.js'
import type { SessionHeader } from '../session/schema.js'
import { forEachBlockForward } from './read-forward.js'
import { checkRawEventLine, checkRawHeaderLine, rawStreamPages } from '../session/raw-log.js'
import { parseRawPageOptions } from '../session/read-options.js'
import { planRepair } from './repair-plan.js'
import { readHeaderLine } from './read-session.js'
import { scanLog } from './scan-log.js'
import type { StoreContext } from './store-context.js'

/**
 * A log's exact lines as pages (§15.5), in memory bounded by a page: a first pass checks the
 * whole log as `inspect` does without keeping its events (committed damage rejects, a torn tail
 * ends the stream), a second hands out the lines up to where that pass found the valid prefix
 * ending. `size` bounds what is read (an instance's own live log: its acknowledged length).
 */
export async function openJsonlRawStream(
  ctx: StoreContext,
  id: string,
  path: string,
  size: () => number | undefined,
  options: RawPageOptions = {},
): Promise<RawSessionStream> {
  const page = parseRawPageOptions(options)
  const handle = await ctx.fs.open(path, 'r')
  let headerLine: string
  try {
    const { headerBytes } = await readHeaderLine(handle, path, id)
    const buf = Buffer.alloc(headerBytes - 1)
    await handle.read(buf, 0, buf.length, 0)
    headerLine = buf.toString('utf8')
  } finally {
    await handle.close()
  }
  async function* eventPages(): AsyncGenerator<readonly string[]> {
    const h = await ctx.fs.open(path, 'r')
    try {
      const limit = size()
      const scan = await scanLog(h, { path, sessionId: id, keepEvents: false, ...(limit === undefined ? {} : { to: limit }) })
      planRepair(scan, { path, sessionId: id, closeOpenTurn: false }) // committed damage: E_CORRUPT
      let lines: string[] = []
      let bytes = 0
      for await (const line of forEachBlockForward(h, scan.headerBytes, scan.validEnd)) {
        lines.push(line)
        bytes += line.length
        if (lines.length >= page.pageLines || bytes >= page.pageBytes) {
          yield lines
          lines = []
          bytes = 0
        }
      }
      if (lines.length > 0) yield lines
    } finally {
      await h.close()
    }
  }
  return { id, headerLine, eventPages: eventPages() }
}

/**
 * Checks a streamed raw log page by page as `importRaw` checks a whole one, writing each page
 * through `write`; resolves with the header and the number of event lines.
 */
export async function writeRawStream(
  log: RawSessionStream,
  write: (piece: Buffer) => Promise<void>,
): Promise<{ header: SessionHeader; eventLines: number }> {
  const pages = rawStreamPages(log)
  const header = checkRawHeaderLine(log.id, log.headerLine)
  await write(Buffer.from(`${log.headerLine}\n`))
  let n = 0
  for await (const lines of pages) {
    for (const line of lines) checkRawEventLine(log.id, line, n++, header.version)
    await write(Buffer.from(`${lines.join('\n')}\n`))
  }
  return { header, eventLines: n }
}
