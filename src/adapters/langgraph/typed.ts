import type { SerializerProtocol } from '@langchain/langgraph-checkpoint'
import { SessionPersistenceError } from '../../errors.js'

/**
 * A value as the saver's serializer wrote it, in a form a JSON line can hold: the serializer's
 * type and its bytes as text when they are UTF-8 (the `json` type always is), base64 otherwise
 * (the `bytes` type is raw). Kept as text rather than parsed, so what is read back is exactly
 * what was written.
 */
export type Typed = { type: string; text: string } | { type: string; base64: string }

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/**
 * What LangGraph's JSON serializer writes, instead of throwing, for a value it cannot serialize
 * (a BigInt anywhere in it, say): the value would come back as this string. Refused instead.
 */
const UNSERIALIZABLE = JSON.stringify('[unable to serialize, circular reference is too complex to analyze]')

/** What a serializer threw, as text: whatever it threw (an object without a prototype, an error whose message throws). */
function reason(cause: unknown): string {
  try {
    const message = (cause as { message?: unknown } | null | undefined)?.message
    return typeof message === 'string' ? message : String(cause)
  } catch {
    return 'it threw a value that cannot be shown'
  }
}

/**
 * A value as stored: `undefined` when the serializer turns it into nothing (its JSON of a
 * function or a Symbol is empty, as `JSON.stringify` gives no text for them), which would not
 * read back. A channel value that is nothing is stored as no value (the channel reads as
 * absent, as LangGraph's MemorySaver drops it); `dumpTyped` refuses it.
 */
export async function dumpTypedOrNothing(serde: SerializerProtocol, value: unknown, what: string, sessionId: string): Promise<Typed | undefined> {
  let type: string
  let bytes: Uint8Array
  try {
    ;[type, bytes] = await serde.dumpsTyped(value)
  } catch (cause) {
    throw new SessionPersistenceError('E_NOT_JSON', `${what} cannot be serialized: ${reason(cause)}`, { sessionId, cause })
  }
  if (typeof type !== 'string' || !(bytes instanceof Uint8Array)) {
    throw new SessionPersistenceError('E_CONFIG', `${what}: the serializer's dumpsTyped must give [type, Uint8Array]`, { sessionId })
  }
  if (type === 'json' && bytes.byteLength === 0) return undefined
  if (type !== 'bytes') {
    let text: string | undefined
    try {
      text = UTF8.decode(bytes)
    } catch {
      // not UTF-8: base64 below
    }
    if (text === UNSERIALIZABLE && type === 'json') {
      throw new SessionPersistenceError('E_NOT_JSON', `${what} cannot be serialized (the serializer gave up on it: a BigInt or a structure it cannot walk)`, { sessionId })
    }
    if (text !== undefined) return { type, text }
  }
  return { type, base64: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64') }
}

/** A value as stored; one the serializer turns into nothing (a function, a Symbol) is refused with `E_NOT_JSON`. */
export async function dumpTyped(serde: SerializerProtocol, value: unknown, what: string, sessionId: string): Promise<Typed> {
  const typed = await dumpTypedOrNothing(serde, value, what, sessionId)
  if (typed === undefined) {
    throw new SessionPersistenceError('E_NOT_JSON', `${what} cannot be serialized: the serializer turns it into nothing (a function or a Symbol?)`, { sessionId })
  }
  return typed
}

export function isTyped(v: unknown): v is Typed {
  if (typeof v !== 'object' || v === null) return false
  const o = v as Record<string, unknown>
  return typeof o.type === 'string' && (typeof o.text === 'string' || typeof o.base64 === 'string')
}

export async function loadTyped(serde: SerializerProtocol, typed: Typed): Promise<unknown> {
  if ('text' in typed) {
    // The default serializer reads `json` from a string as it is; any other type gets its bytes back.
    return serde.loadsTyped(typed.type, typed.type === 'json' ? typed.text : new TextEncoder().encode(typed.text))
  }
  return serde.loadsTyped(typed.type, new Uint8Array(Buffer.from(typed.base64, 'base64')))
}

/**
 * What the serializer makes of a structure this saver keeps as plain JSON in the log (the
 * checkpoint without its channel values, the metadata): JSON-serialized, then parsed, as
 * LangGraph's PostgreSQL saver does, so the log shows it as JSON and `list` filters on it.
 */
export async function dumpJsonObject(serde: SerializerProtocol, value: unknown, what: string, sessionId: string): Promise<Record<string, unknown>> {
  const typed = await dumpTyped(serde, value, what, sessionId)
  if (typed.type !== 'json' || !('text' in typed)) {
    throw new SessionPersistenceError('E_NOT_JSON', `${what}: the serializer gave type '${typed.type}'; this saver stores it as JSON`, { sessionId })
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(typed.text)
  } catch (cause) {
    throw new SessionPersistenceError('E_NOT_JSON', `${what}: the serializer's JSON does not parse`, { sessionId, cause })
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new SessionPersistenceError('E_NOT_JSON', `${what} must be an object`, { sessionId })
  }
  return parsed as Record<string, unknown>
}
