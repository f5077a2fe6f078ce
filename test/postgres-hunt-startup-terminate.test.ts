// A connection terminated right at startup (pg_terminate_backend, a fast shutdown just after it
// connected): the server sends ReadyForQuery and a FATAL 57P01 in one TCP chunk. node-postgres
// emits the FATAL as an 'error' event on the new client between pg-pool removing its own error
// listener and handing the client out, so a listener attached after `await pool.connect()` came
// too late, and the unhandled 'error' event crashed the host. The operation must fail E_IO, and
// nothing may reach the process as an uncaught exception. A fake server on loopback makes the
// timing exact.
import net from 'node:net'
import pg from 'pg'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from 'vitest'
import { createPostgresPersistence } from '../src/postgres/index.js'
import { codeOf } from './helpers/codes.js'

const msg = (type: string, body: Buffer) => {
  const b = Buffer.alloc(5 + body.length)
  b.write(type, 0)
  b.writeInt32BE(4 + body.length, 1)
  body.copy(b, 5)
  return b
}
const fields = (o: Record<string, string>) => Buffer.concat([...Object.entries(o).map(([k, v]) => Buffer.from(`${k}${v}\0`)), Buffer.from([0])])
const authOk = msg('R', Buffer.from([0, 0, 0, 0]))
const ready = msg('Z', Buffer.from('I'))
const fatal = msg('E', fields({ S: 'FATAL', V: 'FATAL', C: '57P01', M: 'terminating connection due to administrator command' }))

let server: net.Server
let url: string
let connections = 0
beforeAll(async () => {
  server = net.createServer((sock) => {
    connections++
    sock.on('error', () => {})
    // Startup accepted and terminated in the same chunk, as a backend terminated at once does.
    sock.once('data', () => sock.end(Buffer.concat([authOk, ready, fatal])))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `postgres://u@127.0.0.1:${(server.address() as net.AddressInfo).port}/db`
})
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve))
})

// What reached the process as an uncaught exception (an unhandled 'error' event) while a test ran.
let uncaught: string[] = []
const record = (err: unknown) => uncaught.push(String(err))
beforeEach(() => {
  uncaught = []
  process.on('uncaughtException', record)
})
afterEach(() => {
  process.off('uncaughtException', record)
})

const settle = () => new Promise((resolve) => setTimeout(resolve, 100)) // lets the socket close

describe('a pool connection terminated right at startup', () => {
  test('with its own pool: the operation fails E_IO and nothing crashes the host', async () => {
    const store = createPostgresPersistence({ connectionString: url, schema: 'x', retryTimeoutMs: 500, connectTimeoutMs: 5000 })
    const before = connections
    expect(await codeOf(store.list())).toBe('E_IO')
    expect(await codeOf(store.read('s'))).toBe('E_IO')
    await settle()
    await store.end()
    expect(connections).toBeGreaterThan(before) // it did reach the server
    expect(uncaught).toEqual([])
  })

  test("with the caller's pool: the operation fails E_IO and nothing crashes the host", async () => {
    const pool = new pg.Pool({ connectionString: url, max: 4 })
    pool.on('error', () => {}) // the caller's handler of idle clients' errors
    const store = createPostgresPersistence({ pool, schema: 'x', retryTimeoutMs: 500 })
    expect(await codeOf(store.list())).toBe('E_IO')
    expect(await codeOf(store.list())).toBe('E_IO')
    await settle()
    await store.end()
    await pool.end()
    expect(uncaught).toEqual([])
  })
})
