import { readFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence, type SessionEvent } from '../src/index.js'
import { codeOf } from './helpers/codes.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §16 redact --dry-run judges as the run does: a redaction whose own lines would outgrow a line
// (64 MiB, §15.5) is refused by both (E_INVALID_EVENT, nothing replaced), never reported by the
// dry run as something the run will do. (Next to the watch tests for the file names this change
// could use; it is about the rewrite that watchers follow.)

const MAX = 64 * 1024 * 1024
/** A version-1 line is its JSON text and the checksum field: `,"crc":"…"` (17 bytes) before its `}`. */
const sealed = (json: string) => Buffer.byteLength(json) + 17

async function session(events: SessionEvent[]) {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('s'))
  await p.append('s', events)
  await p.close('s')
  return { p, path: p.locate(meta('s')).path }
}

test('the log/redacted record, which holds the replacement, outgrowing a line where no event does: the dry run refuses it as the run does', async () => {
  const event: SessionEvent = { seq: 0, type: 'x', time: 1, data: { t: 'SECRET' } }
  const { p, path } = await session([event])
  const replacement = 'r'.repeat(MAX - 100)
  // the redacted event fits a line; the record (the same replacement, and more) does not
  expect(sealed(JSON.stringify({ ...event, data: { t: replacement } }))).toBeLessThanOrEqual(MAX)
  const before = await readFile(path)
  expect(await codeOf(p.redact('s', { pattern: /SECRET/, replacement }))).toBe('E_INVALID_EVENT')
  expect(await codeOf(p.redact('s', { pattern: /SECRET/, replacement, dryRun: true }))).toBe('E_INVALID_EVENT')
  expect((await readFile(path)).equals(before)).toBe(true)
})

test('a closer of the open turn outgrowing a line once redacted (it repeats a pending call id): the dry run refuses it as the run does', async () => {
  const events: SessionEvent[] = [
    { seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } },
    { seq: 1, type: 'tool/call', time: 2, data: { turn: 1, step: 0, callId: 'SECRET' } },
  ]
  const { p, path } = await session(events)
  // The closers the redaction writes (here with a one-byte replacement): the call's id is in the result closer.
  const small = await p.redact('s', { pattern: /SECRET/, replacement: 'x', dryRun: true })
  const closers = small.repair!.closers
  const withId = closers.find((c) => JSON.stringify(c).includes('"x"'))!
  // A replacement one byte too long for that closer's line; the call, and the record, still fit.
  const replacement = 'r'.repeat(MAX - sealed(JSON.stringify(withId)) + 2)
  const longest = (e: SessionEvent) => sealed(JSON.stringify(e).replace('"x"', JSON.stringify(replacement)))
  expect(longest(withId)).toBe(MAX + 1)
  expect(sealed(JSON.stringify(events[1]).replace('"SECRET"', JSON.stringify(replacement)))).toBeLessThanOrEqual(MAX)
  const record = { seq: 9, type: 'log/redacted', time: Date.now(), ignorable: true, data: { at: Date.now(), matches: 2, seqs: [1, withId.seq], replacement } }
  expect(sealed(JSON.stringify(record))).toBeLessThanOrEqual(MAX)
  const before = await readFile(path)
  expect(await codeOf(p.redact('s', { pattern: /SECRET/, replacement }))).toBe('E_INVALID_EVENT')
  expect(await codeOf(p.redact('s', { pattern: /SECRET/, replacement, dryRun: true }))).toBe('E_INVALID_EVENT')
  expect((await readFile(path)).equals(before)).toBe(true)
})
