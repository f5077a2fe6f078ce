/** The `code` of a Node-style system error (`ENOENT`, `EEXIST`…), or undefined. */
export function errno(err: unknown): string | undefined {
  const code = (err as { code?: unknown } | null | undefined)?.code
  return typeof code === 'string' ? code : undefined
}
