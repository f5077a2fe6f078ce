import { expect, expectTypeOf, test } from 'vitest'
import {
  type JsonlSessionPersistence,
  type SessionMeta,
  type SessionPersistence,
  sessionPersistencePlugin,
} from '../src/index.js'
import { createMemoryPersistence, createReferenceHost } from '../src/testing/index.js'
import { oneTurn, scriptedBackend } from './helpers/plugin-setup.js'
import { tmpRoot } from './helpers/tmp-root.js'

test('over a root, plugin.persistence is the JSONL backend: fork, closeAll and delete are visible and work', async () => {
  const root = await tmpRoot()
  const plugin = sessionPersistencePlugin({ root, flushDelayMs: 10_000 })
  expectTypeOf(plugin.persistence).toEqualTypeOf<JsonlSessionPersistence>()
  expectTypeOf(plugin.persistence.fork).returns.resolves.toEqualTypeOf<SessionMeta>()
  expectTypeOf(plugin.persistence.delete).toBeFunction()
  expectTypeOf(plugin.persistence.closeAll).toBeFunction()
  const host = createReferenceHost()
  await plugin.apply(host)
  const s = host.startSession({ id: 'parent' })
  s.runTurn(oneTurn(1))
  s.runTurn(oneTurn(2))
  await plugin.flush()
  const cut = s.events.findIndex((e) => e.type === 'turn/end') + 1
  const child = await plugin.persistence.fork('parent', { id: 'child', seedLength: cut })
  expect(child).toMatchObject({ id: 'child', parentSession: 'parent', seedLength: cut })
  expect(plugin.persistence.root).toBe(root)
  await plugin.persistence.closeAll() // the child's writer state; the plugin's own session reopens on demand
  expect((await plugin.persistence.inspect('child')).events).toEqual(s.events.slice(0, cut))
  await plugin.dispose()
})

test('over another backend, plugin.persistence keeps that backend’s own type and members', async () => {
  const custom = Object.assign(createMemoryPersistence(), { describe: () => 'my-backend' })
  const plugin = sessionPersistencePlugin({ persistence: custom })
  expectTypeOf(plugin.persistence).toEqualTypeOf<typeof custom>()
  expectTypeOf(plugin.persistence).toHaveProperty('fork')
  expectTypeOf(plugin.persistence).toMatchTypeOf<SessionPersistence>()
  expect(plugin.persistence.describe()).toBe('my-backend')
  await plugin.dispose()
})

test('the logger is settable with a custom backend: unheard reports go to it, not to the console', async () => {
  const warnings: string[] = []
  const plugin = sessionPersistencePlugin({ persistence: createMemoryPersistence(), logger: { warn: (m) => warnings.push(m) } })
  const host = createReferenceHost()
  await plugin.apply(host)
  host.sessionEvents.emit('session/event', 'nobody', { seq: 0, type: 'turn/start', time: 1 })
  expect(warnings).toHaveLength(1)
  expect(warnings[0]?.startsWith('E_NOT_FOUND')).toBe(true)
  await plugin.dispose()
})

test('without listeners, a failure and its recovery both reach the logger; an error listener keeps recoveries off it', async () => {
  for (const withErrorListener of [false, true]) {
    const scripted = scriptedBackend(createMemoryPersistence())
    const warnings: string[] = []
    const plugin = sessionPersistencePlugin({ persistence: scripted.backend, logger: { warn: (m) => warnings.push(m) } })
    if (withErrorListener) plugin.on('error', () => {})
    const host = createReferenceHost()
    await plugin.apply(host)
    const s = host.startSession({ id: 'logged' })
    s.runTurn(oneTurn(1))
    await plugin.flush()
    scripted.failAppends('logged')
    s.runTurn(oneTurn(2))
    await expect(plugin.flush('logged')).rejects.toMatchObject({ code: 'E_IO' })
    scripted.healAppends('logged')
    await plugin.flush('logged')
    expect(warnings.map((w) => w.slice(0, 4))).toEqual(withErrorListener ? [] : ['E_IO', 'sess'])
    await plugin.dispose()
  }
})
