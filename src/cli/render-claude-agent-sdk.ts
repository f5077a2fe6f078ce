import type { SessionEvent } from '../index.js'

/**
 * How `show` and `export --format md` print an event that the claude-agent-sdk adapter writes and the 2.1
 * vocabulary does not cover: a line of text and a Markdown paragraph, or undefined for any other
 * event (the generic rendering then applies). Pure: it never imports the framework.
 */
export function renderClaudeAgentSdkEvent(_event: SessionEvent): { text: string; markdown: string } | undefined {
  return undefined
}
