import { createHash } from 'node:crypto'
import { basename, dirname } from 'node:path'
import type { DirEntry, FileHandle, FileStat, FileSystem } from '../jsonl/fs/file-system.js'

/**
 * An in-memory file system that remembers what a crash could leave (crashes are tested by
 * modelling what the disk keeps, not by hoping for one): for every file, the content as of its last sync and its current content;
 * for every directory, its entries as of its last sync and its current entries. `crashImages()`
 * enumerates the states a power cut at this instant may leave on a Linux file system:
 *
 * - data written since a file's last sync may be lost, kept whole, kept as a prefix (cut at
 *   every line boundary and inside each unsynced line), or come back as zero bytes (the whole
 *   unsynced range, or only its first 4 KiB block with later blocks intact);
 * - each directory entry created, linked, renamed or removed since its directory's last sync
 *   independently survives or not (the pessimistic ALICE model), and a file whose name did not
 *   survive is gone.
 */
export interface CrashFileSystem extends FileSystem {
  /** Called after every operation that changes state (a crash point). */
  onMutation: ((op: string, path: string) => void) | undefined
  /** Every distinct state a crash right now could leave (deduplicated), up to the bounds. */
  crashImages(options?: { maxImages?: number }): CrashImage[]
  /** The same states, with a count of the states the bounds left unexplored. */
  crashStates(options?: { maxImages?: number }): CrashStates
  /** The state with everything written kept (what a clean shutdown leaves). */
  currentImage(): CrashImage
  /**
   * Another seam onto this same disk: what a second process sees. Its calls can be paused at an
   * exact step (`beforeCall`) and the process can die (`kill`); crash points and images cover
   * every seam's changes.
   */
  seam(): CrashSeam
  /** Moves every modification time `ms` into the past: time passes for every lock and marker. */
  age(ms: number): void
}

/** One process's view of a crash-modelled disk. */
export interface CrashSeam extends FileSystem {
  /** Awaited before every call of this seam (file-handle calls included), with its operation and path. */
  beforeCall: ((op: string, path: string) => void | Promise<void>) | undefined
  /** The process dies: no later call of this seam, or of a file it opened, ever settles. */
  kill(): void
  readonly killed: boolean
}

/**
 * How much of a crash point's state space `crashStates` did not explore. Every count is of
 * states (or candidate states) that exist in the model but were not checked.
 */
export interface UnexploredStates {
  /** Combinations of surviving directory entries beyond the enumerated ones (at most 256, over at most 16 entries). */
  dirCombos: number
  /** Combinations of the contents of several files with unsynced data, beyond each file alone and all kept. */
  fileCombos: number
  /** Distinct states found beyond `maxImages`. */
  overCap: number
}

export interface CrashStates {
  images: CrashImage[]
  unexplored: UnexploredStates
}

/** Bounds of one crash point's enumeration (stated, and counted when reached). */
export const MAX_DIR_ENTRY_CHOICES = 16
export const MAX_DIR_COMBOS = 256

/** A post-crash state: directories (path → name → inode) and file contents (inode → bytes). */
export interface CrashImage {
  dirs: Map<string, Map<string, number>>
  files: Map<number, Buffer>
  /** A digest of the state, to count distinct states. */
  key: string
}

interface FileNode {
  kind: 'file'
  ino: number
  current: Buffer
  durable: Buffer
  mtimeMs: number
  /** Permission bits: what creation under the umask left, or the last chmod. */
  mode: number
}
interface DirNode {
  kind: 'dir'
  ino: number
  entries: Map<string, number>
  durable: Map<string, number>
  mtimeMs: number
  mode: number
}
type Node = FileNode | DirNode

const sysError = (code: string, op: string, path: string) =>
  Object.assign(new Error(`${code}: ${op} '${path}'`), { code, syscall: op, path }) as NodeJS.ErrnoException

const BLOCK = 4096
/** mtimes in a recovered image are this far in the past: a lock left by the crash has no heartbeat. */
const RECOVERY_AGE_MS = 3_600_000
/** Images keep no modes: restored files and directories get the ones the package creates. */
const RESTORED_FILE_MODE = 0o600
const RESTORED_DIR_MODE = 0o700
const S_IFREG = 0o100000
const S_IFDIR = 0o040000

/**
 * A fresh, empty crash-modelling file system, or one restored from a post-crash image. The
 * restored files' modification times lie `ageMs` in the past (default one hour): a lock or
 * marker the crash left has had no heartbeat since. `umask` (default `0o022`) is applied to the
 * mode of every file and directory created, as the kernel does; `chmod` sets it whole.
 */
