import { lstat, readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'

/** The identity of a file: the same (dev, ino) is the same file, whatever name reaches it. */
export interface FileIdentity {
  dev: number
  ino: number
}

// How many entries are lstat'ed at once: a root of many logs is walked in bounded batches.
const BATCH = 64

/**
 * Where, among the files a JSONL root keeps (everything inside its subdirectories: the buckets
 * of logs and their temporary files, `.locks`), the file `target` is, if it is one of them. Only
 * worth asking of a regular file with more than one name (`nlink` > 1): a file of one name
 * outside the root cannot also be inside it. The walk costs one lstat per file in the root, so
 * callers keep the common case (one name) free of it. A top-level symbolic link to a directory
 * is followed (the store opens its buckets through it); deeper links are not. What vanishes or
 * cannot be read while it is walked is passed over: the store cannot keep a file there either.
 */
export async function keptByStore(rootDirectory: string, target: FileIdentity): Promise<string | undefined> {
  const top = await readdir(rootDirectory, { withFileTypes: true }).catch(() => [])
  const dirs: string[] = []
  for (const entry of top) {
    const path = join(rootDirectory, entry.name)
    if (entry.isDirectory() || (entry.isSymbolicLink() && (await stat(path).catch(() => undefined))?.isDirectory())) dirs.push(path)
  }
  while (dirs.length > 0) {
    const dir = dirs.pop()!
    const names = await readdir(dir).catch(() => [])
    for (let i = 0; i < names.length; i += BATCH) {
      const paths = names.slice(i, i + BATCH).map((name) => join(dir, name))
      const stats = await Promise.all(paths.map((p) => lstat(p).catch(() => undefined)))
      for (const [k, st] of stats.entries()) {
        if (st === undefined) continue
        if (st.isDirectory()) dirs.push(paths[k]!)
        else if (st.dev === target.dev && st.ino === target.ino) return paths[k]
      }
    }
  }
  return undefined
}
