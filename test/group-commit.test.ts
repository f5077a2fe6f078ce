// The PostgreSQL backend's group commit, against a scripted database: which batches share a
// statement, what each caller learns when the statement fails, and the newline guard that keeps
// lines on their own seqs. (The real server runs it in test/postgres-group-commit.test.ts.)
import { describe, expect, test } from 'vitest'
import type { Batch } from '../src/postgres/append-batch.js'
import type { Db } from '../src/postgres/db.js'
import { GroupCommit } from '../src/postgres/group-commit.js'

interface Call {
  ids: string[]
  epochs: string[]
  /** The per-batch and per-line integer arrays, as the server would read their literals. */
  firsts: number[]
  counts: number[]
  sizes: number[]
  lineBatch: number[]
  seqs: number[]
  text: string
  /** Each line's kind (event-kinds.ts; 7 when the batch gave none). */
  kinds: number[]
  release(result: { claimed?: number[]; error?: unknown }): void
}

/** An integer array literal (`{1,2}`), read strictly: anything else fails the test. */
function ints(literal: unknown): number[] {
  expect(literal).toMatch(/^\{(-?\d+(,-?\d+)*)?\}$/)
  const inner = (literal as string).slice(1, -1)
  return inner === '' ? [] : inner.split(',').map(Number)
}

/** A Db whose append statements wait until the test answers them (`throwNext`: the next query throws at once). */
function scriptedDb() {
  const calls: Call[] = []
  let arrived: (() => void) | undefined
  const script = { throwNext: undefined as unknown }
  const db = {
    query(_text: string, values: unknown[]) {
      if (script.throwNext !== undefined) {
        const err = script.throwNext
        script.throwNext = undefined
        throw err
      }
      return new Promise((resolve, reject) => {
        const ids = values[0] as string[]
        calls.push({
          ids,
          epochs: values[1] as string[],
          firsts: ints(values[2]),
          counts: ints(values[3]),
          sizes: ints(values[4]),
          // Each line's batch number, its kind in the low three bits (7: unknown).
          lineBatch: ints(values[5]).map((v) => v >> 3),
          kinds: ints(values[5]).map((v) => v & 7),
          seqs: ints(values[6]),
          text: values[7] as string,
          release: ({ claimed, error }) => {
            if (error !== undefined) reject(error)
            else resolve({ rows: (claimed ?? ids.map((_, i) => i + 1)).map((bi) => ({ bi })) })
          },
        })
        arrived?.()
      })
    },
  } as unknown as Db
  const nextCall = async (n: number): Promise<Call> => {
    while (calls.length < n) await new Promise<void>((r) => (arrived = r))
    return calls[n - 1]!
  }
  return { db, calls, nextCall, script }
}

const batch = (sessionId: string, firstSeq: number, lines = ['{"a":1}', '{"b":2}']): Batch => ({
  sessionId,
  epoch: '7',
  firstSeq,
  count: lines.length,
  text: lines.join('\n'),
  bytes: lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0),
})
const settle = (p: Promise<boolean>) => p.then((v) => ({ ok: v }), (e: { code?: string }) => ({ error: e.code ?? String(e) }))

