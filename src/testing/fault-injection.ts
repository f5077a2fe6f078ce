import type { FileHandle, FileSystem } from '../jsonl/fs/file-system.js'
import { createNodeFileSystem } from '../jsonl/fs/node-file-system.js'

/** Every operation of the file-system seam, file-handle calls included. */
export type FsOp =
  | 'mkdir'
  | 'open'
  | 'link'
  | 'unlink'
  | 'readdir'
  | 'stat'
  | 'chmod'
  | 'rename'
  | 'utimes'
  | 'readlink'
  | 'syncDir'
  | 'read'
  | 'write'
  | 'sync'
  | 'datasync'
  | 'truncate'
  | 'fstat'
  | 'fchmod'
  | 'close'

/** Operations that change what is on disk. */
export const MUTATING_OPS: ReadonlySet<FsOp> = new Set<FsOp>([
  'mkdir',
  'link',
  'unlink',
  'chmod',
  'rename',
  'utimes',
  'syncDir',
  'write',
  'sync',
  'datasync',
  'truncate',
  'fchmod',
])

export interface FsCall {
  op: FsOp
  path: string
  /** `open` flags, or bytes asked for by `read`/`write`, or the length of `truncate`. */
  detail?: string | number
}

export interface FaultRule {
  /** The operation (or operations) the rule applies to. */
  op: FsOp | readonly FsOp[]
  /** Only calls on this path (exact string, RegExp, or predicate). Any path when omitted. */
  path?: string | RegExp | ((path: string) => boolean)
  /** The system error code to fail with, e.g. `EIO`, `ENOSPC`, `EDQUOT`. Omit to only delay. */
  code?: string
  /** Let this many matching calls through first. Default 0. */
  skip?: number
  /** Fail (or delay) this many matching calls, then retire the rule. Default: forever. */
  times?: number
  /** Wait this long before the call (a slow disk). */
  delayMs?: number
  /**
   * Called before each matching call the rule fires for (after `skip`, within `times`), with the
   * call; the call waits for what it returns. Lets a test stop, pause or signal at an exact step.
   */
  before?: (call: FsCall) => void | Promise<void>
}

export interface FaultInjectingFileSystem extends FileSystem {
  /** Every call made so far, in order. */
  readonly calls: FsCall[]
  /** Adds a rule; returns a function that removes it. */
  inject(rule: FaultRule): () => void
  clearFaults(): void
  /** When true, every write writes at most half of what it was asked (at least one byte). */
  shortWrites: boolean
}

interface LiveRule extends FaultRule {
  seen: number
  fired: number
}

function systemError(code: string, op: FsOp, path: string): NodeJS.ErrnoException {
  const err = new Error(`${code}: injected fault, ${op} '${path}'`) as NodeJS.ErrnoException
  err.code = code
  err.syscall = op
  err.path = path
  return err
}

function matches(rule: FaultRule, op: FsOp, path: string): boolean {
  if (typeof rule.op === 'string' ? rule.op !== op : !rule.op.includes(op)) return false
  const p = rule.path
  if (p === undefined) return true
  if (typeof p === 'string') return p === path
  if (p instanceof RegExp) return p.test(path)
  return p(path)
}

/**
 * Wraps a file-system seam (Node's by default) so tests can fail any chosen operation with a
 * system error, slow it down, force short writes, and see every call that was made.
 */
export function createFaultInjectingFileSystem(base: FileSystem = createNodeFileSystem()): FaultInjectingFileSystem {
  const calls: FsCall[] = []
  let rules: LiveRule[] = []
  // The names of each open handle's file: a link() gives the same inode one more name.
  const openNames = new Set<string[]>()
  const state = { shortWrites: false }

  async function gate(op: FsOp, names: string | string[], detail?: string | number): Promise<void> {
    const all = typeof names === 'string' ? [names] : names
    const path = all[all.length - 1] ?? ''
    const call: FsCall = detail === undefined ? { op, path } : { op, path, detail }
    calls.push(call)
    for (const rule of rules) {
      if (!all.some((name) => matches(rule, op, name))) continue
      rule.seen++
      if (rule.seen <= (rule.skip ?? 0)) continue
      if (rule.times !== undefined && rule.fired >= rule.times) continue
      rule.fired++
      if (rule.before) await rule.before(call)
      if (rule.delayMs) await new Promise((r) => setTimeout(r, rule.delayMs))
      if (rule.code) throw systemError(rule.code, op, path)
    }
  }

  const wrapHandle = (openedAs: string, h: FileHandle): FileHandle => {
    const path = [openedAs]
    openNames.add(path)
    return {
    async read(buffer, offset, length, position) {
      await gate('read', path, length)
      return h.read(buffer, offset, length, position)
    },
    async write(buffer, offset, length, position) {
      await gate('write', path, length)
      const n = state.shortWrites && length > 1 ? Math.ceil(length / 2) : length
      return h.write(buffer, offset, n, position)
    },
    async sync() {
      await gate('sync', path)
      return h.sync()
    },
    async datasync() {
      await gate('datasync', path)
      return h.datasync()
    },
    async truncate(length) {
      await gate('truncate', path, length)
      return h.truncate(length)
    },
    async stat() {
      await gate('fstat', path)
      return h.stat()
    },
    async chmod(mode) {
      await gate('fchmod', path)
      return h.chmod(mode)
    },
    async close() {
      await gate('close', path)
      openNames.delete(path)
      return h.close()
    },
  }
  }

  return {
    calls,
    // O_DSYNC descriptors are the base's to offer; a wrapped handle still gates every write.
    supportsDsync: base.supportsDsync,
    get shortWrites() {
      return state.shortWrites
    },
    set shortWrites(v: boolean) {
      state.shortWrites = v
    },
    inject(rule) {
      const live: LiveRule = { ...rule, seen: 0, fired: 0 }
      rules.push(live)
      return () => {
        rules = rules.filter((r) => r !== live)
      }
    },
    clearFaults() {
      rules = []
    },
    async mkdir(path, mode) {
      await gate('mkdir', path)
      return base.mkdir(path, mode)
    },
    async open(path, flags, mode) {
      await gate('open', path, flags)
      return wrapHandle(path, await base.open(path, flags, mode))
    },
    async link(existingPath, newPath) {
      await gate('link', newPath)
      await base.link(existingPath, newPath)
      for (const names of openNames) if (names.includes(existingPath)) names.push(newPath)
    },
    async unlink(path) {
      await gate('unlink', path)
      return base.unlink(path)
    },
    async readdir(path) {
      await gate('readdir', path)
      return base.readdir(path)
    },
    async stat(path) {
      await gate('stat', path)
      return base.stat(path)
    },
    async chmod(path, mode) {
      await gate('chmod', path)
      return base.chmod(path, mode)
    },
    async rename(oldPath, newPath) {
      await gate('rename', newPath)
      return base.rename(oldPath, newPath)
    },
    async utimes(path, atime, mtime) {
      await gate('utimes', path)
      return base.utimes(path, atime, mtime)
    },
    async readlink(path) {
      await gate('readlink', path)
      return base.readlink(path)
    },
    async syncDir(path) {
      await gate('syncDir', path)
      return base.syncDir(path)
    },
  }
}
