import { appendFile, copyFile, mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { createJsonlPersistence, type SessionEvent, sessionPersistencePlugin } from '../src/index.js'
import { createReferenceHost } from '../src/testing/index.js'
import { codeOf } from './helpers/codes.js'
import { ev, meta, turn } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'
import { isSpecSealed } from './helpers/spec-seal.js'

// §16: the operator's rewrites of a log — migrate, redact, repair --truncate-at-damage — and the
// backends' redact configuration.

/** Whether a line is sealed as §16 writes it (checked from the spec's formula, not the package's code). */
const sealedOk = isSpecSealed

async function v0Session(root: string, id: string, extra: SessionEvent[] = []) {
  const p = createJsonlPersistence({ root, formatVersion: 0 })
  await p.create(meta(id, { cwd: '/proj' }))
  await p.append(id, [...turn(0, 1), ...turn(4, 2), ...extra])
  await p.close(id)
  return p.locate(meta(id, { cwd: '/proj' })).path
}

/** What a fresh instance loads from a copy of the log (so the original stays as it is). */
async function loadCopy(path: string, id: string) {
  const root = await tmpRoot()
  const to = join(root, 'b', 'x.jsonl'.replace('x', id))
  await mkdir(dirname(to), { recursive: true })
  await copyFile(path, to)
  return createJsonlPersistence({ root }).load(id)
}

describe('migrate', () => {
  test('rewrites a version-0 log as version 1: every line sealed, the same events, appends go on in version 1', async () => {
    const root = await tmpRoot()
    const path = await v0Session(root, 'old', [ev(8, 'turn/start', { turn: 3 }), ev(9, 'user/message', { content: 'é and "quotes"' })])
    await appendFile(path, '{"seq":10,"type":"assistant/ch') // a torn tail: repaired first
    const before = await loadCopy(path, 'old')
    const p = createJsonlPersistence({ root })
    const report = await p.migrate('old')
    expect(report).toMatchObject({ id: 'old', fromVersion: 0, migrated: true, events: before.events.length })
    expect(report.repair?.closers.map((c) => c.type)).toEqual(['turn/end'])
    const lines = (await readFile(path, 'utf8')).split('\n')
    expect(lines.pop()).toBe('')
    expect(JSON.parse(lines[0]!).version).toBe(1)
    expect(lines.every(sealedOk)).toBe(true)
    const after = await p.load('old')
    expect(after.events).toEqual(before.events)
    expect(after.repair).toBeUndefined()
    await p.append('old', turn(after.events.length, 4))
    await p.close('old')
    expect((await readFile(path, 'utf8')).split('\n').slice(0, -1).every(sealedOk)).toBe(true)
    expect(await p.migrate('old')).toMatchObject({ fromVersion: 1, migrated: false })
    // no temporary file is left in the bucket
    expect((await readdir(dirname(path))).filter((n) => n.startsWith('.'))).toEqual([])
  })

  test('a dry run reports and writes nothing; a locked or live session is skipped; a corrupt one refused untouched; bad options E_CONFIG', async () => {
    const root = await tmpRoot()
    const path = await v0Session(root, 'a')
    const bytes = await readFile(path)
    const p = createJsonlPersistence({ root })
    expect(await p.migrate('a', { dryRun: true })).toMatchObject({ fromVersion: 0, migrated: false, events: 8 })
    expect(await readFile(path)).toEqual(bytes)
    const holder = createJsonlPersistence({ root })
    await holder.load('a')
    expect(await codeOf(p.migrate('a'))).toBe('E_LOCKED')
    expect(await codeOf(holder.migrate('a'))).toBe('E_SESSION_LIVE')
    await holder.close('a')
    expect(await readFile(path)).toEqual(bytes)
    // damage before the commit boundary: refused, the file untouched
    const damaged = bytes.toString('utf8').replace('"question 1"', '"question 1')
    await writeFile(path, damaged)
    expect(await codeOf(p.migrate('a'))).toBe('E_CORRUPT')
    expect(await readFile(path, 'utf8')).toBe(damaged)
    for (const bad of [null, { dryRun: 'yes' }, { force: true }]) expect(await codeOf(p.migrate('a', bad as never))).toBe('E_CONFIG')
    expect(await codeOf(p.migrate('missing'))).toBe('E_NOT_FOUND')
  })

  test('a version-0 event with a top-level crc of its own (written before crc was reserved) is refused, dry run too: E_INVALID_EVENT, the log untouched and still loading', async () => {
    const root = await tmpRoot()
    const path = await v0Session(root, 'c')
    // As a release before v0.3 could write it: `crc` was not reserved then.
    await appendFile(path, `${JSON.stringify({ seq: 8, type: 'note', time: 9, crc: 'abc', data: {} })}\n`)
    const bytes = await readFile(path)
    const p = createJsonlPersistence({ root })
    for (const options of [{ dryRun: true }, undefined]) {
      const err = await p.migrate('c', options).then(() => undefined, (e: unknown) => e as Error & { code?: string })
      expect(err?.code).toBe('E_INVALID_EVENT')
      expect(err?.message).toMatch(/seq 8.*'crc'.*stays version 0/)
    }
    expect(await readFile(path)).toEqual(bytes)
    const loaded = await p.load('c')
    expect(loaded.events.at(-1)).toMatchObject({ seq: 8, crc: 'abc' })
    await p.close('c')
    expect((await readdir(dirname(path))).filter((n) => n.startsWith('.tmp-'))).toEqual([])
  })
})

describe('redact', () => {
  const secret = 'sk-live-0123456789abcdef'
  const EVENTS: SessionEvent[] = [
    ev(0, 'turn/start', { turn: 1 }),
    ev(1, 'user/message', { content: `my key is ${secret}, and again ${secret}` }),
    { ...ev(2, 'assistant/message', { turn: 1, step: 0, content: [{ type: 'text', text: 'noted' }] }), [secret.slice(0, 7)]: 'a key named like it stays' },
    ev(3, 'tool/result', { turn: 1, step: 0, callId: 'c', content: [{ type: 'text', text: `env: KEY=${secret}` }], extra: { nested: [secret] } }),
    ev(4, 'turn/end', { turn: 1, reason: { kind: 'completed' } }),
  ]
  const events = (): SessionEvent[] => structuredClone(EVENTS)

  for (const version of [0, 1] as const) {
    test(`version ${version}: every match in string values is replaced, keys and structure kept, a log/redacted event appended; the secret is gone from the file`, async () => {
      const root = await tmpRoot()
      const p = createJsonlPersistence({ root, formatVersion: version })
      await p.create(meta('r'))
      await p.append('r', events())
      await p.close('r')
      const path = p.locate(meta('r')).path
      expect(await p.redact('r', { pattern: /sk-live-[0-9a-f]+/, dryRun: true })).toMatchObject({ matches: 4, seqs: [1, 3], rewritten: false })
      expect(await readFile(path, 'utf8')).toContain(secret)
      const report = await p.redact('r', { pattern: 'sk-live-[0-9a-f]+' })
      expect(report).toMatchObject({ matches: 4, seqs: [1, 3], rewritten: true })
      const text = await readFile(path, 'utf8')
      expect(text).not.toContain(secret)
      if (version === 1) expect(text.split('\n').slice(0, -1).every(sealedOk)).toBe(true)
      else expect(text).not.toContain('"crc"')
      const loaded = await p.load('r')
      await p.close('r')
      const expected = events()
      expect(loaded.events.slice(0, 5)).toEqual([
        expected[0],
        { ...expected[1], data: { content: 'my key is [REDACTED], and again [REDACTED]' } },
        expected[2],
        { ...expected[3], data: { turn: 1, step: 0, callId: 'c', content: [{ type: 'text', text: 'env: KEY=[REDACTED]' }], extra: { nested: ['[REDACTED]'] } } },
        expected[4],
      ])
      expect(loaded.events[5]).toMatchObject({ seq: 5, type: 'log/redacted', ignorable: true, data: { matches: 4, seqs: [1, 3], replacement: '[REDACTED]' } })
      expect(JSON.stringify(loaded.events[5])).not.toContain('sk-live')
      // nothing left to redact: nothing is rewritten
      expect(await p.redact('r', { pattern: /sk-live-[0-9a-f]+/ })).toMatchObject({ matches: 0, rewritten: false })
    })
  }

  test('a field named __proto__ (an own field of parsed JSON) is kept, redacted inside like any other', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('proto'))
    const event = JSON.parse(`{"seq":0,"type":"note","time":1,"__proto__":{"top":"${secret}"},"data":{"__proto__":{"x":"keep"},"msg":"${secret}"}}`) as SessionEvent
    await p.append('proto', [event])
    await p.close('proto')
    expect(await p.redact('proto', { pattern: secret })).toMatchObject({ matches: 2, seqs: [0] })
    const loaded = await p.load('proto')
    await p.close('proto')
    const stored = loaded.events[0] as unknown as Record<string, unknown>
    expect(Object.keys(stored)).toEqual(['seq', 'type', 'time', '__proto__', 'data'])
    expect(JSON.stringify(stored)).toBe('{"seq":0,"type":"note","time":1,"__proto__":{"top":"[REDACTED]"},"data":{"__proto__":{"x":"keep"},"msg":"[REDACTED]"}}')
  })

  test('an event nested 1,800 deep (append takes it) is redacted: the walks keep a stack of their own', async () => {
    // They called themselves once a level, and a redaction of such an event failed E_IO
    // (maximum call stack size exceeded), dry run included (a hunt's find).
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('deep'))
    let deep: unknown = `key ${secret} end`
    for (let i = 0; i < 1800; i++) deep = i % 2 ? [deep] : { k: deep }
    await p.append('deep', [{ seq: 0, type: 'note', time: 1, data: { deep, top: secret } as never }])
    await p.close('deep')
    expect(await p.redact('deep', { pattern: secret, dryRun: true })).toMatchObject({ matches: 2, seqs: [0], rewritten: false })
    expect(await p.redact('deep', { pattern: secret })).toMatchObject({ matches: 2, seqs: [0] })
    const text = await readFile(p.locate(meta('deep')).path, 'utf8')
    expect([text.includes(secret), text.includes('key [REDACTED] end')]).toEqual([false, true])
    const loaded = await p.load('deep')
    await p.close('deep')
    let inner: unknown = (loaded.events[0]!.data as { deep: unknown }).deep
    for (let i = 1799; i >= 0; i--) inner = i % 2 ? (inner as unknown[])[0] : (inner as { k: unknown }).k
    expect(inner).toBe('key [REDACTED] end')
  })

  test('a locked session is skipped; a pattern that matches the empty string, or is not one, is E_CONFIG', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('l'))
    await p.append('l', events())
    expect(await codeOf(createJsonlPersistence({ root }).redact('l', { pattern: 'sk' }))).toBe('E_LOCKED')
    await p.close('l')
    for (const bad of [{ pattern: 'x*' }, { pattern: '' }, { pattern: '(' }, { pattern: 3 }, {}, { pattern: 'sk', replacement: 1 }]) {
      expect(await codeOf(p.redact('l', bad as never))).toBe('E_CONFIG')
    }
    // No match of '' itself, but empty matches inside the text (a word boundary, a lookahead):
    // they would insert the replacement. Refused, dry run too, nothing written.
    const path = p.locate(meta('l')).path
    const bytes = await readFile(path)
    for (const pattern of ['\\b', '(?=live)', 'sk|(?=0123)']) {
      for (const dryRun of [true, false]) {
        const err = await p.redact('l', { pattern, dryRun }).then(() => undefined, (e: unknown) => e as Error & { code?: string })
        expect(err?.code).toBe('E_CONFIG')
        expect(err?.message).toMatch(/matches an empty string in event seq \d+/)
      }
    }
    expect((await readFile(path)).equals(bytes)).toBe(true)
  })

  test('the backend redact option is applied before serialization, also through the plugin: a secret never reaches the disk', async () => {
    const root = await tmpRoot()
    const redact = (e: SessionEvent): SessionEvent => JSON.parse(JSON.stringify(e).replaceAll(secret, '[key]')) as SessionEvent
    const p = createJsonlPersistence({ root, redact })
    await p.create(meta('cfg'))
    await p.append('cfg', events())
    await p.close('cfg')
    const text = await readFile(p.locate(meta('cfg')).path, 'utf8')
    expect(text).not.toContain(secret)
    expect((await p.read('cfg', { fromSeq: 1, toSeq: 2 })).events[0]!.data).toEqual({ content: 'my key is [key], and again [key]' })
    // a redactor that throws or changes a seq refuses the batch, writing nothing
    const throwing = createJsonlPersistence({ root, redact: () => { throw new Error('no') } })
    await throwing.create(meta('t'))
    expect(await codeOf(throwing.append('t', turn(0, 1)))).toBe('E_INVALID_EVENT')
    const reseq = createJsonlPersistence({ root, redact: (e) => ({ ...e, seq: e.seq + 1 }) })
    await reseq.create(meta('q'))
    expect(await codeOf(reseq.append('q', turn(0, 1)))).toBe('E_INVALID_EVENT')
    expect((await p.list()).map((l) => l.meta.id)).toEqual(['cfg'])

    const plugin = sessionPersistencePlugin({ root: join(root, 'plugin'), redact })
    const host = createReferenceHost()
    await plugin.apply(host)
    const s = host.startSession({ id: 'hosted' })
    s.runTurn({ user: `use ${secret}`, steps: [{ text: 'ok' }] })
    await plugin.flush()
    await plugin.dispose()
    const hosted = await readFile(createJsonlPersistence({ root: join(root, 'plugin') }).locate(meta('hosted')).path, 'utf8')
    expect(hosted).toContain('use [key]')
    expect(hosted).not.toContain(secret)
  })
})