describe('GroupCommit', () => {
  test('a lone batch goes at once; batches arriving while the slots are busy share the next statement', async () => {
    const { db, calls, nextCall } = scriptedDb()
    const group = new GroupCommit(db, 's', 1)
    const first = group.submit(batch('a', 0))
    const c1 = await nextCall(1)
    expect(c1.ids).toEqual(['a'])
    const second = group.submit(batch('b', 4))
    const third = group.submit(batch('c', 0, ['{"c":3}']))
    expect(calls).toHaveLength(1) // the one slot is busy: b and c wait
    c1.release({})
    const c2 = await nextCall(2)
    expect(c2.ids).toEqual(['b', 'c'])
    // Lines travel as one text, each at its own seq.
    expect(c2.text.split('\n')).toEqual(['{"a":1}', '{"b":2}', '{"c":3}'])
    expect(c2.seqs).toEqual([4, 5, 0])
    expect(c2.lineBatch).toEqual([1, 1, 2])
    expect([c2.epochs, c2.firsts, c2.counts, c2.sizes]).toEqual([['7', '7'], [4, 0], [2, 1], [16, 8]])
    c2.release({ claimed: [2] }) // c claimed, b not (another writer's token)
    expect(await first).toBe(true)
    expect(await second).toBe(false)
    expect(await third).toBe(true)
  })

  test('after a shared statement, the batches its sessions append next join the waiting ones', async () => {
    const { db, calls, nextCall } = scriptedDb()
    const group = new GroupCommit(db, 's', 1)
    const a = group.submit(batch('a', 0))
    const c1 = await nextCall(1)
    const b = group.submit(batch('b', 0))
    const c = group.submit(batch('c', 0))
    c1.release({})
    await a
    const c2 = await nextCall(2)
    expect(c2.ids).toEqual(['b', 'c'])
    const d = group.submit(batch('d', 0)) // another session's batch waits for the slot
    // As a session does: its next batch as soon as the last one is acknowledged, a few promise
    // hops later (its queue, the backend's layers), all within the same turn of the event loop.
    const bNext = b.then(() => later(() => group.submit(batch('b', 2))))
    const cNext = c.then(() => later(() => group.submit(batch('c', 2))))
    c2.release({})
    const c3 = await nextCall(3)
    expect(c3.ids).toEqual(['d', 'b', 'c']) // one statement, not 'd' alone and then the others
    c3.release({})
    expect(await Promise.all([d, bNext, cNext])).toEqual([true, true, true])
    expect(calls).toHaveLength(3)
  })

  /** Two slots, each running a statement of four sessions: calls 3 (a–d) and 4 (e–h). */
  async function twoCohorts() {
    const { db, calls, nextCall } = scriptedDb()
    const group = new GroupCommit(db, 's', 2)
    const lone = [group.submit(batch('x', 0)), group.submit(batch('y', 0))]
    const [x, y] = [await nextCall(1), await nextCall(2)]
    const first = ['a', 'b', 'c', 'd'].map((id) => group.submit(batch(id, 0)))
    x.release({})
    const c3 = await nextCall(3)
    for (const id of ['e', 'f', 'g', 'h']) void group.submit(batch(id, 0)) // never answered: the second slot stays busy
    y.release({})
    const c4 = await nextCall(4)
    expect([c3.ids, c4.ids]).toEqual([['a', 'b', 'c', 'd'], ['e', 'f', 'g', 'h']])
    expect(await Promise.all(lone)).toEqual([true, true])
    return { group, calls, nextCall, first, c3 }
  }
  const later = async <T>(fn: () => Promise<T>): Promise<T> => {
    for (let hop = 0; hop < 20; hop++) await null
    return fn()
  }

  test('with two slots, a cohort that is back goes again as soon as it is whole, not a turn later', async () => {
    const { group, calls, nextCall, first, c3 } = await twoCohorts()
    const next = first.map((p, i) => p.then(() => later(() => group.submit(batch('abcd'[i]!, 2)))))
    let turnEnded = false
    setImmediate(() => (turnEnded = true))
    c3.release({})
    const c5 = await nextCall(5)
    // Sent while the other cohort's statement still runs, within the turn that acknowledged it:
    // the server gets to work on it while the other cohort's sessions prepare their batches.
    expect(c5.ids).toEqual(['a', 'b', 'c', 'd'])
    expect(turnEnded).toBe(false)
    c5.release({})
    expect(await Promise.all(next)).toEqual([true, true, true, true])
    expect(calls).toHaveLength(5)
  })

  test('with two slots, a cohort of which some sessions fell silent goes at the end of the turn', async () => {
    const { group, nextCall, first, c3 } = await twoCohorts()
    const next = first.slice(0, 2).map((p, i) => p.then(() => later(() => group.submit(batch('ab'[i]!, 2)))))
    let turnEnded = false
    setImmediate(() => (turnEnded = true))
    c3.release({})
    const c5 = await nextCall(5)
    expect(c5.ids).toEqual(['a', 'b'])
    expect(turnEnded).toBe(true) // not a fair share (two of the eight in play): it waited the turn
    c5.release({})
    expect(await Promise.all(next)).toEqual([true, true])
  })

  /** 'a' alone in the one slot, then 'b' and 'c' grouped in the second statement (call 2, not answered yet). */
  async function groupedBehindFirst() {
    const { db, calls, nextCall } = scriptedDb()
    const group = new GroupCommit(db, 's', 1)
    const first = settle(group.submit(batch('a', 0)))
    const c1 = await nextCall(1)
    const rest = [settle(group.submit(batch('b', 0))), settle(group.submit(batch('c', 0)))]
    c1.release({})
    return { group, calls, first, rest, nextCall, second: await nextCall(2) }
  }

  /** The one slot is free again: the next batch is sent at once, the one after it waits. */
  async function expectSlotFree(group: GroupCommit, calls: Call[]) {
    await new Promise((r) => setImmediate(r)) // past a fill that may be due this turn
    const before = calls.length
    void group.submit(batch('next', 0))
    expect(calls).toHaveLength(before + 1)
    void group.submit(batch('after', 0))
    expect(calls).toHaveLength(before + 1)
  }

  test('a failed connection leaves every batch of the statement unknown: each caller gets the error', async () => {
    const { group, calls, first, rest, second } = await groupedBehindFirst()
    expect(second.ids).toEqual(['b', 'c'])
    second.release({ error: Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' }) })
    expect(await first).toEqual({ ok: true })
    expect(await Promise.all(rest)).toEqual([{ error: 'ECONNRESET' }, { error: 'ECONNRESET' }])
    await expectSlotFree(group, calls)
  })

  test('a statement that failed for one batch is retried batch by batch: the others are stored', async () => {
    const { group, calls, first, rest, nextCall, second } = await groupedBehindFirst()
    second.release({ error: Object.assign(new Error('deadlock detected'), { code: '40P01' }) })
    const b = await nextCall(3)
    expect(b.ids).toEqual(['b'])
    b.release({ error: Object.assign(new Error('value too long'), { code: '22001' }) })
    const c = await nextCall(4)
    expect(c.ids).toEqual(['c'])
    c.release({})
    expect(await first).toEqual({ ok: true })
    expect(await Promise.all(rest)).toEqual([{ error: '22001' }, { ok: true }])
    await expectSlotFree(group, calls)
  })

  test('a query that throws instead of rejecting fails its batches and frees the slot', async () => {
    const { db, calls, nextCall, script } = scriptedDb()
    const group = new GroupCommit(db, 's', 1)
    script.throwNext = new Error('boom')
    expect(await settle(group.submit(batch('lone', 0)))).toEqual({ error: 'Error: boom' })
    // A group of two: the statement throws, then each batch is sent alone.
    const a = settle(group.submit(batch('a', 0)))
    const c1 = await nextCall(1)
    const rest = [settle(group.submit(batch('b', 0))), settle(group.submit(batch('c', 0)))]
    script.throwNext = new Error('boom')
    c1.release({})
    const b = await nextCall(2)
    expect(b.ids).toEqual(['b'])
    b.release({})
    const c = await nextCall(3)
    expect(c.ids).toEqual(['c'])
    c.release({ claimed: [] })
    expect(await a).toEqual({ ok: true })
    expect(await Promise.all(rest)).toEqual([{ ok: true }, { ok: false }])
    await expectSlotFree(group, calls)
  })

  test('a line holding a raw newline, or an empty batch, is refused before anything is sent', async () => {
    const { db, calls } = scriptedDb()
    const group = new GroupCommit(db, 's', 2)
    expect(await settle(group.submit(batch('a', 0, ['{"a":1}\n{"forged":true}'])))).toEqual({ error: 'E_INVALID_EVENT' })
    expect(await settle(group.submit(batch('b', 0, [])))).toEqual({ error: 'E_INVALID_EVENT' })
    expect(calls).toHaveLength(0)
  })

  test('a group never holds more than 5,000 lines, unless one batch alone does', async () => {
    const { db, nextCall } = scriptedDb()
    const group = new GroupCommit(db, 's', 1)
    const lines = (n: number) => Array.from({ length: n }, (_, i) => `{"i":${i}}`)
    const pending = [group.submit(batch('a', 0))]
    const c1 = await nextCall(1)
    pending.push(group.submit(batch('big', 0, lines(6_000))))
    pending.push(group.submit(batch('b', 0, lines(3_000))))
    pending.push(group.submit(batch('c', 0, lines(2_000))))
    c1.release({})
    const c2 = await nextCall(2)
    expect(c2.ids).toEqual(['big'])
    c2.release({})
    const c3 = await nextCall(3)
    expect(c3.ids).toEqual(['b', 'c'])
    c3.release({})
    expect(await Promise.all(pending)).toEqual([true, true, true, true])
  })

  test('a group never holds more than 16 MiB of lines, unless one batch alone does; the kinds travel per line', async () => {
    const { db, nextCall } = scriptedDb()
    const group = new GroupCommit(db, 's', 1)
    const pending = [group.submit(batch('a', 0))]
    const c1 = await nextCall(1)
    const big = (id: string, mib: number): Batch => ({ ...batch(id, 0, ['{"x":1}']), bytes: mib * 1024 * 1024, kinds: [3] })
    pending.push(group.submit(big('huge', 40)))
    pending.push(group.submit(big('b', 9)))
    pending.push(group.submit(big('c', 9)))
    pending.push(group.submit(batch('d', 0)))
    c1.release({})
    const c2 = await nextCall(2)
    expect(c2.ids).toEqual(['huge'])
    c2.release({})
    const c3 = await nextCall(3)
    expect(c3.ids).toEqual(['b']) // b and c together would pass 16 MiB
    c3.release({})
    const c4 = await nextCall(4)
    expect(c4.ids).toEqual(['c', 'd'])
    expect(c4.kinds).toEqual([3, 7, 7]) // d's kinds unknown (7): stored NULL, the schema's trigger fills them in
    c4.release({})
    expect(await Promise.all(pending)).toEqual([true, true, true, true, true])
  })

  test('a group never holds more than 128 batches', async () => {
    const { db, nextCall } = scriptedDb()
    const group = new GroupCommit(db, 's', 1)
    const pending = [group.submit(batch('first', 0))]
    const c1 = await nextCall(1)
    for (let i = 0; i < 130; i++) pending.push(group.submit(batch(`s${i}`, 0)))
    c1.release({})
    const c2 = await nextCall(2)
    expect(c2.ids).toEqual(Array.from({ length: 128 }, (_, i) => `s${i}`))
    c2.release({})
    const c3 = await nextCall(3)
    expect(c3.ids).toEqual(['s128', 's129'])
    c3.release({})
    expect((await Promise.all(pending)).every((ok) => ok)).toBe(true)
    expect(pending).toHaveLength(131)
  })
})
