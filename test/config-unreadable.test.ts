import { expect, test } from 'vitest'
import { createJsonlPersistence, isSessionPersistenceError, sessionPersistencePlugin } from '../src/index.js'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { createMemoryPersistence } from '../src/testing/index.js'
import { openAiSdkSession } from '../src/adapters/ai-sdk/index.js'
import { createSessionStore } from '../src/adapters/claude-agent-sdk/index.js'
import { SessionCheckpointSaver } from '../src/adapters/langgraph/index.js'
import { JsonlSession } from '../src/adapters/openai-agents/index.js'

// §9: every error the package throws on purpose is a SessionPersistenceError with a stable code.
// A configuration or options object that cannot even be read (a revoked Proxy, a trap or getter
// that throws) is a bad configuration like any other: E_CONFIG, the throw as its cause.

const revoked = (): object => {
  const r = Proxy.revocable({}, {})
  r.revoke()
  return r.proxy
}
const throwing = (): object =>
  new Proxy({}, {
    get() {
      throw new Error('trap')
    },
    has() {
      throw new Error('trap')
    },
    ownKeys() {
      throw new Error('trap')
    },
  })

async function refusal(run: () => unknown): Promise<unknown> {
  try {
    await run()
  } catch (err) {
    return err
  }
  return 'no error'
}

const cases: [string, () => unknown][] = [
  ['sessionPersistencePlugin(revoked)', () => sessionPersistencePlugin(revoked() as never)],
  ['sessionPersistencePlugin(throwing)', () => sessionPersistencePlugin(throwing() as never)],
  ['sessionPersistencePlugin({ persistence, logger: revoked })', () => sessionPersistencePlugin({ persistence: createMemoryPersistence(), logger: revoked() as never })],
  ['createJsonlPersistence(revoked)', () => createJsonlPersistence(revoked() as never)],
  ['createJsonlPersistence(throwing)', () => createJsonlPersistence(throwing() as never)],
  ['createJsonlPersistence({ root, staleLockMs: revoked })', () => createJsonlPersistence({ root: '/tmp/unused', staleLockMs: revoked() as never })],
  ['createPostgresPersistence(revoked)', () => createPostgresPersistence(revoked() as never)],
  ['createPostgresPersistence({ connectionString, connectTimeoutMs: revoked })', () => createPostgresPersistence({ connectionString: 'postgres://127.0.0.1:1/x', connectTimeoutMs: revoked() } as never)],
  ['plugin.flush(id, revoked)', () => sessionPersistencePlugin({ persistence: createMemoryPersistence() }).flush('a', revoked() as never)],
  ['plugin.dispose(revoked)', () => sessionPersistencePlugin({ persistence: createMemoryPersistence() }).dispose(revoked() as never)],
  ['openAiSdkSession(revoked)', () => openAiSdkSession(revoked() as never)],
  ['openAiSdkSession({ persistence, id, meta: throwing })', () => openAiSdkSession({ persistence: createMemoryPersistence(), id: 'a', meta: throwing() } as never)],
  ['createSessionStore(revoked)', () => createSessionStore(revoked() as never)],
  ['new SessionCheckpointSaver(revoked)', () => new SessionCheckpointSaver(revoked() as never)],
  ['new JsonlSession(throwing)', () => new JsonlSession(throwing() as never)],
  ['plugin.dispose(throwing)', () => sessionPersistencePlugin({ persistence: createMemoryPersistence() }).dispose(throwing() as never)],
]

test.each(cases)('%s is refused E_CONFIG naming why, with the throw as its cause', async (_name, run) => {
  const err = await refusal(run)
  expect(isSessionPersistenceError(err)).toBe(true)
  expect(err).toMatchObject({ code: 'E_CONFIG', message: expect.stringMatching(/cannot be read \((TypeError: Cannot perform|Error: trap)/) })
  expect((err as { cause?: unknown }).cause).toBeDefined()
})