export function createCrashFileSystem(image?: CrashImage, options: { ageMs?: number; umask?: number } = {}): CrashFileSystem {
  const nodes = new Map<number, Node>()
  const umask = options.umask ?? 0o022
  const created = (mode: number) => mode & 0o7777 & ~umask
  let nextIno = 1
  const rootIno = nextIno++
  nodes.set(rootIno, { kind: 'dir', ino: rootIno, entries: new Map(), durable: new Map(), mtimeMs: Date.now(), mode: 0o755 })

  if (image) {
    const dirInos = new Map<string, number>([['/', rootIno]])
    const paths = [...image.dirs.keys()].sort((a, b) => a.length - b.length)
    for (const p of paths) if (!dirInos.has(p)) dirInos.set(p, nextIno++)
    const fileIno = new Map<number, number>()
    for (const old of image.files.keys()) fileIno.set(old, nextIno++)
    const age = Date.now() - (options.ageMs ?? RECOVERY_AGE_MS)
    for (const ino of dirInos.values()) {
      if (ino !== rootIno) {
        nodes.set(ino, { kind: 'dir', ino, entries: new Map(), durable: new Map(), mtimeMs: age, mode: RESTORED_DIR_MODE })
      }
    }
    for (const [old, bytes] of image.files) {
      const ino = fileIno.get(old)!
      const restored = { current: Buffer.from(bytes), durable: Buffer.from(bytes), mtimeMs: age, mode: RESTORED_FILE_MODE }
      nodes.set(ino, { kind: 'file', ino, ...restored })
    }
    for (const [p, entries] of image.dirs) {
      const dir = nodes.get(dirInos.get(p)!) as DirNode
      for (const [name, ref] of entries) {
        const childPath = p === '/' ? `/${name}` : `${p}/${name}`
        const ino = image.dirs.has(childPath) ? dirInos.get(childPath)! : fileIno.get(ref)
        if (ino === undefined) continue
        dir.entries.set(name, ino)
        dir.durable.set(name, ino)
      }
    }
  }

  const fs: CrashFileSystem = {
    onMutation: undefined,
    crashImages: (opts) => crashStates(opts?.maxImages ?? 4096).images,
    crashStates: (opts) => crashStates(opts?.maxImages ?? 4096),
    seam: () => makeSeam(fs),
    age(ms) {
      for (const node of nodes.values()) node.mtimeMs -= ms
    },
    currentImage: () => snapshot((d) => d.entries, (f) => f.current),
    // O_DSYNC writes are modelled as a write followed by a data sync (two crash points).
    supportsDsync: true,
    async mkdir(path, mode) {
      const { parent, name } = parentOf(path, 'mkdir')
      if (parent.entries.has(name)) throw sysError('EEXIST', 'mkdir', path)
      const ino = nextIno++
      nodes.set(ino, { kind: 'dir', ino, entries: new Map(), durable: new Map(), mtimeMs: Date.now(), mode: created(mode) })
      parent.entries.set(name, ino)
      mutated('mkdir', path)
    },
    async open(path, openFlags, mode = 0o666) {
      const dsync = openFlags.endsWith('dsync')
      const flags = dsync ? openFlags.slice(0, -'dsync'.length) : openFlags
      const { parent, name } = parentOf(path, 'open')
      let ino = parent.entries.get(name)
      if (flags === 'wx') {
        if (ino !== undefined) throw sysError('EEXIST', 'open', path)
        ino = nextIno++
        const fresh = { current: Buffer.alloc(0), durable: Buffer.alloc(0), mtimeMs: Date.now(), mode: created(mode) }
        nodes.set(ino, { kind: 'file', ino, ...fresh })
        parent.entries.set(name, ino)
        mutated('create', path)
      }
      if (ino === undefined) throw sysError('ENOENT', 'open', path)
      const node = nodes.get(ino)!
      if (node.kind !== 'file') throw sysError('EISDIR', 'open', path)
      return handle(node, path, flags !== 'r', dsync)
    },
    async link(existingPath, newPath) {
      const from = lookup(existingPath, 'link')
      if (from.kind !== 'file') throw sysError('EPERM', 'link', existingPath)
      const { parent, name } = parentOf(newPath, 'link')
      if (parent.entries.has(name)) throw sysError('EEXIST', 'link', newPath)
      parent.entries.set(name, from.ino)
      mutated('link', newPath)
    },
    async unlink(path) {
      const { parent, name } = parentOf(path, 'unlink')
      const ino = parent.entries.get(name)
      if (ino === undefined) throw sysError('ENOENT', 'unlink', path)
      if (nodes.get(ino)?.kind === 'dir') throw sysError('EISDIR', 'unlink', path)
      parent.entries.delete(name)
      mutated('unlink', path)
    },
    async rename(oldPath, newPath) {
      const from = parentOf(oldPath, 'rename')
      const ino = from.parent.entries.get(from.name)
      if (ino === undefined) throw sysError('ENOENT', 'rename', oldPath)
      const to = parentOf(newPath, 'rename')
      from.parent.entries.delete(from.name)
      to.parent.entries.set(to.name, ino)
      mutated('rename', newPath)
    },
    async readdir(path): Promise<DirEntry[]> {
      const dir = lookup(path, 'readdir')
      if (dir.kind !== 'dir') throw sysError('ENOTDIR', 'readdir', path)
      return [...dir.entries].map(([name, ino]) => {
        const kind = nodes.get(ino)!.kind
        return { name, isDirectory: kind === 'dir', isFile: kind === 'file' }
      })
    },
    async stat(path) {
      return statOf(lookup(path, 'stat'))
    },
    async chmod(path, mode) {
      lookup(path, 'chmod').mode = mode & 0o7777
    },
    async utimes(path, _atime, mtime) {
      lookup(path, 'utimes').mtimeMs = mtime.getTime()
    },
    async readlink(path) {
      throw sysError('ENOENT', 'readlink', path)
    },
    async syncDir(path) {
      const dir = lookup(path, 'syncDir')
      if (dir.kind !== 'dir') throw sysError('ENOTDIR', 'fsync', path)
      dir.durable = new Map(dir.entries)
      mutated('syncDir', path)
    },
  }

  function mutated(op: string, path: string) {
    fs.onMutation?.(op, path)
  }

  function lookup(path: string, op: string): Node {
    if (path === '/') return nodes.get(rootIno)!
    const { parent, name } = parentOf(path, op)
    const ino = parent.entries.get(name)
    if (ino === undefined) throw sysError('ENOENT', op, path)
    return nodes.get(ino)!
  }

  function parentOf(path: string, op: string): { parent: DirNode; name: string } {
    if (!path.startsWith('/')) throw sysError('EINVAL', op, path)
    const parentPath = dirname(path)
    let node: Node = nodes.get(rootIno)!
    for (const part of parentPath.split('/').filter(Boolean)) {
      if (node.kind !== 'dir') throw sysError('ENOTDIR', op, path)
      const ino: number | undefined = node.entries.get(part)
      if (ino === undefined) throw sysError('ENOENT', op, path)
      node = nodes.get(ino)!
    }
    if (node.kind !== 'dir') throw sysError('ENOTDIR', op, path)
    return { parent: node, name: basename(path) }
  }

  function statOf(node: Node): FileStat {
    return {
      size: node.kind === 'file' ? node.current.length : 4096,
      ino: node.ino,
      mtimeMs: node.mtimeMs,
      isDirectory: node.kind === 'dir',
      isFile: node.kind === 'file',
      mode: (node.kind === 'file' ? S_IFREG : S_IFDIR) | node.mode,
    }
  }

  function handle(node: FileNode, path: string, writable: boolean, dsync = false): FileHandle {
    let closed = false
    const live = (op: string) => {
      if (closed) throw sysError('EBADF', op, path)
    }
    return {
      async read(buffer, offset, length, position) {
        live('read')
        const n = Math.max(0, Math.min(length, node.current.length - position))
        node.current.copy(buffer, offset, position, position + n)
        return n
      },
      async write(buffer, offset, length, position) {
        live('write')
        if (!writable) throw sysError('EBADF', 'write', path)
        const end = position + length
        if (end > node.current.length) {
          const grown = Buffer.alloc(end)
          node.current.copy(grown)
          node.current = grown
        } else {
          node.current = Buffer.from(node.current)
        }
        buffer.copy(node.current, position, offset, offset + length)
        node.mtimeMs = Date.now()
        mutated('write', path)
        if (dsync) {
          node.durable = Buffer.from(node.current)
          mutated('fdatasync', path)
        }
        return length
      },
      async sync() {
        live('fsync')
        node.durable = Buffer.from(node.current)
        mutated('fsync', path)
      },
      async datasync() {
        live('fdatasync')
        node.durable = Buffer.from(node.current)
        mutated('fdatasync', path)
      },
      async truncate(length) {
        live('ftruncate')
        const next = Buffer.alloc(length)
        node.current.copy(next, 0, 0, Math.min(length, node.current.length))
        node.current = next
        mutated('truncate', path)
      },
      async stat() {
        live('fstat')
        return statOf(node)
      },
      async chmod(mode) {
        live('fchmod')
        node.mode = mode & 0o7777
      },
      async close() {
        live('close')
        closed = true
      },
    }
  }

  /** An image from chosen directory entries and file contents. */
  function snapshot(entriesOf: (d: DirNode) => Map<string, number>, contentOf: (f: FileNode) => Buffer): CrashImage {
    const dirs = new Map<string, Map<string, number>>()
    const files = new Map<number, Buffer>()
    const walk = (dir: DirNode, path: string) => {
      const chosen = new Map<string, number>()
      dirs.set(path, chosen)
      for (const [name, ino] of entriesOf(dir)) {
        const node = nodes.get(ino)
        if (!node) continue
        chosen.set(name, ino)
        const childPath = path === '/' ? `/${name}` : `${path}/${name}`
        if (node.kind === 'dir') walk(node, childPath)
        else if (!files.has(ino)) files.set(ino, contentOf(node))
      }
    }
    walk(nodes.get(rootIno) as DirNode, '/')
    return { dirs, files, key: imageKey(dirs, files) }
  }

  function crashStates(maxImages: number): CrashStates {
    const unexplored: UnexploredStates = { dirCombos: 0, fileCombos: 0, overCap: 0 }
    // 1. Directory entry choices: each entry that differs from the durable map survives or not.
    const dirNodes = [...nodes.values()].filter((n): n is DirNode => n.kind === 'dir')
    const choices: { dir: DirNode; name: string; durable: number | undefined; current: number | undefined }[] = []
    for (const d of dirNodes) {
      const names = new Set([...d.entries.keys(), ...d.durable.keys()])
      for (const name of names) {
        const cur = d.entries.get(name)
        const dur = d.durable.get(name)
        if (cur !== dur) choices.push({ dir: d, name, durable: dur, current: cur })
      }
    }
    const combos: Map<DirNode, Map<string, number>>[] = []
    const total = 2 ** Math.min(choices.length, MAX_DIR_ENTRY_CHOICES)
    for (let mask = 0; mask < total && combos.length < MAX_DIR_COMBOS; mask++) {
      const perDir = new Map<DirNode, Map<string, number>>()
      choices.forEach((c, i) => {
        let m = perDir.get(c.dir)
        if (!m) perDir.set(c.dir, (m = new Map(c.dir.durable)))
        const ino = mask & (1 << i) ? c.current : c.durable
        if (ino === undefined) m.delete(c.name)
        else m.set(c.name, ino)
      })
      combos.push(perDir)
    }
    unexplored.dirCombos = 2 ** choices.length - combos.length
    // 2. File content choices for files with unsynced data.
    const variantsOf = (f: FileNode): Buffer[] => contentVariants(f.durable, f.current)
    const seen = new Map<string, CrashImage>()
    const beyondCap = new Set<string>()
    for (const perDir of combos) {
      const entriesOf = (d: DirNode) => perDir.get(d) ?? d.durable
      const base = snapshot(entriesOf, (f) => f.durable)
      const dirty = [...base.files.keys()]
        .map((ino) => nodes.get(ino) as FileNode)
        .filter((f) => !f.current.equals(f.durable))
      // Every file alone through all its variants (others durable), then all kept / all lost.
      const add = (img: CrashImage) => {
        if (seen.has(img.key)) return
        if (seen.size < maxImages) seen.set(img.key, img)
        else beyondCap.add(img.key)
      }
      add(base)
      let product = 1
      let alone = 0
      for (const f of dirty) {
        const variants = variantsOf(f)
        product *= variants.length
        alone += variants.length - 1
        for (const v of variants) {
          add(snapshot(entriesOf, (g) => (g === f ? v : g.durable)))
        }
      }
      if (dirty.length > 1) add(snapshot(entriesOf, (g) => g.current))
      // Every file's content varies independently in the model; only these were visited.
      unexplored.fileCombos += Math.max(0, product - (1 + alone + (dirty.length > 1 ? 1 : 0)))
    }
    unexplored.overCap = beyondCap.size
    return { images: [...seen.values()], unexplored }
  }

  function makeSeam(base: FileSystem): CrashSeam {
    const never = new Promise<never>(() => {})
    const state = { killed: false }
    const seam: CrashSeam = {
      supportsDsync: base.supportsDsync,
      beforeCall: undefined,
      kill() {
        state.killed = true
      },
      get killed() {
        return state.killed
      },
    } as CrashSeam
    const gate = async (op: string, path: string) => {
      if (state.killed) await never
      await seam.beforeCall?.(op, path)
      if (state.killed) await never
    }
    const wrapHandle = (h: FileHandle, path: string): FileHandle => {
      const out = {} as Record<string, unknown>
      for (const key of Object.keys(h) as (keyof FileHandle)[]) {
        const call = h[key] as (...args: unknown[]) => Promise<unknown>
        out[key] = async (...args: unknown[]) => {
          await gate(key === 'stat' ? 'fstat' : key, path)
          return call(...args)
        }
      }
      return out as unknown as FileHandle
    }
    const ops = ['mkdir', 'link', 'unlink', 'readdir', 'stat', 'chmod', 'rename', 'utimes', 'readlink', 'syncDir'] as const
    for (const op of ops) {
      const call = base[op] as (...args: unknown[]) => Promise<unknown>
      ;(seam as unknown as Record<string, unknown>)[op] = async (...args: unknown[]) => {
        await gate(op, String(op === 'link' || op === 'rename' ? args[1] : args[0]))
        return call(...args)
      }
    }
    seam.open = async (path, flags, mode) => {
      await gate('open', path)
      return wrapHandle(await base.open(path, flags, mode), path)
    }
    return seam
  }

  return fs
}

