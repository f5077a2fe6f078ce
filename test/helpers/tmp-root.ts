import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
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

/** Every file in the buckets of a directory root (not its `.`-directories: locks), with its bytes. */
export async function rootFiles(root: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>()
  for (const dir of await readdir(root)) {
    if (dir.startsWith('.')) continue
    for (const name of await readdir(join(root, dir))) out.set(`${dir}/${name}`, await readFile(join(root, dir, name)))
  }
  return out
}
