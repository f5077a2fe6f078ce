// Errors the CLI raises itself whose message already says what to do: printed without the
// code's generic hint (E_CONFIG's "check the root" would mislead after "no such root directory").
const SELF_EXPLAINED = new WeakSet<Error>()

/** Marks `err` as saying what to do itself; returns it. */
export function explained<E extends Error>(err: E): E {
  SELF_EXPLAINED.add(err)
  return err
}

export function isExplained(err: Error): boolean {
  return SELF_EXPLAINED.has(err)
}