describe('repair --truncate-at-damage', () => {
  test('keeps the whole log aside, cuts at the first damaged line, closes the open turn, records log/truncated; the session loads again', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('d'))
    await p.append('d', [...turn(0, 1), ...turn(4, 2), ev(8, 'turn/start', { turn: 3 }), ev(9, 'user/message', { content: 'last' }), ...turn(10, 4)])
    await p.close('d')
    const path = p.locate(meta('d')).path
    const original = await readFile(path, 'utf8')
    const lines = original.split('\n')
    // one flipped character in line 8 (seq 6): committed damage, a checksum mismatch
    lines[7] = lines[7]!.replace('answer 2', 'answer 3')
    const damaged = lines.join('\n')
    await writeFile(path, damaged)
    const refused = (await p.load('d').then(
      () => ({ code: 'resolved', line: 0, message: '' }),
      (e: unknown) => e as { code: string; line: number; message: string },
    ))
    expect(refused).toMatchObject({ code: 'E_CORRUPT', line: 8 })
    expect(refused.message).toContain('checksum mismatch')

    expect(await p.truncateAtDamage('d', { dryRun: true })).toMatchObject({ cut: { line: 8 }, keptEvents: 6 })
    expect(await readFile(path, 'utf8')).toBe(damaged)
    const report = await p.truncateAtDamage('d')
    expect(report.cut).toMatchObject({ line: 8, byteOffset: Buffer.byteLength(lines.slice(0, 7).join('\n')) + 1, reason: 'checksum mismatch' })
    expect(report.keptAt).toMatch(/^\.damaged-.*d\.jsonl$/)
    expect(await readFile(join(dirname(path), report.keptAt!), 'utf8')).toBe(damaged)
    const loaded = await p.load('d')
    await p.close('d')
    expect(loaded.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'assistant/message', 'turn/end', 'turn/start', 'user/message', 'turn/end', 'log/truncated'])
    expect(loaded.events[6]).toMatchObject({ seq: 6, type: 'turn/end', data: { turn: 2, reason: { kind: 'interrupted' } } })
    expect(loaded.events[7]).toMatchObject({ seq: 7, ignorable: true, data: { line: 8, keptAt: report.keptAt, reason: 'checksum mismatch' } })
    expect(loaded.repair).toBeUndefined()
    // the copy kept aside is never listed nor loaded; nothing more to cut
    expect((await p.list()).map((l) => l.meta.id)).toEqual(['d'])
    expect(await p.truncateAtDamage('d')).toEqual({ id: 'd', path })
  })

  test('a damaged header cannot be cut (E_CORRUPT, untouched); a locked session E_LOCKED; a version-0 log with a broken committed line is cut too', async () => {
    const root = await tmpRoot()
    const path = await v0Session(root, 'h')
    const bytes = await readFile(path, 'utf8')
    await writeFile(path, bytes.replace('"type":"session"', '"type":"sessio"'))
    expect(await codeOf(createJsonlPersistence({ root }).truncateAtDamage('h'))).toBe('E_CORRUPT')
    expect(await readFile(path, 'utf8')).toBe(bytes.replace('"type":"session"', '"type":"sessio"'))
    await writeFile(path, bytes.replace('"question 2"', '"question 2'))
    const holder = createJsonlPersistence({ root })
    expect(await codeOf(holder.load('h'))).toBe('E_CORRUPT')
    const report = await createJsonlPersistence({ root }).truncateAtDamage('h')
    expect(report.cut).toMatchObject({ line: 7 })
    const loaded = await holder.load('h')
    expect(loaded.events.map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6])
    expect(loaded.events.at(-1)!.type).toBe('log/truncated')
    expect(await codeOf(createJsonlPersistence({ root }).truncateAtDamage('h'))).toBe('E_LOCKED')
    await holder.close('h')
  })

  test('a zeroed line before the damaged one: the log is cut at the zeroed line, and the report and log/truncated say so', async () => {
    const root = await tmpRoot()
    const p = createJsonlPersistence({ root })
    await p.create(meta('z'))
    await p.append('z', [...turn(0, 1), ...turn(4, 2), ...turn(8, 3)])
    await p.close('z')
    const path = p.locate(meta('z')).path
    const lines = (await readFile(path, 'utf8')).split('\n')
    const offsetOf = (i: number) => Buffer.byteLength(lines.slice(0, i).join('\n')) + 1
    // line 4 (seq 2) zeroed as a crash leaves blocks never synced; line 8 (seq 6) one flipped character
    lines[3] = '\0'.repeat(lines[3]!.length)
    lines[7] = lines[7]!.replace('answer 2', 'answer 3')
    await writeFile(path, lines.join('\n'))
    expect(await p.truncateAtDamage('z', { dryRun: true })).toMatchObject({ cut: { line: 4, byteOffset: offsetOf(3) }, keptEvents: 2 })
    const report = await p.truncateAtDamage('z')
    expect(report.cut).toMatchObject({ line: 4, byteOffset: offsetOf(3) })
    expect(report.cut!.reason).toMatch(/NUL bytes/)
    const loaded = await p.load('z')
    await p.close('z')
    expect(loaded.events.map((e) => e.type)).toEqual(['turn/start', 'user/message', 'turn/end', 'log/truncated'])
    expect(loaded.events.at(-1)).toMatchObject({ data: { line: 4, byteOffset: offsetOf(3), reason: report.cut!.reason } })
  })
})

