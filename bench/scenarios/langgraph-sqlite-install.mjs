// LangGraph's SQLite checkpointer (@langchain/langgraph-checkpoint-sqlite, which needs
// better-sqlite3, a native module) is a peer of the bench only: installing the repository's
// dependencies compiles no native code, so the bench installs it itself, once, under
// bench/.work/langgraph-sqlite (ignored by git), and loads it from there. Nothing in
// package.json names it. Its peers (@langchain/core, @langchain/langgraph-checkpoint) are not
// installed there: they resolve to the repository's own copies, so the saver extends the same
// BaseCheckpointSaver that the repository's LangGraph uses.
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const VERSION = '1.0.4'
// better-sqlite3 13 needs Node 22 (on Node 20 it installs, then crashes); the saver asks for ^12.
const SQLITE_MAJOR = '12'
const DIR = fileURLToPath(new URL('../.work/langgraph-sqlite/', import.meta.url))

async function tryLoad() {
  try {
    const require = createRequire(join(DIR, 'package.json'))
    if (require('@langchain/langgraph-checkpoint-sqlite/package.json').version !== VERSION) return undefined
    if (!require('better-sqlite3/package.json').version.startsWith(`${SQLITE_MAJOR}.`)) return undefined
    const entry = require.resolve('@langchain/langgraph-checkpoint-sqlite')
    const { SqliteSaver } = await import(pathToFileURL(entry.replace(/index\.cjs$/, 'index.js')).href)
    SqliteSaver.fromConnString(':memory:')
    return SqliteSaver
  } catch {
    return undefined
  }
}

function reason(err) {
  const lines = `${err.stderr ?? ''}`.split('\n').map((l) => l.trim())
  return lines.find((l) => /^npm (error|ERR!)/.test(l) && !/^npm (error|ERR!)\s*$/.test(l)) ?? err.message.split('\n')[0]
}

/**
 * LangGraph's `SqliteSaver` class, installing it first if needed (the first run compiles
 * better-sqlite3: about a minute on two cores). If it cannot be had, prints one line saying why
 * and resolves undefined: the SQLite row is skipped and the rest of the bench runs.
 */
export async function loadSqliteSaver({ log = console.log } = {}) {
  const found = await tryLoad()
  if (found) return found
  log(`SQLite: installing @langchain/langgraph-checkpoint-sqlite@${VERSION} (better-sqlite3@${SQLITE_MAJOR}) into bench/.work/langgraph-sqlite (once; it compiles, about a minute)…`)
  try {
    mkdirSync(DIR, { recursive: true })
    writeFileSync(join(DIR, 'package.json'), '{"name":"bench-langgraph-sqlite","private":true}\n')
    execFileSync(
      'npm',
      [
        'install', '--no-save', '--no-audit', '--no-fund', '--legacy-peer-deps', '--prefix', DIR,
        `@langchain/langgraph-checkpoint-sqlite@${VERSION}`, `better-sqlite3@${SQLITE_MAJOR}`,
      ],
      { cwd: DIR, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8', timeout: 600_000 },
    )
  } catch (err) {
    log(`SQLite: the LangGraph SQLite saver could not be installed (${reason(err)}); SQLite row skipped`)
    return undefined
  }
  const installed = await tryLoad()
  if (!installed) log(`SQLite: the LangGraph SQLite saver was installed but does not load on node ${process.version}; SQLite row skipped`)
  return installed
}
