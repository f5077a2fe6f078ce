// `list()` across threads reads the thread id each session's header names. A header naming a
// thread id no saver call accepts (a lone surrogate, which has no session id; an empty one),
// written through the persistence directly or by a foreign tool, is that one session left out
// and reported (§4.6: a listing never fails because of one bad file), not the whole listing's
// failure.
import { describe, expect, it } from 'vitest'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { createJsonlPersistence } from '../src/index.js'
import type { ListProblem } from '../src/persistence.js'
import { checkpoint, freshRoots, meta, thread } from './helpers/langgraph-checkpoints.js'

const root = freshRoots()

describe('list() across threads with a header naming an invalid thread id', () => {
  it('leaves that session out, reports it E_INVALID_ID at its path, and lists the other threads', async () => {
    const r = await root()
    const writer = new SessionCheckpointSaver({ persistence: createJsonlPersistence({ root: r }), idleMs: 0 })
    const good = await writer.put(thread('good'), checkpoint({ a: 1 }), meta(0), { a: 1 })
    await writer.close()
    const persistence = createJsonlPersistence({ root: r })
    const foreign = [
      { id: 'foreign-surrogate', thread: 'x\ud800' },
      { id: 'foreign-empty', thread: '' },
    ]
    for (const f of foreign) {
      await persistence.create({ id: f.id, createdAt: 1, delegationDepth: 0, langgraphThreadId: f.thread })
      await persistence.append(f.id, [{ seq: 0, type: 'note', time: 1 }])
      await persistence.close(f.id)
    }

    const problems: ListProblem[] = []
    const saver = new SessionCheckpointSaver({ persistence, idleMs: 0, onProblem: (p) => problems.push(p) })
    const listed: string[] = []
    for await (const tuple of saver.list({})) listed.push(`${tuple.config.configurable?.thread_id}:${tuple.checkpoint.id}`)
    expect(listed).toEqual([`good:${good.configurable?.checkpoint_id}`])
    const pathOf = (id: string) => persistence.locate({ id, createdAt: 0, delegationDepth: 0 }).path
    expect(problems.map((p) => [p.code, p.path]).sort()).toEqual([
      ['E_INVALID_ID', pathOf('foreign-empty')],
      ['E_INVALID_ID', pathOf('foreign-surrogate')],
    ])
    for (const p of problems) expect(p.message).toContain('left out of list()')
    // The thread listed is still the thread's own: a list of it alone gives the same.
    const own: string[] = []
    for await (const tuple of saver.list(thread('good'))) own.push(tuple.checkpoint.id)
    expect(own).toEqual([good.configurable?.checkpoint_id])
    await saver.close()
  })

  it('without onProblem the listing still goes on, the session left out told as a warning on stderr', async () => {
    const r = await root()
    const persistence = createJsonlPersistence({ root: r })
    const saver = new SessionCheckpointSaver({ persistence, idleMs: 0 })
    const good = await saver.put(thread('good'), checkpoint({ a: 1 }), meta(0), { a: 1 })
    await persistence.create({ id: 'foreign', createdAt: 1, delegationDepth: 0, langgraphThreadId: 'x\ud800' })
    await persistence.append('foreign', [{ seq: 0, type: 'note', time: 1 }])
    await persistence.close('foreign')
    const warnings: string[] = []
    const warn = console.warn
    console.warn = (message: unknown) => void warnings.push(String(message))
    const listed: string[] = []
    try {
      for await (const tuple of saver.list({})) listed.push(tuple.checkpoint.id)
    } finally {
      console.warn = warn
    }
    expect(listed).toEqual([good.configurable?.checkpoint_id])
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toContain('session foreign left out of list()')
    await saver.close()
  })
})