describe('the in-memory backend', () => {
  test('takes redact too: what it stores is redacted; a redactor that is not a function is E_CONFIG', async () => {
    const { createMemoryPersistence } = await import('../src/testing/index.js')
    const p = createMemoryPersistence({ redact: (e) => JSON.parse(JSON.stringify(e).replaceAll('question', 'q')) as SessionEvent })
    await p.create(meta('m'))
    await p.append('m', turn(0, 1))
    await p.close('m')
    expect((await p.readRaw('m')).eventLines.join('\n')).not.toContain('question')
    expect(() => createMemoryPersistence({ redact: 'x' as never })).toThrow(expect.objectContaining({ code: 'E_CONFIG' }))
  })
})

test('repair --truncate-at-damage of a session whose id is as long as ids may be: the kept copy gets a name that fits', async () => {
  const root = await tmpRoot()
  const id = 'x'.repeat(238)
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  await p.append(id, [...turn(0, 1), ...turn(4, 2)])
  await p.close(id)
  const path = p.locate(meta(id)).path
  const lines = (await readFile(path, 'utf8')).split('\n')
  lines[2] = lines[2]!.replace('question 1', 'question 9')
  await writeFile(path, lines.join('\n'))
  const report = await p.truncateAtDamage(id)
  expect(report.cut?.line).toBe(3)
  expect(Buffer.byteLength(report.keptAt!)).toBeLessThanOrEqual(255)
  expect(await readFile(join(dirname(path), report.keptAt!), 'utf8')).toBe(lines.join('\n'))
  expect((await p.inspect(id)).events.at(-1)!.type).toBe('log/truncated')
})

