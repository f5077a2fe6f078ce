/**
 * `paths` as a seam's `peekFiles` was given them (a list, or chunks while a listing reads its
 * buckets), with `onPaths` told of each list or chunk as it passes: a test's wrapper around the
 * Node seam's `peekFiles` counts them this way without changing what the seam sees.
 */
export function tapPaths(
  paths: readonly string[] | AsyncIterable<readonly string[]>,
  onPaths: (chunk: readonly string[], inChunks: boolean) => void,
): readonly string[] | AsyncIterable<readonly string[]> {
  if (Array.isArray(paths)) {
    onPaths(paths, false)
    return paths
  }
  const chunks = paths as AsyncIterable<readonly string[]>
  return (async function* () {
    for await (const chunk of chunks) {
      onPaths(chunk, true)
      yield chunk
    }
  })()
}
