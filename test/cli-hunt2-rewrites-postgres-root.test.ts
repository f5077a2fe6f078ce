import { createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { cliInProcess as cli } from './helpers/cli-in-process.js'

// The rewrites (migrate, redact, repair --truncate-at-damage) replace log files: on a PostgreSQL
// root they are E_CONFIG, said before anything connects. They opened the root first, so a server
// that could not be reached made them fail E_IO (ECONNREFUSED), hiding that the command cannot
// work there at all — a hunt's find. A listening socket that counts connections stands in for
// the server: nothing may connect to it.

describe('the rewrites on a postgres:// root', () => {
  let connections = 0
  const server = createServer((socket) => {
    connections++
    socket.destroy()
  })
  let url = ''
  beforeAll(async () => {
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
    const { port } = server.address() as { port: number }
    url = `postgres://someone:secret@127.0.0.1:${port}/db?schema=s1`
  })
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())))

  test('migrate, redact and repair --truncate-at-damage: E_CONFIG naming the root (its password hidden), no connection made', async () => {
    for (const args of [['migrate', '--all'], ['migrate', 'x', '--dry-run'], ['redact', 'x', '--pattern', 'secret'], ['repair', 'x', '--truncate-at-damage']]) {
      const r = await cli(['--root', url, ...args])
      expect(r.result, args.join(' ')).toBe('E_CONFIG')
      expect(r.err).toMatch(/rewrites log files: it works on a directory root, not on postgres:\/\/someone(:\*+)?@127\.0\.0\.1:\d+\/db.*\(schema s1\)/)
      expect(r.err).not.toContain('secret@')
    }
    expect(connections).toBe(0)
  })

  test('repair without --truncate-at-damage is not a rewrite: it goes to the server', async () => {
    const r = await cli(['--root', url, 'repair', 'x', '--dry-run'])
    expect(r.result).not.toBe('E_CONFIG')
    expect(connections).toBeGreaterThan(0)
  })
})
