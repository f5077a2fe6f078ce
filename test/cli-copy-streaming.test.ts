import { describe, expect, test } from 'vitest'
import type { Io } from '../src/cli/commands.js'
import { copy } from '../src/cli/maintenance.js'
import type { OpenedRoot } from '../src/cli/open-root.js'
import type { RawLogStreaming, RawSessionStream } from '../src/cli/raw-stream.js'
import { makeStyle } from '../src/cli/render.js'
import { createMemoryPersistence } from '../src/memory/memory-persistence.js'
import type { SessionStore } from '../src/index.js'
import { meta, turn } from './helpers/events.js'

// `copy` moves a log page by page when both backends offer openRawStream/importRawStream
// (src/cli/raw-stream.ts), and falls back to readRaw/importRaw when either lacks them.

/** A memory store that streams raw lines (in pages of `pageLines`) and records how it was used. */
function streaming(store: SessionStore, calls: string[]): SessionStore & RawLogStreaming {
  const extra: RawLogStreaming = {
    async openRawStream(id, options) {
      calls.push(`open ${id} ${options?.pageLines}`)
      const raw = await store.readRaw(id)
      const size = 3 // small pages, so that a copy is several of them
      return {
        id,
        headerLine: raw.headerLine,
        eventPages: (async function* () {
          for (let i = 0; i < raw.eventLines.length; i += size) yield raw.eventLines.slice(i, i + size)
        })(),
      }
    },
    async importRawStream(log: RawSessionStream) {
      const lines: string[] = []
      for await (const page of log.eventPages) {
        calls.push(`page ${page.length}`)
        lines.push(...page)
      }
      await store.importRaw({ id: log.id, headerLine: log.headerLine, eventLines: lines })
      return { eventLines: lines.length }
    },
  }
  return new Proxy(store, {
    get(target, prop) {
      if (prop in extra) return extra[prop as keyof RawLogStreaming]
      const v: unknown = Reflect.get(target, prop)
      return typeof v === 'function' ? v.bind(target) : v
    },
  }) as SessionStore & RawLogStreaming
}

/** A store that offers only readRaw/importRaw (as a backend from before §15.5 would). */
function withoutStreaming(store: SessionStore): SessionStore {
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'openRawStream' || prop === 'importRawStream') return undefined
      const v: unknown = Reflect.get(target, prop)
      return typeof v === 'function' ? v.bind(target) : v
    },
  })
}

const root = (store: SessionStore, name: string): OpenedRoot => ({ store, name, directory: undefined, close: async () => {} })
const io = (): Io => ({ out: () => {}, err: () => {}, style: makeStyle(false), progress: undefined })

async function source(): Promise<SessionStore> {
  const s = createMemoryPersistence()
  await s.create(meta('a'))
  await s.append('a', [...turn(0, 1), ...turn(4, 2)])
  await s.closeAll()
  return s
}

describe('copy streams raw lines when both ends can', () => {
  test('both stream: openRawStream then importRawStream page by page; the copy holds the same lines', async () => {
    const calls: string[] = []
    const from = streaming(await source(), calls)
    const to = streaming(createMemoryPersistence(), calls)
    expect(await copy(root(from, 'from'), root(to, 'to'), io(), ['a'], { json: true, skipExisting: false })).toBe(0)
    expect(calls).toEqual(['open a 1000', 'page 3', 'page 3', 'page 2'])
    expect(await to.readRaw('a')).toEqual(await from.readRaw('a'))
  })

  test('only one end streams: readRaw and importRaw, as before', async () => {
    const calls: string[] = []
    const from = streaming(await source(), calls)
    const to = withoutStreaming(createMemoryPersistence())
    expect(await copy(root(from, 'from'), root(to, 'to'), io(), ['a'], { json: true, skipExisting: false })).toBe(0)
    expect(calls).toEqual([])
    expect(await to.readRaw('a')).toEqual(await from.readRaw('a'))
  })
})
