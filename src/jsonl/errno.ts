/** The `code` of a Node-style system error (`ENOENT`, `EEXIST`…), or undefined. */
export function errno(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : undefined
}

/** What a file that is not a regular file is, from its `mode` (`Stats.mode`), for a message. */
export function fileKind(mode: number | undefined, isDirectory = false): string {
  switch ((mode ?? 0) & 0o170000) {
    case 0o010000:
      return 'a FIFO'
    case 0o020000:
      return 'a character device'
    case 0o040000:
      return 'a directory'
    case 0o060000:
      return 'a block device'
    case 0o140000:
      return 'a socket'
    default:
      return isDirectory ? 'a directory' : 'a FIFO, socket or device'
  }
}

/**
 * The error for a path where a regular file was expected and something else is (a FIFO, socket,
 * device or directory): never opened for a wait, never read (docs/decisions.md). No `code`: no
 * system call failed. Wrapped as `E_IO` like any file-system failure.
 */
export function notRegularFile(path: string, st: { mode?: number; isDirectory?: boolean }): Error {
  return new Error(`${path} is not a regular file (${fileKind(st?.mode, st?.isDirectory)})`)
}
