import { createConnection, createServer, type Server, type Socket } from 'node:net'

/**
 * A TCP proxy on loopback in front of a PostgreSQL server that can cut one connection at the
 * worst moment: `cutAfterRequest()` lets the next client message reach the server and then
 * drops the server's answer and both sockets (a COMMIT whose outcome the client never learns);
 * `cutBeforeRequest()` drops the next client message unsent and cuts. Both can wait for a
 * message holding a given text (the statement to cut).
 */
export class PgCutProxy {
  readonly #server: Server
  readonly #pairs = new Set<[Socket, Socket]>()
  #mode: 'none' | 'after-request' | 'before-request' = 'none'
  #armedPair: [Socket, Socket] | undefined
  #match: string | undefined
  cuts = 0

  private constructor(server: Server) {
    this.#server = server
  }

  static async start(targetPort: number): Promise<PgCutProxy & { port: number }> {
    let proxy!: PgCutProxy
    const server = createServer((client) => proxy.#pipe(client, targetPort))
    proxy = new PgCutProxy(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const address = server.address()
    return Object.assign(proxy, { port: typeof address === 'object' && address ? address.port : 0 })
  }

  #pipe(client: Socket, targetPort: number): void {
    const upstream = createConnection({ host: '127.0.0.1', port: targetPort })
    const pair: [Socket, Socket] = [client, upstream]
    this.#pairs.add(pair)
    const cut = () => {
      this.cuts++
      this.#mode = 'none'
      this.#armedPair = undefined
      client.destroy()
      upstream.destroy()
    }
    client.on('data', (chunk: Buffer) => {
      const hit = this.#mode !== 'none' && (this.#match === undefined || chunk.includes(this.#match))
      if (hit && this.#mode === 'before-request') return cut()
      if (hit && this.#mode === 'after-request' && !this.#armedPair) this.#armedPair = pair
      upstream.write(chunk)
    })
    upstream.on('data', (chunk) => {
      if (this.#mode === 'after-request' && this.#armedPair === pair) return cut()
      client.write(chunk)
    })
    const close = () => {
      this.#pairs.delete(pair)
      client.destroy()
      upstream.destroy()
    }
    client.on('close', close)
    upstream.on('close', close)
    client.on('error', () => {})
    upstream.on('error', () => {})
  }

  /** Arms a cut for the next client message (holding `match`, when given) once it has reached the server. */
  cutAfterRequest(match?: string): void {
    this.#mode = 'after-request'
    this.#match = match
  }

  /** Arms a cut for the next client message (holding `match`, when given), which is dropped unsent. */
  cutBeforeRequest(match?: string): void {
    this.#mode = 'before-request'
    this.#match = match
  }

  async close(): Promise<void> {
    for (const [a, b] of this.#pairs) {
      a.destroy()
      b.destroy()
    }
    await new Promise<void>((resolve) => this.#server.close(() => resolve()))
  }
}
