import { mkdir, symlink, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect, test } from 'vitest'
import { bucketName, createJsonlPersistence, createNodeFileSystem, encodeSessionId, type ListProblem } from '../src/index.js'
import { peekFilesInWorker } from '../src/jsonl/fs/peek-files.js'
import { headerLine } from '../src/session/meta.js'
import { meta, turn } from './helpers/events.js'
import { mkfifo, releaseFifos, settlesWithin } from './helpers/fifo.js'
import { tmpRoot } from './helpers/tmp-root.js'

// A FIFO named like a log (or a link to one) opened for reading waited for a writer: a listing
// never settled, and four of them held every thread of libuv's pool (docs/decisions.md).
const LIMIT_MS = 20_000 // a guard against hanging, not a measurement: a loaded machine may take seconds

/** A root with one good log, and next to it a FIFO, a link to a FIFO and a link to /dev/null, each named like a log. */
async function fixture(): Promise<{ root: string; bucket: string; fifos: string[] }> {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root })
  await p.create(meta('good'))
  await p.append('good', turn(0, 1))
  await p.closeAll()
  const bucket = join(root, bucketName(undefined))
  const fifos = [mkfifo(join(bucket, `${encodeSessionId('fifo')}.jsonl`)), mkfifo(join(root, 'outside-fifo'))]
  await symlink(fifos[1]!, join(bucket, `${encodeSessionId('link-to-fifo')}.jsonl`))
  await symlink('/dev/null', join(bucket, `${encodeSessionId('link-to-null')}.jsonl`))
  return { root, bucket, fifos }
}

const name = (bucket: string, id: string) => join(bucket, `${encodeSessionId(id)}.jsonl`)

for (const orderBy of ['createdAt', 'lastWrite'] as const) {
  test(`list (${orderBy}) reports a FIFO, a link to one and a link to a device named like logs as E_IO, and lists the rest at once`, async () => {
    const { root, bucket, fifos } = await fixture()
    const problems: ListProblem[] = []
    const listing = createJsonlPersistence({ root }).list({ orderBy, onProblem: (p) => problems.push(p) })
    try {
      const listed = await settlesWithin(listing, LIMIT_MS, 'list()')
      expect(listed.map((l) => l.meta.id)).toEqual(['good'])
      expect(problems.map((p) => [p.path, p.code, p.message]).sort()).toEqual(
        [
          [name(bucket, 'fifo'), 'E_IO', `${name(bucket, 'fifo')} is not a regular file (a FIFO, socket or device)`],
          [name(bucket, 'link-to-fifo'), 'E_IO', `${name(bucket, 'link-to-fifo')} is not a regular file (a FIFO)`],
          [name(bucket, 'link-to-null'), 'E_IO', `${name(bucket, 'link-to-null')} is not a regular file (a character device)`],
        ].sort(),
      )
    } finally {
      await releaseFifos(fifos, listing)
    }
  })
}

test("the Node seam's open for reading does not wait for a FIFO's writer", async () => {
  const root = await tmpRoot()
  const fifo = mkfifo(join(root, 'fifo'))
  const opening = createNodeFileSystem().open(fifo, 'r')
  try {
    const handle = await settlesWithin(opening, LIMIT_MS, "open(fifo, 'r')")
    const st = await handle.stat()
    await handle.close()
    expect([st.isFile, st.isDirectory]).toEqual([false, false])
  } finally {
    await releaseFifos([fifo], opening)
  }
})

test('peekFiles (the worker of a listing of many logs) reports FIFOs and devices as not regular files, without waiting', async () => {
  const dir = await tmpRoot()
  await writeFile(join(dir, 'good'), headerLine(meta('good')))
  await mkdir(join(dir, 'adir'))
  const fifo = mkfifo(join(dir, 'fifo'))
  await symlink(fifo, join(dir, 'link'))
  const paths = ['good', 'fifo', 'link', 'adir'].map((n) => join(dir, n))
  paths.push('/dev/null')
  const peek = async (headBytes: number) => {
    const files = []
    for await (const batch of peekFilesInWorker(paths, headBytes)) files.push(...batch.files.map((f) => ({ error: f.error?.message, head: f.head?.toString() })))
    return files
  }
  const both = Promise.all([peek(4096), peek(0)])
  try {
    const [heads, stats] = await settlesWithin(both, LIMIT_MS, 'peekFiles')
    const refused = [`${paths[1]} is not a regular file (a FIFO)`, `${paths[2]} is not a regular file (a FIFO)`]
    expect(heads.map((f) => f.error)).toEqual([undefined, ...refused, 'EISDIR: illegal operation on a directory, read', '/dev/null is not a regular file (a character device)'])
    expect(heads[0]!.head).toBe(headerLine(meta('good')).trimEnd())
    // a stat only: a directory stats fine (and fails its read later), a FIFO or device is refused
    expect(stats.map((f) => f.error)).toEqual([undefined, ...refused, undefined, '/dev/null is not a regular file (a character device)'])
  } finally {
    await releaseFifos([fifo], both)
  }
})
