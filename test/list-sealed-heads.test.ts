import { isUtf8 } from 'node:buffer'
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { crc32 } from 'node:zlib'
import fc from 'fast-check'
import { expect, test } from 'vitest'
import { bucketName, createJsonlPersistence, createNodeFileSystem, encodeSessionId, type FileSystem, type ListProblem, type SessionListing } from '../src/index.js'
import { PEEK_MIN_FILES } from '../src/jsonl/list-sessions.js'
import { unsealText } from '../src/session/line-codec.js'
import { headerLine } from '../src/session/meta.js'
import { copySealedHead } from '../src/session/sealed-head.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A listing's reading threads check version-1 headers' checksums and join the texts of those
// that are one JSON object each into one array, which the listing parses at once (sealed-head.ts).

/** A line sealed as version 1 seals `P + '}'` (line-codec.ts `sealLine`), for any bytes `p` (the `\n` excluded). */
function seal(p: Buffer): Buffer {
  return Buffer.concat([p, Buffer.from(`,"crc":"${crc32(p).toString(16).padStart(8, '0')}"}`)])
}

/** What `copySealedHead` copies of `line`, or undefined when it leaves the line alone. */
function copied(line: Buffer): string | undefined {
  const out = Buffer.alloc(line.length + 1)
  const end = copySealedHead(line, line.length, out, 0, crc32, isUtf8)
  return end < 0 ? undefined : out.subarray(0, end).toString('utf8')
}

test('copySealedHead takes a header the package writes, as the text parseHeaderLine parses', () => {
  for (const m of [meta('a'), meta('b', { cwd: '/p', title: 'quote " brace } bracket ] backslash \\ emoji 🙂', nested: { a: [1, { b: '}' }] } })]) {
    const line = headerLine(m, 1).trimEnd()
    expect(copied(Buffer.from(line))).toBe(unsealText(line))
  }
})

test('copySealedHead leaves every other line to the one-by-one read', () => {
  const v1 = headerLine(meta('a'), 1).trimEnd()
  const p = (text: string) => Buffer.from(text)
  const cases: Record<string, Buffer> = {
    'version 0 (no checksum)': p(headerLine(meta('a'), 0).trimEnd()),
    'a wrong checksum': p(v1.replace(/"crc":"[0-9a-f]{8}"/, '"crc":"00000000"')),
    'upper-case hex': p(v1.replace(/"crc":"([0-9a-f]{8})"/, (_, h: string) => `"crc":"${h.toUpperCase()}"`)),
    'a checksum field not last': p(`${v1.slice(0, -1)},"x":1}`),
    'not valid UTF-8': seal(Buffer.concat([p('{"id":"'), Buffer.from([0xff]), p('"')])),
    'two objects': seal(p('{"id":"a"},{"id":"b"')),
    'an object closed early, then more': seal(p('{"id":"a"}]')),
    'its end inside a string': seal(p('{"id":"a')),
    'its end after a backslash in a string': seal(p('{"id":"a\\')),
    'not an object': seal(p('["a"')),
    'leading white space': seal(p(' {"id":"a"')),
    'nothing before the field': p(',"crc":"00000000"}'),
  }
  for (const [name, line] of Object.entries(cases)) expect([name, copied(line)]).toEqual([name, undefined])
})

test('property: texts copySealedHead takes, joined in an array, parse to what each parses to alone, or the array is no JSON', () => {
  // Bytes that matter to JSON's structure, so texts that close early, run into the next or hold
  // strings with escapes come up often.
  const piece = fc.constantFrom('{', '}', '[', ']', '"', '\\', ',', ':', '1', 'a', ' ', '"x":', '{"a":"', '\\"', 'é')
  const text = fc.array(piece, { maxLength: 12 }).map((ps) => `{${ps.join('')}`)
  fc.assert(
    fc.property(fc.array(text, { minLength: 1, maxLength: 6 }), (texts) => {
      const taken = texts.map((t) => copied(seal(Buffer.from(t)))).filter((t): t is string => t !== undefined)
      if (taken.length === 0) return
      const alone = taken.map((t) => {
        try {
          return { ok: true, value: JSON.parse(t) as unknown }
        } catch {
          return { ok: false }
        }
      })
      let together: unknown[] | undefined
      try {
        together = JSON.parse(`[${taken.join(',')}]`) as unknown[]
      } catch {
        together = undefined
      }
      if (alone.every((a) => a.ok)) expect(together).toEqual(alone.map((a) => a.value))
      else expect(together).toBeUndefined()
    }),
    { numRuns: 3000 },
  )
})

async function listing(root: string, fs: FileSystem) {
  const problems: ListProblem[] = []
  const listed: SessionListing[] = await createJsonlPersistence({ root, fs }).list({ onProblem: (p) => problems.push(p) })
  return { listed, problems: problems.sort((a, b) => (a.path < b.path ? -1 : 1)) }
}

