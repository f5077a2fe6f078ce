// better-sqlite3 is a peer of the bench only: installing the repository's dependencies compiles
// no native code, so the bench installs it itself, once, under bench/.work/sqlite (ignored by
// git), and loads it from there. Nothing in package.json names it.
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

// 13 needs Node 22: on Node 20 it installs with a warning, then crashes with a segmentation fault.
const MAJOR = '12'
const DIR = fileURLToPath(new URL('../.work/sqlite/', import.meta.url))

/** The installed module if it is major 12 and its native part loads; undefined otherwise. */
function tryLoad() {
  try {
    const require = createRequire(join(DIR, 'package.json'))
    if (!require('better-sqlite3/package.json').version.startsWith(`${MAJOR}.`)) return undefined
    const Database = require('better-sqlite3')
    new Database(':memory:').close()
    return Database
  } catch {
    return undefined
  }
}

/** npm's first error line, or the error's message: what one line can say about a failed install. */
function reason(err) {
  const lines = `${err.stderr ?? ''}`.split('\n').map((l) => l.trim())
  return lines.find((l) => /^npm (error|ERR!)/.test(l) && !/^npm (error|ERR!)\s*$/.test(l)) ?? err.message.split('\n')[0]
}

/**
 * better-sqlite3@12's constructor, installing it first if needed (the first run compiles it:
 * about a minute on two cores). If it cannot be installed or loaded, prints one line saying
 * why and resolves undefined: the SQLite rows are skipped and the rest of the bench runs.
 */
export function loadSqlite({ log = console.log } = {}) {
  const found = tryLoad()
  if (found) return found
  log(`SQLite: installing better-sqlite3@${MAJOR} into bench/.work/sqlite (once; it compiles, about a minute)…`)
  try {
    mkdirSync(DIR, { recursive: true })
    // Its own package.json, so that npm never walks up to the repository's.
    writeFileSync(join(DIR, 'package.json'), '{"name":"bench-sqlite","private":true}\n')
    execFileSync(
      'npm',
      ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', DIR, `better-sqlite3@${MAJOR}`],
      { cwd: DIR, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 600_000 },
    )
  } catch (err) {
    log(`SQLite: better-sqlite3@${MAJOR} could not be installed (${reason(err)}); SQLite rows skipped`)
    return undefined
  }
  const installed = tryLoad()
  if (!installed) log(`SQLite: better-sqlite3@${MAJOR} was installed but does not load on node ${process.version}; SQLite rows skipped`)
  return installed
}