test('redact of a log with a torn tail and an open turn reports the repair: would be made on a dry run or with no match (nothing written), made in the rewritten log', async () => {
  const root = await tmpRoot()
  const secret = 'sk-live-feedface'
  // the open turn's pending call carries the secret in its id: its closer holds it too
  const call = ev(10, 'tool/call', { turn: 3, step: 0, callId: `call-${secret}`, name: 'grep', arguments: {} })
  const path = await v0Session(root, 'torn', [ev(8, 'turn/start', { turn: 3 }), ev(9, 'user/message', { content: `key ${secret}` }), call])
  await appendFile(path, '{"seq":11,"type":"assistant/ch') // a torn tail, after an open turn
  const before = await readFile(path)
  const p = createJsonlPersistence({ root })
  const tornBytes = '{"seq":11,"type":"assistant/ch'.length
  const dry = await p.redact('torn', { pattern: 'sk-live-[0-9a-f]+', dryRun: true })
  // matches: the message, the call, and the closer that answers the call (it repeats its id)
  expect(dry).toMatchObject({ matches: 3, seqs: [9, 10, 11], rewritten: false, repair: { persisted: false, droppedBytes: tornBytes, droppedLines: 1 } })
  expect(dry.repair?.closers.map((c) => c.type)).toEqual(['tool/result', 'turn/end'])
  // a dry run reports the closers as the redaction would write them: never the matched text
  const none = await p.redact('torn', { pattern: 'no-such-text' })
  expect(none).toMatchObject({ matches: 0, rewritten: false, repair: { persisted: false, droppedBytes: tornBytes } })
  expect((await readFile(path)).equals(before)).toBe(true) // neither wrote a byte
  expect((dry.repair?.closers[0]?.data as { callId: string }).callId).toBe('call-[REDACTED]')
  expect(JSON.stringify(dry)).not.toContain(secret)
  const done = await p.redact('torn', { pattern: 'sk-live-[0-9a-f]+' })
  expect(done).toMatchObject({ matches: 3, rewritten: true, repair: { persisted: true, droppedBytes: tornBytes, droppedLines: 1 } })
  const text = await readFile(path, 'utf8')
  expect(text).not.toContain('assistant/ch"')
  expect(text).not.toContain(secret)
  const loaded = await p.load('torn')
  expect(loaded.repair).toBeUndefined() // the rewritten log needs none
  expect(loaded.events.slice(11).map((e) => e.type)).toEqual(['tool/result', 'turn/end', 'log/redacted'])
  // the closers reported are those the rewritten log holds, redacted: the secret is in neither
  expect(done.repair?.closers).toEqual(loaded.events.slice(11, 13))
  expect(JSON.stringify(done)).not.toContain(secret)
  await p.close('torn')
})

