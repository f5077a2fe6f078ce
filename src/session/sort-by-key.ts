/**
 * `items` sorted by `key` descending, then by `tie`: the order of `items.sort((a, b) => key(b) -
 * key(a) || tie(a, b))`, as a new array. The comparisons run on a typed array of the keys: a listing of
 * 100,000 logs spent 60–90 ms in the comparator of a plain sort (three property loads a call,
 * 1.7 million calls), about 30 ms this way.
 */
export function sortByKeyDescending<T>(items: readonly T[], key: (item: T) => number, tie: (a: T, b: T) => number): T[] {
  const n = items.length
  const keys = new Float64Array(n)
  const order = new Uint32Array(n)
  for (let i = 0; i < n; i++) {
    keys[i] = key(items[i]!)
    order[i] = i
  }
  order.sort((i, j) => keys[j]! - keys[i]! || tie(items[i]!, items[j]!))
  const sorted = new Array<T>(n)
  for (let i = 0; i < n; i++) sorted[i] = items[order[i]!]!
  return sorted
}
