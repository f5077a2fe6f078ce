import type { RawPageOptions, RawSessionStream } from '../persistence.js'
import type { SessionHeader } from '../session/schema.js'
import type { FileHandle } from './fs/file-system.js'
import { checkRawEventLine, checkRawStreamHeader, claimRawPages, rawPagesOnce, rawStreamPages } from '../session/raw-log.js'
import { ioError, SessionPersistenceError } from '../errors.js'
import { errno } from './errno.js'
import { parseRawPageOptions } from '../session/read-options.js'
import { copyRange } from './copy-range.js'
import { forEachBlockForward } from './read-forward.js'
import { planRepair } from './repair-plan.js'
import { readHeaderLine } from './read-session.js'
import { scanLog } from './scan-log.js'
import type { StoreContext } from './store-context.js'

/**
 * The streams `openJsonlRawStream` opened, with what copies one's checked bytes instead of its
 * lines: `writeRawStream` of such a stream, untouched and not read yet, writes the bytes the
 * checking pass checked, never a string of a line (§15.5: a huge line costs what its check by
 * that pass costs, as in a load, not also its text handed out and checked again).
 */
const OWN_STREAMS = new WeakMap<RawSessionStream, { id: string; headerLine: string; eventPages: AsyncIterable<readonly string[]>; copy: (write: (piece: Buffer) => Promise<void>) => Promise<number> }>()

/**
 * A log's exact lines as pages (§15.5), in memory bounded by a page: a first pass checks the
 * whole log as `inspect` does without keeping its events (committed damage rejects, a torn tail
 * ends the stream), a second hands out the lines up to where that pass found the valid prefix
 * ending. `size` bounds what is read (an instance's own live log: its acknowledged length).
 *
 * The pages are read from the file the header was read from: no descriptor is held between the
 * open and the iteration (§15.5: nothing is held until iterated), so the iteration opens `path`
 * again and refuses another file there (`E_NOT_FOUND`: the log was deleted, or rewritten by a
 * migrate, redact or repair, which rename a new file over it), never the lines of one file under
 * the header of another. The pages can be iterated once (`rawPagesOnce`).
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
  let ino: number
  try {
    const { headerBytes } = await readHeaderLine(handle, path, id)
    const buf = Buffer.alloc(headerBytes - 1)
    await handle.read(buf, 0, buf.length, 0)
    headerLine = buf.toString('utf8')
    ino = (await handle.stat()).ino
  } finally {
    await handle.close()
  }
  // The file the header came from, opened again (`E_NOT_FOUND` when another is there, or none):
  // the same inode (a rewrite renames a new file over the path) and the same header line (a file
  // system may give a file deleted and created again its freed inode). One created again with
  // the same inode and header byte for byte is told by neither: its lines are then handed out
  // under a header that is theirs.
  const header = Buffer.from(`${headerLine}\n`)
  const reopen = async (): Promise<FileHandle> => {
    const gone = () =>
      new SessionPersistenceError('E_NOT_FOUND', `session '${id}' was deleted or rewritten (migrate, redact, repair) after its raw stream was opened; open it again`, {
        sessionId: id,
        path,
      })
    let h: FileHandle
    try {
      h = await ctx.fs.open(path, 'r')
    } catch (err) {
      throw errno(err) === 'ENOENT' ? gone() : ioError(err, `read the raw log of session '${id}'`, { sessionId: id, path })
    }
    try {
      if ((await h.stat()).ino !== ino || !(await startsWith(h, header))) throw gone()
      return h
    } catch (err) {
      await h.close()
      throw ioError(err, `read the raw log of session '${id}'`, { sessionId: id, path })
    }
  }
  // The first pass: the valid prefix's event lines are [headerBytes, validEnd) of `h`.
  const check = async (h: FileHandle) => {
    const limit = size()
    const scan = await scanLog(h, { path, sessionId: id, keepEvents: false, ...(limit === undefined ? {} : { to: limit }) })
    planRepair(scan, { path, sessionId: id, closeOpenTurn: false }) // committed damage: E_CORRUPT
    return scan
  }
  async function* eventPages(): AsyncGenerator<readonly string[]> {
    const h = await reopen()
    try {
      const scan = await check(h)
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
    } catch (err) {
      throw ioError(err, `read the raw log of session '${id}'`, { sessionId: id, path })
    } finally {
      await h.close()
    }
  }
  const copy = async (write: (piece: Buffer) => Promise<void>): Promise<number> => {
    const h = await reopen()
    try {
      const scan = await check(h)
      await copyRange(h, path, scan.headerBytes, scan.validEnd, write)
      return scan.eventCount
    } finally {
      await h.close()
    }
  }
  const stream = { id, headerLine, eventPages: rawPagesOnce(id, eventPages) }
  OWN_STREAMS.set(stream, { id, headerLine, eventPages: stream.eventPages, copy })
  return stream
}

/** Whether the file open as `h` begins with `bytes`. */
async function startsWith(h: FileHandle, bytes: Buffer): Promise<boolean> {
  const got = Buffer.alloc(bytes.length)
  let done = 0
  while (done < got.length) {
    const n = await h.read(got, done, got.length - done, done)
    if (n === 0) return false
    done += n
  }
  return got.equals(bytes)
}