test('regression: a secret only in the bytes a repair cuts (a torn tail, a line after zeros) is removed: the log is rewritten without them, cutMatches reported, never the text', async () => {
  const secret = 'hunter2-SECRET'
  for (const shape of ['torn tail', 'after zeros'] as const) {
    const root = await tmpRoot()
    const path = await v0Session(root, 's')
    const events = (await createJsonlPersistence({ root }).inspect('s')).events
    if (shape === 'torn tail') await appendFile(path, `{"seq":8,"type":"user/message","time":1,"data":{"content":"${secret}`)
    else await appendFile(path, Buffer.concat([Buffer.alloc(4096), Buffer.from(`{"seq":8,"type":"user/message","time":1,"data":{"content":"${secret}"}}\n`)]))
    const p = createJsonlPersistence({ root })
    const dry = await p.redact('s', { pattern: 'hunter2-[A-Z]+', dryRun: true })
    expect([shape, dry.matches, dry.cutMatches, dry.rewritten]).toEqual([shape, 0, 1, false])
    expect(await readFile(path, 'utf8')).toContain(secret)
    const done = await p.redact('s', { pattern: 'hunter2-[A-Z]+' })
    expect([shape, done.matches, done.cutMatches, done.rewritten, done.repair?.persisted]).toEqual([shape, 0, 1, true, true])
    expect(JSON.stringify(done)).not.toContain(secret)
    const text = await readFile(path, 'utf8')
    expect(text).not.toContain(secret)
    const loaded = await p.load('s')
    expect(loaded.repair).toBeUndefined()
    expect(loaded.events.slice(0, events.length)).toEqual(events)
    expect(loaded.events.at(-1)).toMatchObject({ type: 'log/redacted', data: { matches: 0, seqs: [], cutMatches: 1 } })
    await p.close('s')
  }
})

