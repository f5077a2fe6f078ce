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

/** Runs npm; resolves undefined on success, or npm's first error line. */
function npm(args, timeoutMs) {
  return new Promise((resolve) => {
    const child = spawn('npm', args, { cwd: SDK_DIR, stdio: ['ignore', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (d) => (stderr += d))
    child.stdout.resume()
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs)
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
 * The SDK's entry as a file URL (for `import()`), installing it first if needed (silently: the
 * caller prints one line when it skips); or `{ skipped }` saying why it cannot be had here. Under `CI=true` that is an
 * error instead: CI has the registry, so the tests that need the SDK must run there.
 * @returns {Promise<{ entry: string } | { skipped: string }>}
 */
export async function ensureClaudeAgentSdk() {
  let entry = installed()
  if (entry) return { entry }
  const why = await withInstallLock(async () => {
    if (installed()) return undefined
    writeFileSync(join(SDK_DIR, 'package.json'), '{"name":"test-claude-agent-sdk","private":true}\n')
    // One quick look first, so that a machine without the registry skips in seconds.
    const offline = await npm(['view', '--fetch-retries=0', '--fetch-timeout=20000', `@anthropic-ai/claude-agent-sdk@${SDK_VERSION}`, 'version'], 30_000)
    if (offline) return `the npm registry cannot be reached (${offline})`
    const failure = await npm(
      ['install', '--no-save', '--no-audit', '--no-fund', '--fetch-retries=1', '--prefix', SDK_DIR, `@anthropic-ai/claude-agent-sdk@${SDK_VERSION}`],
      15 * 60_000,
    )
    if (failure) return `@anthropic-ai/claude-agent-sdk@${SDK_VERSION} could not be installed (${failure})`
    return installed() ? undefined : `@anthropic-ai/claude-agent-sdk@${SDK_VERSION} installed without its CLI for ${process.platform}-${process.arch}`
  })
  entry = installed()
  if (entry) return { entry }
  const reason = why ?? 'the install did not finish'
  if (process.env.CI === 'true') throw new Error(`Claude Agent SDK tests must run under CI=true: ${reason}`)
  return { skipped: reason }
}
