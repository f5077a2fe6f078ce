import { describe, expect, test } from 'vitest'
import { diskFullBytes, mountTmpfs, runDiskFull } from '../src/torture/disk-full.js'

const probe = mountTmpfs(2 << 20)
const unavailable = 'unavailable' in probe ? probe.unavailable : undefined
if (!('unavailable' in probe)) probe.unmount()
if (unavailable) console.warn(`DISK-FULL TESTS NOT RUN: ${unavailable}`)

describe('a real full disk (tmpfs)', () => {
  test.skipIf(unavailable !== undefined)('ENOSPC: E_IO, rolled back to the acknowledged length, plugin keeps its buffer, retry loses and duplicates nothing', async () => {
    const m = mountTmpfs(diskFullBytes(10))
    if ('unavailable' in m) throw new Error(m.unavailable)
    try {
      const r = await runDiskFull(m.dir, 10)
      expect(r.failures).toEqual([])
      expect(r.enospcSeen).toBe(10)
    } finally {
      m.unmount()
    }
  }, 120_000)
})
