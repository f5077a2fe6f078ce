// A hunt's find: the AI SDK and Agents SDK adapters took option keys they do not know without a
// word (a misspelt `cwd` or `now` silently did nothing), while the core, the plugin and the
// PostgreSQL configs refuse one with E_CONFIG naming it. Now an unknown key is E_CONFIG naming
// it, and nothing is opened or written. The per-call options were already strict: pinned here.
import { readdir } from 'node:fs/promises'
import { describe, expect, it } from 'vitest'
import { openAiSdkSession } from '../src/adapters/ai-sdk/index.js'
import { JsonlSession } from '../src/adapters/openai-agents/index.js'
import { createJsonlPersistence } from '../src/jsonl/jsonl-persistence.js'
import { rejection, thrown } from './helpers/codes.js'
import { tmpRoot } from './helpers/tmp-root.js'

describe('AI SDK: openAiSdkSession options', () => {
  it('a misspelt key (Cwd) is E_CONFIG naming it; no session is created', async () => {
    const root = await tmpRoot()
    const persistence = createJsonlPersistence({ root })
    const err = await rejection(openAiSdkSession({ persistence, sessionId: 's', Cwd: '/proj' } as never))
    expect(err.code).toBe('E_CONFIG')
    expect(err.message).toContain('"Cwd"')
    expect(await readdir(root)).toEqual([])
    // The session is neither locked nor created: a correct open creates it.
    const session = await openAiSdkSession({ persistence, sessionId: 's', cwd: '/proj' })
    expect(session.meta.cwd).toBe('/proj')
    await session.close()
  })

  it("a turn's and compact's unknown options are refused (E_CONFIG, E_INVALID_EVENT), nothing written", async () => {
    const root = await tmpRoot()
    const persistence = createJsonlPersistence({ root })
    const session = await openAiSdkSession({ persistence, sessionId: 't' })
    const before = session.events.length
    expect(thrown(() => session.turn('hi', { durableinput: true } as never)).code).toBe('E_CONFIG')
    expect((await rejection(session.compact({ summary: 's', firstKeptseq: 0 } as never))).code).toBe('E_INVALID_EVENT')
    expect(session.events.length).toBe(before)
    await session.close()
  })
})

describe('Agents SDK: JsonlSession options', () => {
  it('a misspelt key (sessionID) is E_CONFIG naming it; nothing is opened', async () => {
    const root = await tmpRoot()
    const persistence = createJsonlPersistence({ root })
    const err = thrown(() => new JsonlSession({ persistence, sessionId: 's', sessionID: 's' } as never))
    expect(err.code).toBe('E_CONFIG')
    expect(err.message).toContain('"sessionID"')
    expect(await readdir(root)).toEqual([])
  })

  it('a bad field is named; options that are not an object say so (the message once read "JsonlSession: : …")', () => {
    const bad = thrown(() => new JsonlSession({ persistence: {}, sessionId: 's' } as never))
    expect(bad.code).toBe('E_CONFIG')
    expect(bad.message).toMatch(/persistence: /)
    const none = thrown(() => new JsonlSession(null as never))
    expect(none.code).toBe('E_CONFIG')
    expect(none.message).not.toContain(': :')
  })

  it("compact's unknown option is E_INVALID_EVENT, nothing written", async () => {
    const root = await tmpRoot()
    const persistence = createJsonlPersistence({ root })
    const session = new JsonlSession({ persistence, sessionId: 'c' })
    await session.addItems([{ role: 'user', content: 'hi' }])
    const events = (await persistence.inspect('c')).events.length
    expect((await rejection(session.compact({ summary: 's', keepitems: 1 } as never))).code).toBe('E_INVALID_EVENT')
    expect((await persistence.inspect('c')).events.length).toBe(events)
    await session.close()
  })
})