/** What may be on disk for a file whose synced content is `durable` and current content is `current`. */
export function contentVariants(durable: Buffer, current: Buffer): Buffer[] {
  let common = 0
  const max = Math.min(durable.length, current.length)
  while (common < max && durable[common] === current[common]) common++
  const out: Buffer[] = [durable, current]
  if (current.length > common) {
    const cuts = new Set<number>()
    for (let i = common; i < current.length; i++) {
      if (current[i] === 0x0a) {
        cuts.add(i) // the line without its newline
        cuts.add(i + 1) // the whole line
      }
    }
    let lineStart = common
    for (let i = common; i <= current.length; i++) {
      if (i === current.length || current[i] === 0x0a) {
        if (i > lineStart) {
          cuts.add(lineStart + 1)
          cuts.add(lineStart + Math.floor((i - lineStart) / 2))
        }
        lineStart = i + 1
      }
    }
    for (let b = Math.ceil((common + 1) / BLOCK) * BLOCK; b < current.length; b += BLOCK) cuts.add(b)
    for (const k of cuts) if (k > common && k < current.length) out.push(current.subarray(0, k))
    // Zeros: the whole unsynced range, or only its first block with the rest intact.
    const zeroed = Buffer.from(current)
    zeroed.fill(0, common)
    out.push(zeroed)
    const firstBlockEnd = Math.min(current.length, Math.floor(common / BLOCK) * BLOCK + BLOCK)
    if (firstBlockEnd < current.length) {
      const partial = Buffer.from(current)
      partial.fill(0, common, firstBlockEnd)
      out.push(partial)
    }
    // Writeback out of order: blocks kept up to a boundary and zeros after it (the zeros start
    // inside a line), or one later block zeroed with those around it kept. Boundaries inside the
    // unsynced range, the first and last few of them (a huge write has hundreds).
    const boundaries: number[] = []
    for (let b = firstBlockEnd; b < current.length; b += BLOCK) boundaries.push(b)
    const chosen = boundaries.length <= 2 * ZERO_BOUNDARIES ? boundaries : [...boundaries.slice(0, ZERO_BOUNDARIES), ...boundaries.slice(-ZERO_BOUNDARIES)]
    for (const b of chosen) {
      const after = Buffer.from(current)
      after.fill(0, b)
      out.push(after)
      const one = Buffer.from(current)
      one.fill(0, b, Math.min(current.length, b + BLOCK))
      out.push(one)
    }
  }
  return out
}

/** Block boundaries of an unsynced range at whose either side zeros are enumerated (first and last this many). */
const ZERO_BOUNDARIES = 4

function imageKey(dirs: Map<string, Map<string, number>>, files: Map<number, Buffer>): string {
  const h = createHash('sha1')
  for (const [p, entries] of [...dirs].sort(([a], [b]) => (a < b ? -1 : 1))) {
    h.update(p)
    for (const [name, ino] of [...entries].sort(([a], [b]) => (a < b ? -1 : 1))) {
      h.update(`\0${name}\0`)
      const bytes = files.get(ino)
      h.update(bytes ? createHash('sha1').update(bytes).digest() : Buffer.from('dir'))
    }
  }
  return h.digest('hex')
}
