// A server that accepts the TCP connection and never answers (a hung host, a firewall that
// black-holes after the handshake) must not hang the store or the CLI: connecting gives up after
// `connectTimeoutMs` (or the URL's connect_timeout, in seconds as libpq reads it) with a
// connection error, which appends retry until `retryTimeoutMs` as any other.
import { createConnection, createServer, type Server, type Socket } from 'node:net'
import { afterAll, describe, expect, test } from 'vitest'
import { main } from '../src/cli/main.js'
import type { Io } from '../src/cli/commands.js'
import { makeStyle } from '../src/cli/render.js'
import { isSessionPersistenceError } from '../src/errors.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../src/postgres/index.js'
import { meta, turn } from './helpers/events.js'
import { dropSchemas, freshSchema, pgUrl, storedLines } from './helpers/pg-env.js'

const url = pgUrl()
const schemas: string[] = []
afterAll(async () => {
  if (url) await dropSchemas(url, schemas)
})

/**
 * A listener on loopback that accepts connections and, while `silent`, never answers them
 * (nor closes them); otherwise it pipes them to `target` (a PostgreSQL port), when given.
 * `goSilent()` also cuts every piped connection, so the next query needs a new one.
 */
class SilentServer {
  silent = true
  /** Connections accepted while silent, and how many of those the client gave up on (closed). */
  accepted = 0
  abandoned = 0
  readonly #sockets = new Set<Socket>()
  readonly #changed = new Set<() => void>()
  private constructor(
    readonly server: Server,
    readonly port: number,
  ) {}

  static async start(target?: number): Promise<SilentServer> {
    let self!: SilentServer
    const server = createServer((socket) => self.#accept(socket, target))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    self = new SilentServer(server, (server.address() as { port: number }).port)
    return self
  }

  #accept(socket: Socket, target: number | undefined): void {
    this.#sockets.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => this.#sockets.delete(socket))
    if (this.silent || target === undefined) {
      this.accepted++
      socket.resume() // reads and drops what the client sends; flowing, it sees the client close
      socket.on('close', () => {
        this.abandoned++
        this.#notify()
      })
      this.#notify()
      return
    }
    const upstream = createConnection({ host: '127.0.0.1', port: target })
    this.#sockets.add(upstream)
    upstream.on('error', () => {})
    socket.pipe(upstream).pipe(socket)
    const close = () => {
      socket.destroy()
      upstream.destroy()
    }
    socket.on('close', close)
    upstream.on('close', close)
  }

