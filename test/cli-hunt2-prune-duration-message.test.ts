import { describe, expect, test } from 'vitest'
import { runCli } from './helpers/run-cli.js'
import { tmpRoot } from './helpers/tmp-root.js'

// docs/cli.md (prune) and the usage error said a duration is "a positive number and a unit",
// yet a fraction (1.5h) is refused: the rule is whole numbers, units adding up, more than zero.

describe('prune --older-than: the usage error says what a duration is', () => {
  test('a fraction, a zero and a word: exit 2, the message says whole numbers', async () => {
    const root = await tmpRoot()
    for (const given of ['1.5h', '0d', 'soon']) {
      const r = await runCli(['--root', root, 'prune', '--older-than', given])
      expect(r.code).toBe(2)
      expect(r.stdout).toBe('')
      expect(r.stderr).toMatch(
        new RegExp(`^session-jsonl: --older-than '${given.replace('.', '\\.')}' is not a duration: a positive whole number and a unit s, m, h, d or w \\(e\\.g\\. 30d, 12h, 90m\\), units adding up \\(1d12h\\); no fractions: 90m, not 1\\.5h \\(see session-jsonl --help\\)\\n$`),
      )
    }
    expect((await runCli(['--root', root, 'prune', '--older-than', '1d0h', '--dry-run'])).code).toBe(0)
    const help = await runCli(['prune', '--help'])
    expect(help.stdout).toMatch(/<duration>: a positive whole number and a unit, s, m, h, d or w/)
  }, 60_000)
})
