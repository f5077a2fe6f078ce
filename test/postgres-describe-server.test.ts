// How the PostgreSQL store names its server in messages (a timeout, a missing schema): never
// with the password, whatever characters it holds.
import { describe, expect, test } from 'vitest'
import { describeServer } from '../src/postgres/config.js'

describe('describeServer', () => {
  test('no password, no query, no fragment (an unescaped # in a password starts one)', () => {
    expect(describeServer({ connectionString: 'postgres://u:secret@db.internal:5432/agents?sslmode=require' })).toBe('postgres://u@db.internal:5432/agents')
    const hashed = describeServer({ connectionString: 'postgres://u:12#34@h/db' })
    expect(hashed).not.toContain('34@h')
    expect(hashed).not.toContain('#')
  })
})
