import type { SessionLocation } from '../persistence.js'

/** The file path of a JSONL location; throws (a programming error) for any other kind. */
export function jsonlPath(location: SessionLocation): string {
  if (location.kind !== 'jsonl') throw new TypeError(`expected a JSONL location, got '${location.kind}'`)
  return location.path
}

/** One line naming where a session lives: its file path, or `postgres:<schema>/<id>`. */
export function describeLocation(location: SessionLocation): string {
  return location.kind === 'jsonl' ? location.path : `postgres:${location.schema}/${location.id}`
}
