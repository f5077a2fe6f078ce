// What users would pick instead: SQLite (WAL, synchronous=FULL), rewriting the whole file at
// every save, and appendFileSync without any sync — each doing the same work as the package.
import { appendFileSync, closeSync, fsyncSync, openSync, renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createJsonlPersistence } from '../../dist/index.js'
import { cleanup, events, interleave, median, now, scratch, serialize } from '../lib.mjs'
import { writeLog } from './load-list-lock.mjs'

const meta = (id) => ({ id, createdAt: 1_764_489_600_000, delegationDepth: 0 })

function openDb(Database, path) {
  const db = new Database(path)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = FULL')
  db.exec('CREATE TABLE IF NOT EXISTS events (session TEXT NOT NULL, seq INTEGER NOT NULL, json TEXT NOT NULL, PRIMARY KEY (session, seq))')
  const insert = db.prepare('INSERT INTO events (session, seq, json) VALUES (?, ?, ?)')
  const tx = db.transaction((session, batch) => {
    for (const e of batch) insert.run(session, e.seq, JSON.stringify(e))
  })
  return { db, tx }
}

/** Batches of `size`: package vs SQLite, one transaction per batch, interleaved (rotating order). */
export async function sqliteAppendRun(Database, size, count) {
  const dir = scratch('sqlite')
  try {
    const batches = Array.from({ length: count + 1 }, (_, b) => events(b * size, size))
    const { db, tx } = openDb(Database, join(dir, 'events.db'))
    tx('s', batches[0])
    const p = createJsonlPersistence({ root: dir })
    await p.create(meta('s'))
    await p.append('s', batches[0])
    const total = await interleave([
      ['pkg', (i) => p.append('s', batches[i])],
      ['sqlite', (i) => tx('s', batches[i])],
    ], count)
    await p.closeAll()
    db.close()
    return { pkg: total.pkg / count, sqlite: total.sqlite / count }
  } finally {
    cleanup(dir)
  }
}

/** Load: package vs SQLite SELECT + JSON.parse of the same 100k events. */
export async function sqliteLoadRun(Database, root, count) {
  const dbPath = join(root, 'load.db')
  const { db, tx } = openDb(Database, dbPath)
  if (db.prepare('SELECT count(*) n FROM events').get().n === 0) {
    const all = events(0, count)
    for (let i = 0; i < count; i += 10_000) tx('big', all.slice(i, i + 10_000))
  }
  const select = db.prepare('SELECT json FROM events WHERE session = ? ORDER BY seq')
  let t = now()
  const rows = select.all('big').map((r) => JSON.parse(r.json))
  const sqlite = now() - t
  db.close()
  const p = createJsonlPersistence({ root })
  t = now()
  const loaded = await p.load('big')
  const pkg = now() - t
  await p.closeAll()
  if (rows.length !== loaded.events.length) throw new Error('different event counts')
  return { pkg, sqlite }
}

/** `sync: 'none'` against appendFileSync with no sync at all (what several agents do). */
export async function noSyncRun(size, count) {
  const dir = scratch('nosync')
  try {
    const batches = Array.from({ length: count + 1 }, (_, b) => events(b * size, size))
    const p = createJsonlPersistence({ root: dir, sync: 'none' })
    await p.create(meta('s'))
    await p.append('s', batches[0])
    const path = join(dir, 'append-file-sync.jsonl')
    let pkg = 0
    let raw = 0
    for (let i = 1; i <= count; i++) {
      let t = now()
      await p.append('s', batches[i])
      pkg += now() - t
      t = now()
      appendFileSync(path, serialize(batches[i]))
      raw += now() - t
    }
    await p.closeAll()
    return { pkg: pkg / count, raw: raw / count }
  } finally {
    cleanup(dir)
  }
}

/** Cost per batch of 10 as the log grows: the package at 1k and 50k events, the rewrite baseline at both. */
export async function growthRun(saves, bigRewrites = 4) {
  const dir = scratch('growth')
  try {
    writeLog(dir, 'small', 1_000)
    writeLog(dir, 'large', 50_000)
    const p = createJsonlPersistence({ root: dir })
    const small = (await p.load('small')).events.length
    const large = (await p.load('large')).events.length
    // Per-batch times, interleaved; a run's figure is the median batch, so that one stray
    // journal commit of the machine does not decide a ratio of two sub-millisecond costs.
    const tSmall = []
    const tLarge = []
    for (let i = 0; i < saves; i++) {
      let t = now()
      await p.append('small', events(small + i * 10, 10))
      tSmall.push(now() - t)
      t = now()
      await p.append('large', events(large + i * 10, 10))
      tLarge.push(now() - t)
    }
    await p.closeAll()
    const rewrite = (n) => {
      const entries = events(0, n)
      const path = join(dir, `rewrite-${n}.jsonl`)
      const few = Math.max(2, Math.min(saves, Math.floor(200_000 / n), n >= 50_000 ? bigRewrites : Infinity))
      const t = now()
      for (let i = 0; i < few; i++) {
        const tmp = `${path}.tmp`
        writeFileSync(tmp, serialize(entries))
        const fd = openSync(tmp, 'r+')
        fsyncSync(fd)
        closeSync(fd)
        renameSync(tmp, path)
        const d = openSync(dir, 'r')
        fsyncSync(d)
        closeSync(d)
      }
      return (now() - t) / few
    }
    return { pkgAt1k: median(tSmall), pkgAt50k: median(tLarge), rewriteAt1k: rewrite(1_000), rewriteAt50k: rewrite(50_000) }
  } finally {
    cleanup(dir)
  }
}