/** The length of a line's piece written at once (§15.5: a huge line is never copied whole to be written). */
const CHUNK = 1 << 20

/** `line`'s text in pieces of at most CHUNK characters, never cutting a surrogate pair (a checked line holds no lone surrogate). */
function* textPieces(line: string): Generator<string> {
  for (let at = 0; at < line.length; ) {
    let end = Math.min(at + CHUNK, line.length)
    const last = line.charCodeAt(end - 1)
    if (end < line.length && last >= 0xd800 && last <= 0xdbff) end--
    yield line.slice(at, end)
    at = end
  }
}

/**
 * Checks a streamed raw log page by page as `importRaw` checks a whole one, writing each page
 * through `write`; resolves with the header and the number of event lines. Lines are written in
 * pieces of about a chunk: short lines joined, a long one cut, so that what is held beside the
 * page is a chunk, never a copy of a huge line (nor of its join with `\n`).
 */
export async function writeRawStream(
  log: RawSessionStream,
  write: (piece: Buffer) => Promise<void>,
): Promise<{ header: SessionHeader; eventLines: number }> {
  const header = checkRawStreamHeader(log)
  const pages = rawStreamPages(log)
  await write(Buffer.from(`${log.headerLine}\n`))
  // A log of this backend, as it was opened: its bytes as its first pass checked them (every
  // line as a load checks it, in the header's version), copied a chunk at a time. Its pages
  // are claimed as read (a stream is read once); read already, they refuse below.
  const own = OWN_STREAMS.get(log)
  if (own && own.id === log.id && own.headerLine === log.headerLine && own.eventPages === log.eventPages && claimRawPages(log.eventPages)) {
    return { header, eventLines: await own.copy(write) }
  }
  let n = 0
  let joined: string[] = []
  let joinedLength = 0
  const flush = async () => {
    if (joined.length === 0) return
    const text = joined.join('')
    joined = []
    joinedLength = 0
    await write(Buffer.from(text))
  }
  for await (const lines of pages) {
    for (const line of lines) {
      checkRawEventLine(log.id, line, n++, header.version)
      const text = line as string
      if (text.length < CHUNK) {
        joined.push(text, '\n')
        joinedLength += text.length + 1
        if (joinedLength >= CHUNK) await flush()
      } else {
        await flush()
        for (const piece of textPieces(text)) await write(Buffer.from(piece))
        await write(NEWLINE)
      }
    }
  }
  await flush()
  return { header, eventLines: n }
}

const NEWLINE = Buffer.from('\n')
