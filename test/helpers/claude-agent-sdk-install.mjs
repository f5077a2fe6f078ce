// The Claude Agent SDK is an optional peer, in no dependency list of package.json: its CLI is a
// ~384 MB platform package that a newcomer's `npm install` must not download. The tests (and
// the bench) that run it install it themselves, once, into test/.work/claude-agent-sdk (ignored
// by git), with a package.json of its own so that npm never walks up to the repository's.
import { spawn } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

export const SDK_VERSION = '0.3.332'
export const SDK_DIR = fileURLToPath(new URL('../.work/claude-agent-sdk/', import.meta.url))
const LOCK = join(SDK_DIR, '.installing')
const STALE_LOCK_MS = 15 * 60_000

/** The SDK's entry (a file URL) when the pinned version and its platform CLI are installed. */
function installed() {
  try {
    // Read from the folder: the SDK's `exports` do not expose its package.json.
    const modules = join(SDK_DIR, 'node_modules', '@anthropic-ai')
    const version = (name) => JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8')).version
    if (version('claude-agent-sdk') !== SDK_VERSION) return undefined
    // The CLI itself: the optional dependency for this platform (npm skips it when it cannot).
    if (version(`claude-agent-sdk-${process.platform}-${process.arch}`) !== SDK_VERSION) return undefined
    const require = createRequire(join(SDK_DIR, 'package.json'))
    return pathToFileURL(require.resolve('@anthropic-ai/claude-agent-sdk')).href
  } catch {
    return undefined
  }
}

function npmInstall() {
  return new Promise((resolve) => {
    const child = spawn(
      'npm',
      ['install', '--no-save', '--no-audit', '--no-fund', '--prefix', SDK_DIR, `@anthropic-ai/claude-agent-sdk@${SDK_VERSION}`],
      { cwd: SDK_DIR, stdio: ['ignore', 'pipe', 'pipe'] },
    )
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    child.stdout.resume()
    const timer = setTimeout(() => child.kill('SIGKILL'), 15 * 60_000)
    child.on('error', (err) => resolve(err.message))
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      if (code === 0) return resolve(undefined)
      const lines = stderr.split('\n').map((l) => l.trim())
      resolve(lines.find((l) => /^npm (error|ERR!)/.test(l) && !/^npm (error|ERR!)\s*$/.test(l)) ?? `npm exited with ${code ?? signal}`)
    })
  })
}

/** Holds the install lock (a directory: mkdir is atomic) so parallel test files install once. */
async function withInstallLock(fn) {
  mkdirSync(SDK_DIR, { recursive: true })
  for (;;) {
    try {
      mkdirSync(LOCK)
      break
    } catch (err) {
      if (err.code !== 'EEXIST') throw err
      if (installed()) return undefined
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > STALE_LOCK_MS) rmSync(LOCK, { recursive: true, force: true })
      } catch {}
      await new Promise((r) => setTimeout(r, 500))
    }
  }
  try {
    return await fn()
  } finally {
    rmSync(LOCK, { recursive: true, force: true })
  }
}

/**
 * The SDK's entry as a file URL (for `import()`), installing it first if needed; or
 * `{ skipped }` with one line saying why it cannot be had here. Under `CI=true` that is an
 * error instead: CI has the registry, so the tests that need the SDK must run there.
 * @returns {Promise<{ entry: string } | { skipped: string }>}
 */
export async function ensureClaudeAgentSdk({ log = (line) => console.log(line) } = {}) {
  let entry = installed()
  if (entry) return { entry }
  const why = await withInstallLock(async () => {
    if (installed()) return undefined
    log(`Claude Agent SDK: installing @anthropic-ai/claude-agent-sdk@${SDK_VERSION} into test/.work/claude-agent-sdk (once; ~400 MB)…`)
    writeFileSync(join(SDK_DIR, 'package.json'), '{"name":"test-claude-agent-sdk","private":true}\n')
    const failure = await npmInstall()
    if (failure) return `@anthropic-ai/claude-agent-sdk@${SDK_VERSION} could not be installed (${failure})`
    return installed() ? undefined : `@anthropic-ai/claude-agent-sdk@${SDK_VERSION} installed without its CLI for ${process.platform}-${process.arch}`
  })
  entry = installed()
  if (entry) return { entry }
  const reason = why ?? 'the install did not finish'
  if (process.env.CI === 'true') throw new Error(`Claude Agent SDK tests must run under CI=true: ${reason}`)
  return { skipped: reason }
}
