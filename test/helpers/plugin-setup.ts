import { readFile } from 'node:fs/promises'
import {
  createJsonlPersistence,
  type SessionEvent,
  sessionPersistencePlugin,
  type SessionPersistenceError,
} from '../../src/index.js'
import { createFaultInjectingFileSystem, createReferenceHost } from '../../src/testing/index.js'
import { tmpRoot } from './tmp-root.js'

export async function pluginSetup(options: { flushDelayMs?: number; maxBufferedBytes?: number } = {}) {
  const root = await tmpRoot()
  const fs = createFaultInjectingFileSystem()
  const persistence = createJsonlPersistence({ root, fs, staleLockMs: 1000 })
  const plugin = sessionPersistencePlugin({ persistence, flushDelayMs: options.flushDelayMs ?? 10_000, ...(options.maxBufferedBytes ? { maxBufferedBytes: options.maxBufferedBytes } : {}) })
  const errors: SessionPersistenceError[] = []
  plugin.on('error', (e) => errors.push(e))
  const host = createReferenceHost({ cwd: '/project' })
  await plugin.apply(host)
  /** What a fresh instance reads from disk, without repairing anything. */
  const stored = async (id: string): Promise<readonly SessionEvent[]> => {
    const inspected = await createJsonlPersistence({ root }).inspect(id).catch(() => undefined)
    if (!inspected) return []
    return inspected.events.slice(0, inspected.events.length - (inspected.repair?.closers.length ?? 0))
  }
  const raw = (id: string, cwd = '/project') => readFile(persistence.locate({ id, createdAt: 0, delegationDepth: 0, cwd }).path, 'utf8')
  return { root, fs, persistence, plugin, host, errors, stored, raw }
}

export const oneTurn = (n: number) => ({
  user: `do thing ${n}`,
  header: { model: 'ref-1', tools: ['bash'] },
  steps: [{ text: `calling a tool for ${n}`, toolCalls: [{ name: 'bash', arguments: { cmd: `echo ${n}` } }], results: [`${n}`] }, { text: `done ${n}` }],
})
