import { appendFile, cp } from 'node:fs/promises'
import { expect, test } from 'vitest'
import { createJsonlPersistence } from '../src/index.js'
import { sealLine } from '../src/session/line-codec.js'
import { meta } from './helpers/events.js'
import { tmpRoot } from './helpers/tmp-root.js'

// §15.1 over logs whose lines another writer spelled: the backward search for the marker lines
// looks for them as JSON.stringify writes them; a load from the last compaction must still start
// where the events decide (here: the start of the open turn, before the compaction's
// firstKeptSeq), whatever the spelling. (The search is decided here: the compaction, a request
// header and the last turn all lie after the log's start; the load then checks that decision
// against the events it reads.)
const OPEN_TURN_START = {
  standard: '{"seq":3,"type":"turn/start","time":4,"data":{"turn":2}}',
  'keys in another order': '{"type":"turn/start","time":4,"seq":3,"data":{"turn":2}}',
  'spaces after the colons (json.dumps)': '{"seq": 3, "type": "turn/start", "time": 4, "data": {"turn": 2}}',
  'an escaped slash (PHP json_encode)': '{"seq":3,"type":"turn\\/start","time":4,"data":{"turn":2}}',
}

for (const version of [0, 1] as const) {
  for (const [spelling, openTurnStart] of Object.entries(OPEN_TURN_START)) {
    test(`format ${version}, the open turn's start with ${spelling}: a load from the last compaction starts at it`, async () => {
      const root = await tmpRoot()
      const p = createJsonlPersistence({ root, sync: 'none', formatVersion: version })
      await p.create(meta('s'))
      await p.append('s', [
        { seq: 0, type: 'turn/start', time: 1, data: { turn: 1 } },
        { seq: 1, type: 'user/message', time: 2, data: { content: 'q1' } },
        { seq: 2, type: 'turn/end', time: 3, data: { turn: 1, reason: { kind: 'completed' } } },
      ])
      await p.close('s')
      const lines = [
        openTurnStart,
        '{"seq":4,"type":"user/message","time":5,"data":{"content":"q2"}}',
        '{"seq":5,"type":"history/compact","time":6,"data":{"summary":"so far","firstKeptSeq":5}}',
        '{"seq":6,"type":"request/header","time":7,"data":{"header":{"model":"m"}}}',
      ]
      await appendFile(p.locate(meta('s')).path, lines.map((l) => `${sealLine(l, version)}\n`).join(''))

      // Each load repairs the open turn: the full one runs on a copy.
      const copy = await tmpRoot()
      await cp(root, copy, { recursive: true })
      const full = await createJsonlPersistence({ root: copy, sync: 'none' }).load('s')
      expect(full.events.slice(0, 7).map((e) => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6])
      expect(full.repair).toBeDefined()
      const tail = await createJsonlPersistence({ root, sync: 'none' }).load('s', { from: 'last-compaction' })
      // Never past the open turn's start: its user message is part of the history to resume.
      expect(tail.firstSeq).toBeLessThanOrEqual(3)
      expect(tail.events).toEqual(full.events.slice(tail.firstSeq))
      // The spellings the search reads start exactly there; one it misses is seen by the load's
      // check (the scan begins right after the turn/end that closed turn 1), and loaded whole.
      expect(tail.firstSeq).toBe(spelling.startsWith('an escaped') ? 0 : 3)
    })
  }
}

test('a compaction between turns that keeps from itself: the tail starts at it, nothing before it is read', async () => {
  const root = await tmpRoot()
  const p = createJsonlPersistence({ root, sync: 'none' })
  await p.create(meta('s'))
  const events: { seq: number; type: string; time: number; data: unknown }[] = []
  for (let turn = 1; turn <= 50; turn++) {
    const seq = events.length
    events.push({ seq, type: 'turn/start', time: seq, data: { turn } })
    events.push({ seq: seq + 1, type: 'user/message', time: seq, data: { content: 'q'.repeat(200) } })
    events.push({ seq: seq + 2, type: 'turn/end', time: seq, data: { turn, reason: { kind: 'completed' } } })
  }
  const c = events.length
  events.push({ seq: c, type: 'history/compact', time: c, data: { summary: 'so far', firstKeptSeq: c } })
  events.push({ seq: c + 1, type: 'request/header', time: c, data: { header: { model: 'm' } } })
  await p.append('s', events as never)
  await p.close('s')
  const tail = await createJsonlPersistence({ root, sync: 'none' }).load('s', { from: 'last-compaction' })
  expect(tail.firstSeq).toBe(c)
  expect(tail.events.map((e) => e.type)).toEqual(['history/compact', 'request/header'])
  expect(tail.repair).toBeUndefined()
})
