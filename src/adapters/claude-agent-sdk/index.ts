/**
 * `session-persistence-jsonl/claude-agent-sdk`: a `SessionStore` for the Claude Agent SDK
 * (`@anthropic-ai/claude-agent-sdk`, an optional peer dependency) over any `SessionPersistence`.
 * Nothing here imports the SDK, not even its types: they are written structurally in `types.ts`.
 */
export { type ClaudeSessionStore, createSessionStore } from './session-store.js'
export { DEFAULT_IDLE_CLOSE_MS, type SessionStoreOptions } from './store-options.js'
export { ENTRY_EVENT, ENTRY_FIELD, entryEvent, entryOf, type EntryView, viewOf } from './entry-events.js'
export { KEY_FIELD, sessionIdOf, type StoredKey, storedKeyOf } from './session-key.js'
export type { SdkSessionStore, SessionKey, SessionStoreEntry } from './types.js'
