// `list()` without a thread id lists every thread of the backend. One thread's damaged log is
// left out and reported (as the backend's own list() leaves out a log it cannot read, §4.6),
// not a failure of the whole listing; that thread's own getTuple and list still reject.
import { readFile, rm, writeFile } from 'node:fs/promises'
import { afterEach, expect, it } from 'vitest'
import { SessionCheckpointSaver, threadSessionId } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import type { ListProblem } from '../src/persistence.js'
import { checkpoint, codeOf, freshRoot, meta, thread } from './helpers/langgraph-checkpoints.js'

const roots: string[] = []
afterEach(async () => {
  await Promise.all(roots.splice(0).map((r) => rm(r, { recursive: true, force: true })))
})

it('a damaged thread is left out of list() across threads and reported; the others are listed', async () => {
  const root = await freshRoot()
  roots.push(root)
  const writer = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root }), idleMs: 0 })
  const good = await writer.put(thread('good'), checkpoint({ a: 1 }, { a: 1 }), meta(0), { a: 1 })
  await writer.put(thread('bad'), checkpoint({ a: 2 }, { a: 1 }), meta(0), { a: 1 })
  await writer.close()
  const persistence = createJsonlPersistence({ root })
  const path = persistence.locate({ id: threadSessionId('bad'), createdAt: 0, delegationDepth: 0 }).path
  const text = await readFile(path, 'latin1')
  const at = text.indexOf('\n', text.indexOf('\n') + 1) + 10 // a byte inside the second line
  await writeFile(path, `${text.slice(0, at)}${text[at] === 'x' ? 'y' : 'x'}${text.slice(at + 1)}`, 'latin1')

  const problems: ListProblem[] = []
  const saver = new SessionCheckpointSaver({ persistence, idleMs: 0, onProblem: (p) => problems.push(p) })
  const listed: string[] = []
  for await (const tuple of saver.list({ configurable: {} })) listed.push(`${tuple.config.configurable?.thread_id}:${tuple.checkpoint.id}`)
  expect(listed).toEqual([`good:${good.configurable?.checkpoint_id}`])
  expect(problems.map((p) => [p.code, p.path])).toEqual([['E_CORRUPT', path]])
  expect(problems[0]!.message).toContain('thread "bad"')
  // The damaged thread itself still refuses.
  expect(await codeOf(saver.getTuple(thread('bad')))).toBe('E_CORRUPT')
  expect(await codeOf(async () => {
    for await (const _ of saver.list(thread('bad'))) void _
  })).toBe('E_CORRUPT')
  await saver.close()
})
