import { isUtf8 } from 'node:buffer'
import { SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from '../errors.js'
import { checkLine, checksumReason, hasCrcSuffix, unsealText } from './line-codec.js'
import { knownValidHeader } from './meta-check.js'
import { describeZodError, ParsedHeaderSchema, type SessionHeader } from './schema.js'

/** A header line longer than this is refused (a real header is a few hundred bytes; §4.2 refuses a meta that would make one). */
export const MAX_HEADER_BYTES = 1 << 20

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (err) {
    return { ok: false, message: (err as Error).message }
  }
}

/**
 * Parses line 1 (docs/contract.md §6.1, §16): a checksum field is checked whatever the version
 * says; a numeric `version` other than 0 or 1 is `E_FORMAT_UNSUPPORTED`; any other invalid
 * header (a version-1 one without its checksum included) `E_CORRUPT` at line 1, byte 0.
 */
export function parseHeaderLine(
  buf: Buffer,
  start: number,
  end: number,
  complete: boolean,
  context: { path: string; sessionId?: string | undefined },
): SessionHeader {
  const corrupt = (reason: string) => new SessionPersistenceCorruptionError(1, 0, reason, { path: context.path, sessionId: context.sessionId })
  if (!complete) throw corrupt('the header line has no newline')
  // A header that carries a checksum is checked whatever its version says (§16): a flipped
  // version digit is caught.
  const sealed = hasCrcSuffix(buf, start, end)
  if (sealed && checkLine(buf, start, end) !== 'ok') throw corrupt(`${checksumReason('mismatch')} in the header`)
  if (!isUtf8(buf.subarray(start, end))) throw corrupt('the header is not valid UTF-8')
  const text = buf.toString('utf8', start, end)
  const parsed = parseJson(sealed ? unsealText(text) : text)
  if (!parsed.ok) throw corrupt(`the header is not JSON: ${parsed.message}`)
  return judgeHeader(parsed.value, sealed, context)
}

/**
 * The rest of `parseHeaderLine` for the JSON value of line 1 (without its checksum field), and
 * whether the line carried a checked one (`sealed`): the listing's fast path (sealed-head.ts)
 * parses many such values at once and judges each here, as one read alone would.
 */
export function judgeHeader(value: unknown, sealed: boolean, context: { path: string; sessionId?: string | undefined }): SessionHeader {
  const { path, sessionId } = context
  const corrupt = (reason: string) => new SessionPersistenceCorruptionError(1, 0, reason, { path, sessionId })
  // A header that carries a crc field other than a valid seal is damaged (§16: checked whatever
  // its version says): a misspelt checksum, or one inside it.
  if ((value as { crc?: unknown } | null)?.crc !== undefined) throw corrupt(`${checksumReason('mismatch')} in the header`)
  const version = (value as { version?: unknown } | null)?.version
  if (typeof version === 'number' && version !== 0 && version !== 1) {
    throw new SessionFormatUnsupportedError(
      version,
      `session log ${path} has format version ${version}; this release reads versions 0 and 1`,
      { path, sessionId },
    )
  }
  if (version === 1 && !sealed) throw corrupt(checksumReason('missing').replace('the line', 'the header'))
  // The common case without zod (meta-check.ts); zod judges the rest and words the error.
  const known = knownValidHeader(value)
  if (known) {
    if (sessionId !== undefined && known.id !== sessionId) throw corrupt(`the header's id ${JSON.stringify(known.id)} does not match the file's id`)
    return known
  }
  const result = ParsedHeaderSchema.safeParse(value)
  if (!result.success) throw corrupt(`invalid header: ${describeZodError(result.error)}`)
  if (sessionId !== undefined && result.data.id !== sessionId) {
    throw corrupt(`the header's id ${JSON.stringify(result.data.id)} does not match the file's id`)
  }
  return result.data
}
