import { describe, expect, test } from 'vitest'
import { type OutputStream, terminalIo } from '../src/cli/terminal-io.js'

/** A stream that records writes, in one log shared with its sibling so the order shows. */
function streams(tty: { out: boolean; err: boolean }) {
  const log: string[] = []
  const make = (name: string, isTTY: boolean): OutputStream => ({ isTTY, write: (s: string) => log.push(`${name}:${s}`) })
  return { log, stdout: make('out', tty.out), stderr: make('err', tty.err) }
}

describe('the CLI on a terminal', () => {
  test('progress is drawn on stderr only when stderr is a terminal', () => {
    const piped = streams({ out: true, err: false })
    expect(terminalIo(piped.stdout, piped.stderr, {}).progress).toBeUndefined()
    const tty = streams({ out: false, err: true })
    const io = terminalIo(tty.stdout, tty.stderr, {})
    io.progress!('copy', 1, 4)
    expect(tty.log).toEqual(['err:\rcopy [########......................] 1/4'])
  })

  test('a drawn progress line is wiped before other output and when the work is done', () => {
    const { log, stdout, stderr } = streams({ out: true, err: true })
    const io = terminalIo(stdout, stderr, {})
    io.progress!('copy', 1, 2)
    io.out('copied a\n')
    io.out('next\n') // nothing drawn any more: nothing to wipe
    io.progress!('copy', 2, 2)
    io.err('done\n')
    expect(log).toEqual(['err:\rcopy [###############...............] 1/2', 'err:\r\u001b[K', 'out:copied a\n', 'out:next\n', 'err:done\n'])
  })

  test('large totals redraw about a hundred times, not once per item', () => {
    const { log, stdout, stderr } = streams({ out: false, err: true })
    const io = terminalIo(stdout, stderr, {})
    for (let i = 1; i <= 10_000; i++) io.progress!('prune', i, 10_000)
    expect(log.filter((l) => l.startsWith('err:\rprune'))).toHaveLength(99)
    expect(log.at(-1)).toBe('err:\r\u001b[K')
  })

  test('colours only when stdout is a terminal and NO_COLOR is unset', () => {
    const s = streams({ out: true, err: true })
    expect(terminalIo(s.stdout, s.stderr, {}).style.red('x')).toBe('\u001b[31mx\u001b[39m')
    expect(terminalIo(s.stdout, s.stderr, { NO_COLOR: '' }).style.red('x')).toBe('x')
    const piped = streams({ out: false, err: true })
    expect(terminalIo(piped.stdout, piped.stderr, {}).style.red('x')).toBe('x')
  })
})
