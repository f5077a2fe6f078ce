// Two processes on one thread: while the first holds it, the second's run fails with E_LOCKED
// and writes nothing; once the first releases it, the second's run continues the same log after
// the first's checkpoints, never interleaved with them.
import { readFile, rm } from 'node:fs/promises'
import { afterAll, describe, expect, it } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { type Message, runChild } from './helpers/langgraph-child.js'
import { freshRoot, logEvents } from './helpers/langgraph-checkpoints.js'

describe('two processes writing one thread', () => {
  const made: string[] = []
  afterAll(async () => {
    for (const p of made) await rm(p, { recursive: true, force: true })
  })

  it('the second gets E_LOCKED until the first releases the thread', async () => {
    const root = await freshRoot()
    const trace = `${root}.trace`
    made.push(root, trace)
    const backend = `jsonl:${root}`
    const path = createJsonlPersistence({ root }).locate({ id: 'langgraph:shared', createdAt: 0, delegationDepth: 0 }).path

    let holding!: () => void
    const held = new Promise<void>((r) => (holding = r))
    let released!: () => void
    const wasReleased = new Promise<void>((r) => (released = r))
    let holder!: { send(m: string): void }
    const first = runChild(['hold', backend, 'shared', trace], (m: Message, child) => {
      holder = child as never
      if (m.done) holding()
      if (m.released) released()
    })
    const exitedEarly = (r: { stderr: string }) => {
      throw new Error(`the first process exited before holding the thread: ${r.stderr}`)
    }
    await Promise.race([held, first.then(exitedEarly)])
    const before = await readFile(path)

    // After an error the runner exits by itself (it waits for no message): telling it to exit
    // raced its disconnect (EPIPE).
    const refused = await runChild(['hold', backend, 'shared', trace])
    expect(refused.error?.code).toBe('E_LOCKED')
    expect(refused.puts).toEqual([])
    expect((await readFile(path)).equals(before)).toBe(true)

    holder.send('release')
    await Promise.race([wasReleased, first.then(exitedEarly)])
    const second = runChild(['hold', backend, 'shared', trace], (m, child) => {
      if (m.done) child.send('release')
      if (m.released) child.send('exit')
    })
    const report = await second
    expect(report.error).toBeUndefined()
    expect(report.done?.messages.length).toBe(8) // two complete runs on one thread
    holder.send('exit')
    const firstReport = await first

    const checkpoints = (await logEvents(path)).filter((e) => e.type === 'langgraph/checkpoint').map((e) => e.data.id as string)
    const firstIds = firstReport.puts
    const secondIds = report.puts
    expect(checkpoints).toEqual([...firstIds, ...secondIds])
  })
})
