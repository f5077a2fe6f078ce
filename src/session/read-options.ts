import { z } from 'zod'
import { SessionPersistenceError } from '../errors.js'
import type { ListOptions, LoadOptions, RawPageOptions, ReadRange, WatchOptions } from '../persistence.js'
import { describeZodError } from './schema.js'
import { valueName } from './value-name.js'

const seq = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER)

const ReadRangeSchema = z.union([
  z.strictObject({ last: seq }),
  z.strictObject({ fromSeq: seq.optional(), toSeq: seq.optional() }),
])

/** What `read` was asked for (§15.2), checked once at the edge. */
export type ParsedRange = { kind: 'last'; last: number } | { kind: 'seqs'; fromSeq: number; toSeq: number | undefined }

function refuse(call: string, detail: string): never {
  throw new SessionPersistenceError('E_CONFIG', `invalid options of ${call}: ${detail}`)
}

/** A key given as `undefined` is a key not given (a caller spreading optional options). */
function withoutUndefinedKeys(options: unknown): unknown {
  return typeof options === 'object' && options !== null && !Array.isArray(options) ? Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) : options
}

/** `E_CONFIG` for anything but `{fromSeq?, toSeq?}` or `{last}` with non-negative integer seqs. */
export function parseReadRange(range: ReadRange | undefined): ParsedRange {
  if (range === undefined) return { kind: 'seqs', fromSeq: 0, toSeq: undefined }
  const parsed = ReadRangeSchema.safeParse(withoutUndefinedKeys(range))
  if (!parsed.success) {
    refuse('read', `expected { fromSeq?, toSeq? } or { last } with non-negative integers (${describeZodError(parsed.error)})`)
  }
  const r = parsed.data
  if ('last' in r) return { kind: 'last', last: r.last }
  const fromSeq = r.fromSeq ?? 0
  if (r.toSeq !== undefined && r.toSeq < fromSeq) refuse('read', `toSeq ${r.toSeq} is before fromSeq ${fromSeq}`)
  return { kind: 'seqs', fromSeq, toSeq: r.toSeq }
}

/** The seqs `[from, to)` a parsed range selects in a log of `length` events (clamped to it). */
export function rangeBounds(range: ParsedRange, length: number): { from: number; to: number } {
  if (range.kind === 'last') return { from: Math.max(0, length - range.last), to: length }
  const to = Math.min(range.toSeq ?? length, length)
  return { from: Math.min(range.fromSeq, to), to }
}

const WatchOptionsSchema = z.strictObject({
  fromSeq: seq.optional(),
  signal: z.custom<AbortSignal>((v) => v instanceof AbortSignal, 'an AbortSignal').optional(),
})

/** `E_CONFIG` for a bad `fromSeq`, a `signal` that is not an `AbortSignal`, or another key (as `read`). */
export function parseWatchOptions(options: WatchOptions | undefined): { fromSeq: number; signal: AbortSignal | undefined } {
  if (options === undefined) return { fromSeq: 0, signal: undefined }
  const parsed = WatchOptionsSchema.safeParse(withoutUndefinedKeys(options))
  if (!parsed.success) refuse('watch', describeZodError(parsed.error))
  return { fromSeq: parsed.data.fromSeq ?? 0, signal: parsed.data.signal }
}

/**
 * `from` of `load`: `E_CONFIG` for anything but `'start'` or `'last-compaction'`, and for a
 * `closeOpenTurn` that is not a boolean (`0` or `'no'` would otherwise close the turn).
 */
export function parseLoadFrom(options: Partial<LoadOptions>): 'start' | 'last-compaction' {
  const close = options.closeOpenTurn
  if (close !== undefined && typeof close !== 'boolean') refuse('load', `closeOpenTurn must be a boolean, not ${valueName(close)}`)
  const from = options.from === undefined ? 'start' : options.from
  if (from !== 'start' && from !== 'last-compaction') refuse('load', `from must be 'start' or 'last-compaction', not ${valueName(from)}`)
  return from
}

/** `orderBy` and `limit` of `list` (§15.4): `E_CONFIG` for anything else. */
export function parseListOrder(options: Partial<ListOptions>): { orderBy: 'createdAt' | 'lastWrite'; limit: number | undefined } {
  const orderBy = options.orderBy === undefined ? 'createdAt' : options.orderBy
  if (orderBy !== 'createdAt' && orderBy !== 'lastWrite') refuse('list', `orderBy must be 'createdAt' or 'lastWrite', not ${valueName(orderBy)}`)
  const { limit } = options
  if (limit !== undefined && !seq.safeParse(limit).success) refuse('list', `limit must be a non-negative integer, not ${valueName(limit)}`)
  return { orderBy, limit }
}

const byId = (a: { meta: { id: string } }, b: { meta: { id: string } }) => (a.meta.id < b.meta.id ? -1 : a.meta.id > b.meta.id ? 1 : 0)

/** The order of §4.6 (newest `createdAt` first) or §15.4 (newest `mtimeMs` first), then by id. */
export function listingOrder(orderBy: 'createdAt' | 'lastWrite') {
  return orderBy === 'lastWrite'
    ? (a: { meta: { id: string }; mtimeMs: number }, b: { meta: { id: string }; mtimeMs: number }) => b.mtimeMs - a.mtimeMs || byId(a, b)
    : (a: { meta: { id: string; createdAt: number } }, b: { meta: { id: string; createdAt: number } }) => b.meta.createdAt - a.meta.createdAt || byId(a, b)
}

/** A raw stream's pages (§15.5) unless asked otherwise: 1,000 lines, about 4 MiB. */
export const DEFAULT_RAW_PAGE: Required<RawPageOptions> = { pageLines: 1_000, pageBytes: 4 * 1024 * 1024 }

const positive = z.number().int().positive().max(Number.MAX_SAFE_INTEGER)
const RawPageOptionsSchema = z.strictObject({ pageLines: positive.optional(), pageBytes: positive.optional() })

/** `pageLines` and `pageBytes` of `openRawStream`: `E_CONFIG` for anything but positive integers. */
export function parseRawPageOptions(options: RawPageOptions | undefined): Required<RawPageOptions> {
  if (options === undefined) return DEFAULT_RAW_PAGE
  const parsed = RawPageOptionsSchema.safeParse(options)
  if (!parsed.success) refuse('openRawStream', describeZodError(parsed.error))
  return { ...DEFAULT_RAW_PAGE, ...parsed.data }
}
