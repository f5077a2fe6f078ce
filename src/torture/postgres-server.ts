// A throwaway PostgreSQL 15 server for tests, the benchmark and the torture phase: initdb in a
// temporary directory (as the `postgres` user when we are root: initdb refuses root), a private
// socket directory, a loopback port, one database. Nothing here is part of the published API.
import { execFile } from 'node:child_process'
import { chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** Where Debian's postgresql-15 puts its binaries. */
export const PG_BIN = process.env.SPJ_PG_BIN ?? '/usr/lib/postgresql/15/bin'

export interface ThrowawayPostgres {
  /** `postgres://postgres@127.0.0.1:<port>/spj` */
  readonly url: string
  readonly port: number
  readonly dir: string
  /** `pg_ctl stop -m immediate`: a crash as far as the server knows (WAL replay on restart). */
  crash(): Promise<void>
  /** Starts the server again after `crash`. */
  start(): Promise<void>
  /** Stops the server and removes its directory. Idempotent. */
  stop(): Promise<void>
}

/** Why no throwaway server can be started here, or undefined when one can. */
export function throwawayPostgresUnavailable(): string | undefined {
  if (!existsSync(join(PG_BIN, 'initdb')) || !existsSync(join(PG_BIN, 'pg_ctl'))) {
    return `no PostgreSQL binaries in ${PG_BIN} (install Debian's postgresql-15, or set SPJ_PG_URL)`
  }
  if (process.getuid?.() === 0 && !existsSync('/usr/sbin/runuser') && !existsSync('/sbin/runuser')) {
    return 'running as root without runuser: initdb refuses root'
  }
  return undefined
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

async function pgRun(bin: string, args: string[]): Promise<void> {
  const prefix = process.getuid?.() === 0 ? ['runuser', '-u', 'postgres', '--'] : []
  const [cmd, ...rest] = [...prefix, join(PG_BIN, bin), ...args]
  await run(cmd!, rest, { maxBuffer: 16 * 1024 * 1024 })
}

/** As root the server runs as Debian's `postgres` user, which must own its directories. */
function chownToPostgres(path: string): void {
  if (process.getuid?.() !== 0) return
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith('postgres:'))
  const [, , uid, gid] = line?.split(':') ?? []
  if (uid === undefined || gid === undefined) throw new Error('no postgres user in /etc/passwd')
  chownSync(path, Number(uid), Number(gid))
}

/**
 * Starts a fresh server: initdb (fsync on, as in production), `pg_ctl start` listening on
 * 127.0.0.1 only with its socket in a private directory, and `createdb spj`.
 */
export async function startThrowawayPostgres(options: { settings?: Record<string, string> } = {}): Promise<ThrowawayPostgres> {
  const unavailable = throwawayPostgresUnavailable()
  if (unavailable) throw new Error(unavailable)
  const dir = mkdtempSync(join(tmpdir(), 'spj-pg-'))
  chownToPostgres(dir)
  const data = join(dir, 'data')
  const sock = join(dir, 'sock')
  const port = await freePort()
  const settings = { listen_addresses: '127.0.0.1', max_connections: '300', ...options.settings }
  const serverOptions = [`-k ${sock}`, `-p ${port}`, ...Object.entries(settings).map(([k, v]) => `-c ${k}=${v}`)].join(' ')
  let running = false
  let removed = false
  const start = async () => {
    await pgRun('pg_ctl', ['-D', data, '-o', serverOptions, '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start'])
    running = true
  }
  try {
    await pgRun('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync'])
    mkdirSync(sock, { mode: 0o700 })
    chownToPostgres(sock)
    await start()
    await pgRun('createdb', ['-h', '127.0.0.1', '-p', String(port), '-U', 'postgres', 'spj'])
  } catch (err) {
    if (running) await pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {})
    rmSync(dir, { recursive: true, force: true })
    throw err
  }
  return {
    url: `postgres://postgres@127.0.0.1:${port}/spj`,
    port,
    dir,
    async crash() {
      await pgRun('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'])
      running = false
    },
    start,
    async stop() {
      if (removed) return
      removed = true
      if (running) await pgRun('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '60', 'stop']).catch(() => {})
      running = false
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