test('regression: a string pattern is Unicode-aware (the u flag): \\p{Nd} matches digits, . a whole emoji; a pattern invalid in that mode is E_CONFIG', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('u'))
  await p.append('u', [ev(0, 'turn/start', { turn: 1 }), ev(1, 'user/message', { content: 'card 4111111111111111, pin:😀 rest' }), ev(2, 'turn/end', { turn: 1, reason: { kind: 'completed' } })])
  await p.close('u')
  expect(await p.redact('u', { pattern: '\\p{Nd}{16}' })).toMatchObject({ matches: 1, rewritten: true })
  expect(await p.redact('u', { pattern: 'pin:.' })).toMatchObject({ matches: 1, rewritten: true })
  const loaded = await p.load('u')
  expect(loaded.events[1]!.data).toEqual({ content: 'card [REDACTED], [REDACTED] rest' })
  await p.close('u')
  expect(((await p.redact('u', { pattern: '[\\w-.]' }).catch((e: unknown) => e)) as { code?: string }).code).toBe('E_CONFIG')
})

test('regression: migrate of a version-1 log that needs a repair counts its events the same in the dry run and the real run (no closers: it is left as it is)', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('v1'))
  await p.append('v1', [ev(0, 'turn/start', { turn: 1 }), ev(1, 'user/message', { content: 'open turn' })])
  await p.close('v1')
  const dry = await p.migrate('v1', { dryRun: true })
  const real = await p.migrate('v1')
  expect([dry.fromVersion, dry.events, real.events, real.migrated]).toEqual([1, 2, 2, false])
})

test('regression: migrate of a damaged version-1 log refuses it (E_CORRUPT) as its dry run does, never "already version 1"', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('bad'))
  await p.append('bad', [...turn(0, 1), ...turn(4, 2)])
  await p.close('bad')
  const path = p.locate(meta('bad')).path
  const bytes = await readFile(path)
  const third = bytes.indexOf('question', bytes.indexOf('\n', bytes.indexOf('\n') + 1))
  bytes[third] = 'Q'.charCodeAt(0) // a changed byte in a complete line: checksum mismatch
  await writeFile(path, bytes)
  const dry = await p.migrate('bad', { dryRun: true }).catch((e: { code?: string }) => e.code)
  const real = await p.migrate('bad').catch((e: { code?: string }) => e.code)
  expect([dry, real]).toEqual(['E_CORRUPT', 'E_CORRUPT'])
  expect((await readFile(path)).equals(bytes)).toBe(true)
})
