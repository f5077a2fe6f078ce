import { appendFile, readFile } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { rejection } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

// The bytes a load's repair would cut are searched by redact, but as raw JSON text: a secret
// holding a quote, a backslash, a newline or a tab is escaped there (`\"`, `\\`, `\n`, `\t`), a
// pattern for the secret found nothing and the torn tail kept it on disk. A pattern that matched
// only an empty string in those bytes was not refused; a sticky RegExp matched nothing.

const meta = (id: string) => ({ id, createdAt: 1, delegationDepth: 0, cwd: '/p' })

async function withTornTail(root: string, id: string, content: string): Promise<string> {
  const p = createJsonlPersistence({ root })
  await p.create(meta(id))
  await p.append(id, [
    { seq: 0, type: 'turn/start', time: 2, data: { turn: 1 } },
    { seq: 1, type: 'turn/end', time: 3, data: { turn: 1, reason: { kind: 'completed' } } },
  ])
  await p.close(id)
  const path = p.locate(meta(id)).path
  // A crash mid-append: the line holding the secret has no end.
  await appendFile(path, JSON.stringify({ seq: 2, type: 'user/message', time: 4, data: { content } }).slice(0, -3))
  return path
}

test.each([
  ['a quote', 'pa"ss', 'pa"ss'],
  ['a backslash', 'pa\\ss', 'pa\\\\ss'],
  ['a newline', 'pa\nss', 'pa\\nss'],
  ['a tab', 'pa\tss', 'pa\\tss'],
  ['a \\u escape', 'pa\u0001ss', 'pa\\u0001ss'],
])('a secret with %s in a torn tail is found by a pattern for the decoded secret and cut', async (_name, secret, pattern) => {
  const root = await tmpRoot()
  const path = await withTornTail(root, 's', `my ${secret} and more`)
  const result = await createJsonlPersistence({ root }).redact('s', { pattern })
  expect([result.cutMatches, result.rewritten]).toEqual([1, true])
  const text = await readFile(path, 'utf8')
  expect(text).not.toContain(JSON.stringify(secret).slice(1, -1))
  expect(text.endsWith('\n')).toBe(true)
})

test('a pattern that matches only an empty string in the bytes a repair would cut is refused (E_CONFIG), the log untouched', async () => {
  const root = await tmpRoot()
  const path = await withTornTail(root, 's', 'zzz')
  const before = await readFile(path)
  const p = createJsonlPersistence({ root })
  expect((await rejection(p.redact('s', { pattern: '(?=zzz)' }))).code).toBe('E_CONFIG')
  expect((await rejection(p.redact('s', { pattern: 'turn|(?=zzz)' }))).code).toBe('E_CONFIG')
  expect(await readFile(path)).toEqual(before)
})

test('a sticky RegExp is applied globally all the same: every match is found', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('f'))
  await p.append('f', [{ seq: 0, type: 'user/message', time: 2, data: { content: 'Secret one\nsecret two, secret three' } }])
  await p.close('f')
  const result = await p.redact('f', { pattern: /secret/y })
  expect(result.matches).toBe(2)
  const loaded = await p.load('f')
  expect(loaded.events[0]!.data).toEqual({ content: 'Secret one\n[REDACTED] two, [REDACTED] three' })
  await p.close('f')
})

test('an escape split between two pieces of the cut bytes (1 MiB each) is decoded all the same', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('big'))
  await p.append('big', [{ seq: 0, type: 'user/message', time: 2, data: { content: 'q' } }])
  await p.close('big')
  const path = p.locate(meta('big')).path
  const head = '{"seq":1,"type":"user/message","time":4,"data":{"content":"'
  // The backslash of `\"` is the last byte of the first piece read, its quote the first of the next.
  const tail = `${head}${'a'.repeat((1 << 20) - 3 - head.length)}my\\"pw and more`
  expect(tail.indexOf('\\')).toBe((1 << 20) - 1)
  await appendFile(path, tail)
  const result = await p.redact('big', { pattern: 'my"pw' })
  expect([result.cutMatches, result.rewritten]).toEqual([1, true])
  expect(await readFile(path, 'utf8')).not.toContain('pw and more')
})