test('a listing through the joined headers equals the one made log by log, whatever the sealed headers hold', async () => {
  const root = await tmpRoot()
  const bucket = join(root, bucketName(undefined))
  await mkdir(bucket)
  const n = PEEK_MIN_FILES + 50
  const put = (id: string, line: Buffer | string) => writeFile(join(bucket, `${encodeSessionId(id)}.jsonl`), Buffer.concat([Buffer.from(line), Buffer.from('\n{"seq":0,"type":"x","time":1}\n')]))
  const writes: Promise<void>[] = []
  for (let i = 0; i < n; i++) writes.push(put(`s${i}`, headerLine(meta(`s${i}`, { createdAt: 1_700_000_000_000 + ((i * 7919) % n), title: `t ${i} "}]` }), i % 5 ? 1 : 0).trimEnd()))
  await Promise.all(writes)
  const h = (id: string, rest = '') => `{"type":"session","version":1,"id":"${id}","createdAt":1700000000000,"delegationDepth":0${rest}`
  const crafted: Record<string, Buffer> = {
    // Checksums that match, over texts the package never writes.
    'sealed-not-json': seal(Buffer.from(h('sealed-not-json', ','))),
    'sealed-two-objects': seal(Buffer.from(`${h('x')}},${h('sealed-two-objects')}`)),
    'sealed-open-string': seal(Buffer.from(h('sealed-open-string', ',"note":"'))),
    'sealed-crc-inside': seal(Buffer.from(h('sealed-crc-inside', ',"crc":"0"'))),
    'sealed-version-2': seal(Buffer.from(h('sealed-version-2').replace('"version":1', '"version":2'))),
    'sealed-wrong-id': seal(Buffer.from(h('someone-else'))),
    'sealed-proto': seal(Buffer.from(h('sealed-proto', ',"__proto__":{"x":1}'))),
    'sealed-bad-utf8': seal(Buffer.concat([Buffer.from(h('sealed-bad-utf8', ',"note":"')), Buffer.from([0xc3]), Buffer.from('"')])),
    'sealed-no-meta': seal(Buffer.from('{"type":"session","version":1')),
  }
  for (const [id, line] of Object.entries(crafted)) await put(id, line)

  const node = createNodeFileSystem()
  let joined = 0
  let fellBack = 0
  const counting: FileSystem = {
    ...node,
    peekFiles: async function* (paths, headBytes, options) {
      for await (const batch of node.peekFiles!(paths, headBytes, options)) {
        joined += batch.joined?.count ?? 0
        // The batch holding the sealed line that is no JSON is read again log by log.
        if (batch.joined) {
          try {
            JSON.parse(batch.joined.bytes.toString('utf8'))
          } catch {
            fellBack++
          }
        }
        yield batch
      }
    },
  }
  const fast = await listing(root, counting)
  const slow = await listing(root, { ...node, peekFiles: undefined })
  expect(joined).toBeGreaterThan(n * 0.7) // four in five of the good ones are version 1, checked and joined
  expect(fellBack).toBe(1)
  expect(fast).toEqual(slow)
  const problemIds = fast.problems.map((p) => p.path.slice(bucket.length + 1, -'.jsonl'.length)).sort()
  expect(problemIds).toEqual(
    ['sealed-bad-utf8', 'sealed-crc-inside', 'sealed-no-meta', 'sealed-not-json', 'sealed-open-string', 'sealed-two-objects', 'sealed-version-2', 'sealed-wrong-id'].map((id) => encodeSessionId(id)).sort(),
  )
  expect(fast.problems.find((p) => p.path.includes(encodeSessionId('sealed-version-2')))!.code).toBe('E_FORMAT_UNSUPPORTED')
  expect(fast.listed).toHaveLength(n + 1) // and the one with a __proto__ key, as zod judges it
  expect(fast.listed.find((l) => l.meta.id === 's7')!.meta.title).toBe('t 7 "}]')
}, 60_000)

test('a join that throws on the reading thread ends the fast path: the listing is made log by log, nothing reported against the logs', async () => {
  const root = await tmpRoot()
  const bucket = join(root, bucketName(undefined))
  await mkdir(bucket)
  const n = PEEK_MIN_FILES + 10
  await Promise.all(Array.from({ length: n }, (_, i) => writeFile(join(bucket, `${encodeSessionId(`s${i}`)}.jsonl`), headerLine(meta(`s${i}`, { createdAt: 1_700_000_000_000 + i }), 1))))
  const node = createNodeFileSystem()
  const outside = copySealedHead
  const warnings: string[] = []
  const problems: ListProblem[] = []
  const fs: FileSystem = {
    ...node,
    // Run from its source text, a function that names something around it fails there.
    peekFiles: (paths, headBytes, options) => node.peekFiles!(paths, headBytes, options && { join: (...args) => outside(...args) }),
  }
  const listed = await createJsonlPersistence({ root, fs, logger: { warn: (m) => warnings.push(m) } }).list({ onProblem: (p) => problems.push(p) })
  expect(problems).toEqual([])
  expect(listed).toEqual((await listing(root, { ...node, peekFiles: undefined })).listed)
  expect(warnings).toEqual([expect.stringMatching(/^listing \d+ logs one by one: .*outside/)])
}, 60_000)
