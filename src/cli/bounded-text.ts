// The views clip a stored value to one short line (`oneLine`, a result's `← [c1] text…`, a
// checkpoint's `messages = [human: …`). They build only the start of it: a value of 40 MiB is
// never turned into 40 MiB of text to keep 100 characters of it (15.5).

/** How much of a long string is folded at a time. */
const CHUNK = 1024

/** A sink of text pieces: returns true once it needs no more. */
export type Sink = (piece: string) => boolean

/**
 * Whitespace runs folded to one space (then passed through `escape`, when given), fed piece by
 * piece: `text` is the start of what `escape(whole.replace(/\s+/g, ' '))` would be, and all of
 * it unless `full` (more than `limit` characters held, no more wanted).
 */
export class FoldedLine {
  text = ''
  readonly #limit: number
  readonly #escape: ((s: string) => string) | undefined

  constructor(limit: number, escape?: (s: string) => string) {
    this.#limit = limit
    this.#escape = escape
  }

  get full(): boolean {
    return this.text.length > this.#limit
  }

  /** Adds a piece of the text; true once full. */
  readonly add: Sink = (piece) => {
    for (let i = 0; i < piece.length && !this.full; i += CHUNK) {
      let part = piece.slice(i, i + CHUNK).replace(/\s+/g, ' ')
      // A run of whitespace across two pieces is one run. Only folding writes a space (an
      // escape never does), so a text ending in one ended in whitespace.
      if (part.charCodeAt(0) === 32 && this.text.endsWith(' ')) part = part.slice(1)
      this.text += this.#escape ? this.#escape(part) : part
    }
    return this.full
  }
}

/** `s` cut to `max` characters, its last one `…`, when it is longer. */
export const ellipsis = (s: string, max: number): string => (s.length > max ? `${s.slice(0, max - 1)}…` : s)

/** Feeds `s` to `sink` in pieces of about CHUNK characters, each through `map`; true if the sink is full. */
export function feedString(s: string, sink: Sink, map?: (s: string) => string): boolean {
  let i = 0
  while (i < s.length) {
    let end = Math.min(i + CHUNK, s.length)
    // A surrogate pair is never split (JSON.stringify escapes a lone half).
    if (end < s.length && isHighSurrogate(s.charCodeAt(end - 1)) && isLowSurrogate(s.charCodeAt(end))) end++
    const part = s.slice(i, end)
    if (sink(map ? map(part) : part)) return true
    i = end
  }
  return false
}

const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff

/** The inside of a JSON string literal, as JSON.stringify writes it. */
const jsonInside = (s: string) => JSON.stringify(s).slice(1, -1)

type Frame = { array: readonly unknown[]; i: number } | { object: Record<string, unknown>; keys: string[]; i: number; written: number }

/** What JSON.stringify writes nothing for (a property left out, `null` in an array). */
const unwritable = (v: unknown) => v === undefined || typeof v === 'function' || typeof v === 'symbol'

const isPlain = (v: object) => {
  const proto = Object.getPrototypeOf(v)
  return proto === Object.prototype || proto === null
}

/**
 * Feeds `sink` the text `JSON.stringify(value)` is, in order, piece by piece, and stops once the
 * sink is full: the start of a huge value costs what that start is, not the whole. Nothing is fed
 * when JSON.stringify would return undefined. Plain JSON values (what a parsed log holds) are
 * written here, without recursion (a value nested thousands deep is fine); anything else (a Date,
 * a class instance) goes through JSON.stringify as a whole.
 */
export function feedJson(value: unknown, sink: Sink): void {
  const stack: Frame[] = []
  let stop = false
  const put = (s: string) => {
    stop = sink(s)
  }
  const quoted = (s: string, after: string) => {
    if (s.length <= CHUNK) return put(`${JSON.stringify(s)}${after}`)
    put('"')
    if (!stop) stop = feedString(s, sink, jsonInside)
    if (!stop) put(`"${after}`)
  }
  /** Writes a value whose toJSON is applied, or opens a frame for an array or object; false when it has no JSON. */
  const write = (v: unknown): boolean => {
    if (unwritable(v)) return false
    if (typeof v === 'string') quoted(v, '')
    else if (v === null || typeof v !== 'object') put(JSON.stringify(v))
    else if (Array.isArray(v)) {
      put('[')
      stack.push({ array: v, i: 0 })
    } else if (isPlain(v)) {
      put('{')
      stack.push({ object: v as Record<string, unknown>, keys: Object.keys(v), i: 0, written: 0 })
    } else {
      const s = JSON.stringify(v) as string | undefined
      if (s === undefined) return false
      put(s)
    }
    return true
  }
  if (!write(resolve(value, ''))) return
  while (!stop && stack.length > 0) {
    const f = stack.at(-1)!
    if ('array' in f) {
      if (f.i >= f.array.length) {
        stack.pop()
        put(']')
        continue
      }
      const i = f.i++
      if (i > 0) put(',')
      if (!stop && !write(resolve(f.array[i], String(i)))) put('null')
    } else {
      if (f.i >= f.keys.length) {
        stack.pop()
        put('}')
        continue
      }
      const key = f.keys[f.i++]!
      const v = resolve(f.object[key], key)
      if (unwritable(v)) continue
      if (f.written++ > 0) put(',')
      if (!stop) quoted(key, ':')
      if (!stop) write(v)
    }
  }
}

/** A value as JSON.stringify serializes it: through its toJSON, if it has one. */
function resolve(v: unknown, key: string): unknown {
  return v !== null && typeof v === 'object' && typeof (v as { toJSON?: unknown }).toJSON === 'function' ? (v as { toJSON(k: string): unknown }).toJSON(key) : v
}
