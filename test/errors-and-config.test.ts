import { describe, expect, test } from 'vitest'
import {
  createJsonlPersistence,
  createNodeFileSystem,
  ERROR_CODES,
  isSessionPersistenceError,
  JsonlConfigSchema,
  SessionFormatUnsupportedError,
  SessionPersistenceCorruptionError,
  SessionPersistenceError,
} from '../src/index.js'

describe('errors (docs/contract.md §9)', () => {
  test('every code of the table exists, and the two subclasses carry theirs', () => {
    expect([...ERROR_CODES].sort()).toEqual(
      [
        'E_CONFIG', 'E_INVALID_ID', 'E_INVALID_META', 'E_INVALID_EVENT', 'E_NOT_JSON', 'E_SEQ_NOT_CONTIGUOUS', 'E_NOT_FOUND',
        'E_EXISTS', 'E_AMBIGUOUS', 'E_CORRUPT', 'E_FORMAT_UNSUPPORTED', 'E_LOCKED', 'E_SESSION_LIVE', 'E_BAD_FORK_POINT',
        'E_LINK_UNSUPPORTED', 'E_IO', 'E_WRITER_BROKEN', 'E_DISPOSED', 'E_TIMEOUT',
      ].sort(),
    )
    const corrupt = new SessionPersistenceCorruptionError(3, 120, 'bad', { path: '/x', sessionId: 's' })
    expect(corrupt).toBeInstanceOf(SessionPersistenceError)
    expect([corrupt.code, corrupt.line, corrupt.byteOffset, corrupt.path, corrupt.sessionId]).toEqual(['E_CORRUPT', 3, 120, '/x', 's'])
    const unsupported = new SessionFormatUnsupportedError(2, 'v2')
    expect(unsupported).toBeInstanceOf(SessionPersistenceError)
    expect(unsupported.code).toBe('E_FORMAT_UNSUPPORTED')
    const cause = new Error('root cause')
    expect(new SessionPersistenceError('E_IO', 'x', { cause }).cause).toBe(cause)
  })

  test('isSessionPersistenceError recognises errors from a second copy of the package', async () => {
    // A query string makes the module loader evaluate errors.ts a second time: a duplicate install.
    // @ts-expect-error -- the query string has no declaration; it is the same module evaluated again
    const copy = (await import('../src/errors.js?duplicate-install')) as typeof import('../src/errors.js')
    expect(copy.SessionPersistenceError).not.toBe(SessionPersistenceError)
    const foreign = new copy.SessionPersistenceError('E_LOCKED', 'held elsewhere')
    expect(foreign).not.toBeInstanceOf(SessionPersistenceError)
    expect(isSessionPersistenceError(foreign, 'E_LOCKED')).toBe(true)
    expect(copy.isSessionPersistenceError(new SessionPersistenceError('E_IO', 'x'), 'E_IO')).toBe(true)
    expect(isSessionPersistenceError({ code: 'E_IO', message: 'look-alike' })).toBe(false)
  })
})

describe('E_IO messages', () => {
  test('a system error is named by its code once, whether or not its message starts with it', async () => {
    const { ioError } = await import('../src/errors.js')
    const node = Object.assign(new Error("EACCES: permission denied, open '/r/a.jsonl'"), { code: 'EACCES' })
    expect(ioError(node, 'open a log').message).toBe("open a log failed: EACCES: permission denied, open '/r/a.jsonl'")
    const bare = Object.assign(new Error('input/output error'), { code: 'EIO' })
    expect(ioError(bare, 'read a log').message).toBe('read a log failed: EIO: input/output error')
    expect(ioError(new Error('odd'), 'sync').message).toBe('sync failed: odd')
  })
})

describe('configuration (E_CONFIG)', () => {
  const configCode = (config: unknown) => {
    try {
      createJsonlPersistence(config as never)
      return 'ok'
    } catch (err) {
      return isSessionPersistenceError(err) ? `${err.code} ${err.message}` : String(err)
    }
  }
  test.each([
    [{}, 'root'],
    [{ root: '' }, 'root'],
    [{ root: '/x', sync: 'sometimes' }, 'sync'],
    [{ root: '/x', staleLockMs: -5 }, 'staleLockMs'],
    [{ root: '/x', staleLockMs: 999 }, 'staleLockMs'],
    [{ root: '/x', staleLockMs: 1500.5 }, 'staleLockMs'],
    [{ root: '/x', logger: { info() {} } }, 'logger'],
    [{ root: '/x', rooot: '/y' }, 'rooot'],
    [{ root: '/x', fs: {} }, 'fs must be a FileSystem: an object with the methods mkdir, open,'],
    [{ root: '/x', fs: [] }, 'fs'],
    [{ root: '/x', fs: { ...createNodeFileSystem(), readdir: undefined } }, 'fs'], // one method missing
  ])('%o → E_CONFIG naming %s', (config, field) => {
    const result = configCode(config)
    expect(result.startsWith('E_CONFIG')).toBe(true)
    expect(result).toContain(field)
  })

  test('staleLockMs is at least 1000 (the holder refreshes every third of it); the default is 10000', () => {
    expect(configCode({ root: '/x', staleLockMs: 1000 })).toBe('ok')
    expect(configCode({ root: '/x', staleLockMs: 60_000 })).toBe('ok')
    expect(JsonlConfigSchema.parse({ root: '/x' }).staleLockMs).toBe(10_000)
  })

  test('the root is resolved to an absolute path once, without I/O', () => {
    const p = createJsonlPersistence({ root: 'relative/sessions' })
    expect(p.root).toBe(`${process.cwd()}/relative/sessions`)
  })
})