  goSilent(): void {
    this.silent = true
    for (const s of this.#sockets) s.destroy()
  }

  #notify(): void {
    for (const f of this.#changed) f()
  }

  /** Resolves once `ok()` holds (checked after each connection accepted or abandoned). */
  until(ok: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (!ok()) return
        this.#changed.delete(check)
        resolve()
      }
      this.#changed.add(check)
      check()
    })
  }

  async close(): Promise<void> {
    for (const s of this.#sockets) s.destroy()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

/** How `p` settled: its error's code and message, or 'resolved'; 'HUNG' when it has not within `ms` (a guard, not a measurement). */
async function settled(p: Promise<unknown>, ms = 25_000): Promise<{ code: string; message: string }> {
  let timer: NodeJS.Timeout | undefined
  const guard = new Promise<{ code: string; message: string }>((resolve) => {
    timer = setTimeout(() => resolve({ code: 'HUNG', message: `did not settle within ${ms} ms` }), ms)
  })
  try {
    return await Promise.race([
      p.then(
        () => ({ code: 'resolved', message: '' }),
        (e: { code?: string; message?: string }) => ({ code: e.code ?? String(e), message: String(e.message) }),
      ),
      guard,
    ])
  } finally {
    clearTimeout(timer)
  }
}

/** The CLI from the sources, in this process: resolves with its exit code, or rejects with the error it would print (exit 1 for ours). */
async function cli(args: string[]): Promise<number> {
  const io: Io = { out: () => {}, err: () => {}, style: makeStyle(false), progress: undefined }
  return main(args, {}, io).catch((e: unknown) => {
    expect(isSessionPersistenceError(e)).toBe(true)
    throw e
  })
}

describe('connecting to a server that never answers', () => {
  test('the store: an operation fails with E_IO "timed out connecting" after connectTimeoutMs, or after the URL\'s connect_timeout; bad values are E_CONFIG', async () => {
    const silent = await SilentServer.start()
    const stores: PostgresSessionPersistence[] = []
    try {
      const base = `postgres://agent:pw-not-shown@127.0.0.1:${silent.port}/spj`
      const store = createPostgresPersistence({ connectionString: base, connectTimeoutMs: 200, retryTimeoutMs: 0 })
      stores.push(store)
      const listed = await settled(store.list())
      expect(listed.code).toBe('E_IO')
      expect(listed.message).toContain('timed out connecting to postgres://agent@127.0.0.1:')
      expect(listed.message).not.toContain('pw-not-shown')
      // node-postgres ignores connect_timeout; the store reads it (seconds, at least 2, as libpq).
      const fromUrl = createPostgresPersistence({ connectionString: `${base}?connect_timeout=1`, retryTimeoutMs: 0 })
      stores.push(fromUrl)
      const viaUrl = await settled(fromUrl.list())
      expect(viaUrl).toMatchObject({ code: 'E_IO', message: expect.stringContaining('no answer within 2000 ms') })
      expect(silent.accepted).toBe(2)
      const configCode = (config: Record<string, unknown>) => {
        try {
          createPostgresPersistence({ connectionString: base, ...config })
          return 'returned'
        } catch (e) {
          return (e as { code?: string }).code
        }
      }
      expect(configCode({ connectTimeoutMs: -1 })).toBe('E_CONFIG')
      expect(configCode({ connectTimeoutMs: 1.5 })).toBe('E_CONFIG')
      expect(configCode({ connectionString: `${base}?connect_timeout=soon` })).toBe('E_CONFIG')
    } finally {
      await Promise.all(stores.map((s) => s.end()))
      await silent.close()
    }
  })

  test('the CLI: ls and verify fail with E_IO "timed out connecting" (exit 1) instead of hanging', async () => {
    const silent = await SilentServer.start()
    try {
      const root = `postgres://agent@127.0.0.1:${silent.port}/spj?connect_timeout=2&schema=team_a`
      for (const command of ['ls', 'verify']) {
        const r = await settled(cli(['--root', root, command]))
        expect([command, r.code]).toEqual([command, 'E_IO'])
        expect(r.message).toContain('timed out connecting')
      }
    } finally {
      await silent.close()
    }
  })

  test.skipIf(!url)('an append whose connections time out is retried until the server answers again, and stored once', async () => {
    const schema = freshSchema('ctimeout')
    schemas.push(schema)
    const target = new URL(url!)
    const proxy = await SilentServer.start(Number(target.port))
    proxy.silent = false
    const via = new URL(url!)
    via.hostname = '127.0.0.1'
    via.port = String(proxy.port)
    const store = createPostgresPersistence({ connectionString: via.toString(), schema, poolSize: 2, connectTimeoutMs: 300, retryTimeoutMs: 60_000 })
    try {
      await store.create(meta('s'))
      await store.append('s', turn(0, 1))
      proxy.goSilent()
      const appended = settled(store.append('s', turn(4, 2)), 60_000)
      // A connection given up on (timed out), then another one accepted after it: the append retried.
      await proxy.until(() => proxy.abandoned >= 1)
      const before = proxy.accepted
      await proxy.until(() => proxy.accepted > before)
      proxy.silent = false
      expect(await appended).toEqual({ code: 'resolved', message: '' })
      const lines = await storedLines(url!, schema, 's')
      expect(lines.map((l) => l.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
      await store.close('s')
    } finally {
      await store.end()
      await proxy.close()
    }
  })
})
