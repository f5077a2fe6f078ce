// Markdown blocks that stored text cannot break out of (CommonMark): the export's code fences,
// code spans and quoted messages. Whatever a message holds (a fence, a heading, a line that
// looks like `**User:**`) stays inside its block and cannot fake a turn or a message.

/** The longest run of backticks in `s`. */
function longestBackticks(s: string): number {
  let longest = 0
  for (const run of s.match(/`+/g) ?? []) longest = Math.max(longest, run.length)
  return longest
}

/** A fenced code block of `s`: one backtick more than its longest run of them (at least three), so nothing in it closes the fence. */
export function fence(s: string): string {
  const ticks = '`'.repeat(Math.max(3, longestBackticks(s) + 1))
  return [ticks, s, ticks].join('\n')
}

/** A code span of `s` (one line): one backtick more than its longest run, padded when it starts or ends with one. */
export function codeSpan(s: string): string {
  const ticks = '`'.repeat(longestBackticks(s) + 1)
  const pad = s.startsWith('`') || s.endsWith('`') ? ' ' : ''
  return `${ticks}${pad}${s}${pad}${ticks}`
}

/**
 * Text as a block quote: every line prefixed `> ` (an empty one `>`), so the text keeps its own
 * Markdown (lists, emphasis, code) but every block it starts stays inside the quote, which ends
 * only where the writer ends it.
 */
export function quote(s: string): string {
  return s
    .split('\n')
    .map((line) => (line === '' ? '>' : `> ${line}`))
    .join('\n')
}

/**
 * A message under its role: one line of text on the role's line (`**User:** text`, a paragraph
 * it cannot leave), more lines quoted below it.
 */
export function messageBlock(role: string, text: string): string {
  return text.includes('\n') ? `**${role}:**\n\n${quote(text)}` : `**${role}:** ${text}`
}
