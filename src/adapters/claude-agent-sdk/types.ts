/**
 * The Claude Agent SDK's `SessionStore` types, written here structurally (the SDK is an optional
 * peer: nothing in this package imports it, not even its types). They match
 * `@anthropic-ai/claude-agent-sdk` 0.3.x, where the interface is marked `@alpha`.
 */

/** A transcript of the SDK: a main one (no `subpath`) or a subagent's (`subagents/agent-<id>`). */
export interface SessionKey {
  /** Caller-defined scope; by default the SDK's sanitized cwd (e.g. `-home-me-project`). */
  projectKey: string
  sessionId: string
  /** Undefined for the main transcript; never empty. */
  subpath?: string
}

/** One line of the SDK's local JSONL transcript: a JSON object with a string `type`, often a `uuid`. */
export interface SessionStoreEntry {
  type: string
  uuid?: string
  timestamp?: string
  [k: string]: unknown
}

/** What the SDK calls (its `SessionStore`, minus `listSessionSummaries`, which is optional). */
export interface SdkSessionStore {
  append(key: SessionKey, entries: SessionStoreEntry[]): Promise<void>
  load(key: SessionKey): Promise<SessionStoreEntry[] | null>
  listSessions(projectKey: string): Promise<Array<{ sessionId: string; mtime: number }>>
  delete(key: SessionKey): Promise<void>
  listSubkeys(key: { projectKey: string; sessionId: string }): Promise<string[]>
}
