// PGCONNECT_TIMEOUT, libpq's environment variable (seconds), read where node-postgres does not:
// the store's connect timeout is `connectTimeoutMs`, else a caller's pool's
// `connectionTimeoutMillis`, else the URL's `connect_timeout`, else PGCONNECT_TIMEOUT, else
// 10 s; the variable is read as libpq reads it (whole seconds, 0 or less: no limit, 1 taken as
// 2, anything else refused: E_CONFIG naming it). No server is needed: this is the configuration.
import pg from 'pg'
import { afterEach, describe, expect, test } from 'vitest'
import { parsePostgresConfig } from '../src/postgres/config.js'
import { codeOf } from './helpers/codes.js'

const base = 'postgres://agent@127.0.0.1:1/spj'
const saved = process.env.PGCONNECT_TIMEOUT
afterEach(() => {
  if (saved === undefined) delete process.env.PGCONNECT_TIMEOUT
  else process.env.PGCONNECT_TIMEOUT = saved
})
const timeout = (env: string | undefined, config: Record<string, unknown> = {}) => {
  if (env === undefined) delete process.env.PGCONNECT_TIMEOUT
  else process.env.PGCONNECT_TIMEOUT = env
  return parsePostgresConfig({ connectionString: base, ...config }).connectTimeoutMs
}

describe('PGCONNECT_TIMEOUT', () => {
  test('read as libpq reads it when neither the option nor the URL gives a timeout', () => {
    expect(timeout(undefined)).toBe(10_000)
    expect(timeout('3')).toBe(3_000)
    expect(timeout(' 7 ')).toBe(7_000)
    expect(timeout('1')).toBe(2_000) // libpq's minimum
    expect(timeout('0')).toBe(0) // no limit
    expect(timeout('-5')).toBe(0)
  })

  test('the option, a caller pool\'s own setting and the URL\'s connect_timeout come first', () => {
    expect(timeout('3', { connectTimeoutMs: 500 })).toBe(500)
    expect(timeout('3', { connectTimeoutMs: 0 })).toBe(0)
    expect(timeout('3', { connectionString: `${base}?connect_timeout=5` })).toBe(5_000)
    expect(timeout('3', { connectionString: `${base}?connect_timeout=0` })).toBe(0)
    const pool = new pg.Pool({ connectionString: base, connectionTimeoutMillis: 1_500 })
    const bare = new pg.Pool({ connectionString: base })
    try {
      expect(timeout('3', { connectionString: undefined, pool })).toBe(1_500)
      expect(timeout('3', { connectionString: undefined, pool: bare })).toBe(3_000)
    } finally {
      void pool.end()
      void bare.end()
    }
  })

  test('a value that is no whole number of seconds is E_CONFIG naming the variable, unless something before it decides', async () => {
    for (const bad of ['soon', '2.5', '', '10s']) {
      expect(await codeOf(() => timeout(bad))).toBe('E_CONFIG')
      expect(() => timeout(bad)).toThrow(`PGCONNECT_TIMEOUT '${bad}' in the environment is not a whole number of seconds`)
    }
    expect(timeout('soon', { connectTimeoutMs: 500 })).toBe(500)
    expect(timeout('soon', { connectionString: `${base}?connect_timeout=4` })).toBe(4_000)
  })
})
