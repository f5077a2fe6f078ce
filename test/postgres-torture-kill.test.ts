// The CI short form of the PostgreSQL torture phase: 100 SIGKILLs of writer processes against
// a real server, 0 acknowledged events lost (the long form is `npm run torture`, 2,000 kills).
import { describe, expect, test } from 'vitest'
import { runPostgresTorturePhase } from '../src/torture/postgres-kills.js'
import { pgUrl } from './helpers/pg-env.js'

const url = pgUrl()

describe.skipIf(!url)('PostgreSQL SIGKILL torture (short form)', () => {
  test('100 writer processes killed at random moments: every acknowledged batch stored once, logs contiguous', async () => {
    const report = await runPostgresTorturePhase({ kills: 100, url: url! })
    expect(report.failures).toEqual([])
    expect(report.kills).toBe(100)
    expect(report.ackedEvents).toBeGreaterThan(100)
  }, 600_000)
})
