import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach } from 'vitest'

const made: string[] = []

/** A fresh temporary root directory, removed after the test. */
export async function tmpRoot(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'spj-test-'))
  made.push(dir)
  return dir
}

afterEach(async () => {
  await Promise.all(made.splice(0).map((d) => rm(d, { recursive: true, force: true })))
})
