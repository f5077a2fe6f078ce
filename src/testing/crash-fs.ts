import { createHash } from 'node:crypto'
import { basename, dirname } from 'node:path'
import type { DirEntry, FileHandle, FileStat, FileSystem } from '../fs/file-system.js'

/**
 * An in-memory file system that remembers what a crash could leave (STYLE 6, NOTES "Testing
 * crashes for real"): for every file, the content as of its last sync and its current content;
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
  /** Every distinct state a crash right now could leave (deduplicated). */
  crashImages(options?: { maxImages?: number }): CrashImage[]
  /** The state with everything written kept (what a clean shutdown leaves). */
  currentImage(): CrashImage
}

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
}
interface DirNode {
  kind: 'dir'
  ino: number
  entries: Map<string, number>
  durable: Map<string, number>
  mtimeMs: number
}
type Node = FileNode | DirNode

const sysError = (code: string, op: string, path: string) =>
  Object.assign(new Error(`${code}: ${op} '${path}'`), { code, syscall: op, path }) as NodeJS.ErrnoException

const BLOCK = 4096
/** mtimes in a recovered image are this far in the past: a lock left by the crash has no heartbeat. */
const RECOVERY_AGE_MS = 3_600_000

/** A fresh, empty crash-modelling file system, or one restored from a post-crash image. */
export function createCrashFileSystem(image?: CrashImage): CrashFileSystem {
  const nodes = new Map<number, Node>()
  let nextIno = 1
  const rootIno = nextIno++
  nodes.set(rootIno, { kind: 'dir', ino: rootIno, entries: new Map(), durable: new Map(), mtimeMs: Date.now() })

  if (image) {
    const dirInos = new Map<string, number>([['/', rootIno]])
    const paths = [...image.dirs.keys()].sort((a, b) => a.length - b.length)
    for (const p of paths) if (!dirInos.has(p)) dirInos.set(p, nextIno++)
    const fileIno = new Map<number, number>()
    for (const old of image.files.keys()) fileIno.set(old, nextIno++)
    const age = Date.now() - RECOVERY_AGE_MS
    for (const ino of dirInos.values()) {
      if (ino !== rootIno) nodes.set(ino, { kind: 'dir', ino, entries: new Map(), durable: new Map(), mtimeMs: age })
    }
    for (const [old, bytes] of image.files) {
      const ino = fileIno.get(old)!
      nodes.set(ino, { kind: 'file', ino, current: Buffer.from(bytes), durable: Buffer.from(bytes), mtimeMs: age })
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
    crashImages: (options) => crashImages(options?.maxImages ?? 4096),
    currentImage: () => snapshot((d) => d.entries, (f) => f.current),
    async mkdir(path, _mode) {
      const { parent, name } = parentOf(path, 'mkdir')
      if (parent.entries.has(name)) throw sysError('EEXIST', 'mkdir', path)
      const ino = nextIno++
      nodes.set(ino, { kind: 'dir', ino, entries: new Map(), durable: new Map(), mtimeMs: Date.now() })
      parent.entries.set(name, ino)
      mutated('mkdir', path)
    },
    async open(path, flags, _mode) {
      const { parent, name } = parentOf(path, 'open')
      let ino = parent.entries.get(name)
      if (flags === 'wx') {
        if (ino !== undefined) throw sysError('EEXIST', 'open', path)
        ino = nextIno++
        nodes.set(ino, { kind: 'file', ino, current: Buffer.alloc(0), durable: Buffer.alloc(0), mtimeMs: Date.now() })
        parent.entries.set(name, ino)
        mutated('create', path)
      }
      if (ino === undefined) throw sysError('ENOENT', 'open', path)
      const node = nodes.get(ino)!
      if (node.kind !== 'file') throw sysError('EISDIR', 'open', path)
      return handle(node, path, flags !== 'r')
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
    async chmod(path) {
      lookup(path, 'chmod')
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
    }
  }

  function handle(node: FileNode, path: string, writable: boolean): FileHandle {
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
      async chmod() {
        live('fchmod')
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

  function crashImages(maxImages: number): CrashImage[] {
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
    const total = 2 ** Math.min(choices.length, 16)
    for (let mask = 0; mask < total && combos.length < 256; mask++) {
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
    // 2. File content choices for files with unsynced data.
    const variantsOf = (f: FileNode): Buffer[] => contentVariants(f.durable, f.current)
    const seen = new Map<string, CrashImage>()
    for (const perDir of combos) {
      const entriesOf = (d: DirNode) => perDir.get(d) ?? d.durable
      const base = snapshot(entriesOf, (f) => f.durable)
      const dirty = [...base.files.keys()]
        .map((ino) => nodes.get(ino) as FileNode)
        .filter((f) => !f.current.equals(f.durable))
      // Every file alone through all its variants (others durable), then all kept / all lost.
      const add = (img: CrashImage) => {
        if (seen.size < maxImages && !seen.has(img.key)) seen.set(img.key, img)
      }
      add(base)
      for (const f of dirty) {
        for (const v of variantsOf(f)) {
          add(snapshot(entriesOf, (g) => (g === f ? v : g.durable)))
        }
      }
      if (dirty.length > 1) add(snapshot(entriesOf, (g) => g.current))
    }
    return [...seen.values()]
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
  }
  return out
}

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
