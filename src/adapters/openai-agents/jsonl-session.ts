import type { AgentInputItem, FunctionCallItem, Session } from '@openai/agents'
import PQueue from 'p-queue'
import { isPlainJson, plainJsonCopy, plainJsonProblem } from '../../session/json-check.js'
import { describeZodError, type JsonValue, type SessionEvent } from '../../session/schema.js'
import { safeParseConfig } from '../../session/read-config.js'
import { isSessionPersistenceError, SessionPersistenceError } from '../../errors.js'
import type { SessionPersistence } from '../../persistence.js'
import { decodeItems, decodeSession, keptItems } from './decode-events.js'
import {
  closeTurn,
  encodeItems,
  type EventDraft,
  openTurn,
  restartReplay,
  type TurnEndKind,
  type TurnState,
} from './encode-items.js'
import { classifyItem, itemKey } from './item-kind.js'
import { needsTurn } from './place-again.js'
import { compactionDraft, completeTornPop, POP_FIELD, popFollowers } from './torn-pop.js'
import { lastTurnOf } from '../../session/last-turn.js'
import { RecordedItems } from './recorded-items.js'
import {
  type CompactOptions,
  CompactOptionsSchema,
  type JsonlSessionOptions,
  OptionsSchema,
  RECORDER,
  type ToolCallRecorder,
} from './session-options.js'

export { type CompactOptions, type JsonlSessionOptions, RECORDER, type ToolCallRecorder } from './session-options.js'

/**
 * The Agents SDK's `Session` over a `SessionPersistence`: created on first use, or resumed (a
 * crashed run's log is repaired as it loads). Items are stored as the session vocabulary plus the
 * item verbatim; `popItem` and `clearSession` append `history/rewind` and rewrite nothing;
 * `compact` appends `history/compact`, and `getItems` then starts with its summary. It resumes
 * from the last compaction (docs/contract.md §15.1): only the log's tail is read.
 * One instance is the session's only writer: the backend refuses a second one (`E_LOCKED`).
 */
export class JsonlSession implements Session {
  readonly #persistence: SessionPersistence
  readonly #id: string
  readonly #cwd: string | undefined
  readonly #now: () => number
  readonly #queue = new PQueue({ concurrency: 1 })
  /** How many events the log holds: the seq of the next one. */
  #count = 0
  /**
   * Where reads start: the first seq of the load (a load from the last compaction starts at its
   * `firstKeptSeq` or earlier), moved by `compact`. Invariant: nothing before it shows in the
   * items, because the compaction in force keeps nothing before it, or a rewind dropped it all.
   */
  #base = 0
  /**
   * The events `load` returned when the session was opened, until an item read uses them. The
   * session keeps no history in memory: later reads ask the backend again (`inspect`), so the
   * items handed out are always fresh objects the caller owns, without a copy.
   */
  #loaded: readonly SessionEvent[] | undefined
  #open = false
  #learnt = false
  #lastTurn = 0
  /** The turn `trackToolCalls` opened for a run that has not handed its items over yet. */
  #turn: TurnState | undefined
  /** The run (its RunContext) that opened `#turn`, when `trackToolCalls` saw it. */
  #turnRun: unknown
  /** The run whose `agent_start` came last: the one the next `addItems` comes from. */
  #latestRun: unknown
  #recorded = new RecordedItems()
  #staged: AgentInputItem[] | undefined
  #inFlight = 0

  constructor(options: JsonlSessionOptions) {
    const parsed = safeParseConfig(OptionsSchema, options, 'the JsonlSession options')
    if (!parsed.success) {
      throw new SessionPersistenceError('E_CONFIG', `invalid JsonlSession options: ${describeZodError(parsed.error)}`, { cause: parsed.error })
    }
    this.#persistence = parsed.data.persistence
    this.#id = parsed.data.sessionId
    this.#cwd = parsed.data.cwd
    this.#now = parsed.data.now ?? Date.now
  }

  /** Opens (creates or resumes) the session and returns its id. */
  async getSessionId(): Promise<string> {
    await this.#queue.add(() => this.#ensureOpen())
    return this.#id
  }

  /**
   * The items added, deep-equal, in order; with `limit`, the most recent `limit` of them. With a
   * compaction in force (`compact`), the summary item first, then the items it kept and those
   * added since (a `function_call_result` whose call is not among them is left out).
   */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    if (limit !== undefined && !Number.isInteger(limit)) {
      throw new SessionPersistenceError('E_CONFIG', `getItems: limit must be an integer, got ${String(limit)}`, { sessionId: this.#id })
    }
    return (await this.#queue.add(async () => {
      await this.#ensureOpen()
      if (limit !== undefined && limit <= 0) return []
      const items = decodeItems(await this.#read())
      return limit === undefined ? items : items.slice(-limit)
    })) as AgentInputItem[]
  }

  /** Appends items durably: resolves when they are on disk (or committed in the database). */
  async addItems(items: AgentInputItem[]): Promise<void> {
    if (!Array.isArray(items) || items.some((item) => classifyItem(item) === undefined)) {
      throw new SessionPersistenceError('E_INVALID_EVENT', 'addItems: expects an array of item objects', { sessionId: this.#id })
    }
    if (items.length === 0) return
    // Checked before the clone, which would throw a DataCloneError on a function or a Symbol.
    const problem = isPlainJson(items) ? undefined : plainJsonProblem(items, 'items')
    if (problem) throw new SessionPersistenceError('E_NOT_JSON', `addItems: ${problem}`, { sessionId: this.#id })
    // Captured now: changing the items after the call must not change what is written.
    const batch = items.map((item, i) => {
      const copy = plainJsonCopy(item)
      if (copy === undefined) throw new SessionPersistenceError('E_NOT_JSON', `addItems: items[${i}] is nested too deeply to write`, { sessionId: this.#id })
      return copy
    })
    await this.#queue.add(async () => {
      await this.#ensureWritable()
      await this.#endLeftoverTurn(this.#latestRun)
      const drafts: EventDraft[] = []
      let state = this.#turn ? restartReplay(this.#turn) : undefined
      if (!state) {
        const opened = openTurn(this.#lastTurn + 1)
        drafts.push(opened.draft)
        state = opened.state
      }
      // Without a tracked turn, nothing this batch repeats was recorded in its turn.
      if (!this.#turn) this.#recorded.clearTurn()
      const placeOnly = this.#recorded.matcher(state.turn)
      const encoded = encodeItems(batch, state, { placeOnly })
      drafts.push(...encoded.drafts, ...closeTurn(encoded.state, 'completed'))
      await this.#write(drafts)
      this.#lastTurn = state.turn
      this.#turn = undefined
      this.#turnRun = undefined
      this.#staged = undefined
    })
  }

  /**
   * Removes the most recent item by appending `history/rewind`; returns it. The rewind starts at
   * the earliest event behind the item (for an item a tracked run's `addItems` only placed, the
   * call, result or input `trackToolCalls` wrote before it), so the history view (§7) loses it
   * too. The items placed since that event are placed again after the rewind, in the same
   * append: each one whose vocabulary event lies before the rewind by an ignorable event pointing
   * at it (ITEM_FROM_FIELD), any other written again, in a turn of its own (`E_SESSION_LIVE`,
   * nothing written, while a tracked run has not handed its items over then). A rewind drops a range
   * of seqs, so popping an item kept by the compaction in force (placed before it) would undo the
   * compaction too: the compaction is then recorded again, last. Popping the summary itself (the
   * only item left) empties the history, as `clearSession`.
   */
  async popItem(): Promise<AgentInputItem | undefined> {
    return (await this.#queue.add(async () => {
      await this.#ensureOpen()
      const { placed, compaction } = decodeSession(await this.#read())
      const last = placed.at(-1)
      if (!last) return undefined
      if (last.compaction) {
        await this.#write([{ type: 'history/rewind', data: { to: 0 } }])
        return last.item
      }
      const to = last.from
      const again = placed.filter((p) => !p.compaction && p !== last && p.seq >= to)
      const undoesCompaction = compaction !== undefined && to < compaction.seq
      if (again.length === 0 && !undoesCompaction) {
        await this.#write([{ type: 'history/rewind', data: { to } }])
        return last.item
      }
      await this.#ensureWritable() // the last turn number, which a turn and the compaction record
      if (needsTurn(again, to)) {
        // Items written again go in a turn of their own: as for `compact`, not inside a tracked run's.
        await this.#endLeftoverTurn(this.#latestRun)
        if (this.#turn) {
          throw new SessionPersistenceError('E_SESSION_LIVE', `popItem: a tracked run of session ${this.#id} has not handed its items over`, {
            sessionId: this.#id,
          })
        }
      }
      // The rewind says how many events follow it in this append (a crash may tear those off on
      // JSONL: the next open completes the pop, `completeTornPop`), each of them names it.
      const restored = popFollowers(placed, compaction, last, this.#count, this.#lastTurn)
      const rewind: EventDraft = { type: 'history/rewind', data: { to }, [POP_FIELD]: { follows: restored.drafts.length, turn: this.#lastTurn } }
      await this.#write([rewind, ...restored.drafts])
      if (restored.turn !== undefined) this.#lastTurn = restored.turn
      return last.item
    })) as AgentInputItem | undefined
  }

  /** Empties the history by appending `history/rewind` to 0; earlier lines stay as they are. */
  async clearSession(): Promise<void> {
    await this.#queue.add(async () => {
      await this.#ensureOpen()
      if (decodeSession(await this.#read()).placed.length === 0) return
      await this.#write([{ type: 'history/rewind', data: { to: 0 } }])
    })
  }

  /**
   * Records that the host compacted the conversation: appends `history/compact` and resolves
   * when it is durable. `getItems()` then returns the summary item (a user message with
   * `input_text` content) followed by the `keepItems` most recent items (default 0) that
   * followed the previous summary; a kept `function_call_result` whose `function_call` is not kept
   * is left out. A resume reads the log only from the first kept item on. `E_SESSION_LIVE` while
   * a tracked run has recorded calls it has not handed over (`addItems`) yet; `E_INVALID_EVENT`
   * for a summary that is neither a string nor an array of blocks with a string `type`, or a
   * `keepItems` that is not a non-negative integer; `E_NOT_JSON` for a summary that is not plain
   * JSON. Nothing is written then.
   */
  async compact(options: CompactOptions): Promise<void> {
    const parsed = CompactOptionsSchema.safeParse(options)
    if (!parsed.success) {
      throw new SessionPersistenceError('E_INVALID_EVENT', `compact: ${describeZodError(parsed.error)}`, {
        sessionId: this.#id,
        cause: parsed.error,
      })
    }
    const problem = plainJsonProblem(options.summary, 'summary')
    if (problem) throw new SessionPersistenceError('E_NOT_JSON', `compact: ${problem}`, { sessionId: this.#id })
    const summary = plainJsonCopy(options.summary as JsonValue)
    if (summary === undefined) throw new SessionPersistenceError('E_NOT_JSON', 'compact: summary is nested too deeply to write', { sessionId: this.#id })
    const keepItems = parsed.data.keepItems ?? 0
    await this.#queue.add(async () => {
      await this.#ensureWritable()
      await this.#endLeftoverTurn(this.#latestRun)
      if (this.#turn) {
        throw new SessionPersistenceError('E_SESSION_LIVE', `compact: a tracked run of session ${this.#id} has not handed its items over`, {
          sessionId: this.#id,
        })
      }
      const kept = keptItems(decodeSession(await this.#read()).placed, keepItems)
      // The items start at the event that placed the first one kept; the history view at the
      // earliest event behind one (a tracked call, its result, the run's input: written before
      // the run's addItems placed them). With nothing kept, both at the compaction itself. A
      // result left out (its call is not kept) does not count: its event would bring back calls
      // of its run recorded after it that are not kept.
      const itemsFrom = kept[0]?.seq ?? this.#count
      const firstKeptSeq = kept.reduce((min, p) => Math.min(min, p.from), itemsFrom)
      await this.#write([this.#compaction(summary, firstKeptSeq, itemsFrom)])
      this.#base = Math.max(this.#base, firstKeptSeq)
    })
  }

  /**
   * A `history/compact` draft (after `#ensureWritable`): with the last turn number
   * (LAST_TURN_FIELD), which a resume from its tail continues without reading before it, and
   * `itemsFrom` (FIRST_ITEM_FIELD) only where the items start later than the history view.
   */
  #compaction(summary: JsonValue, firstKeptSeq: number, itemsFrom: number | undefined): EventDraft {
    return compactionDraft(summary, firstKeptSeq, itemsFrom, this.#lastTurn)
  }

  /**
   * Releases the session in the backend (its writer lock). A turn a failed run left open is
   * ended as `aborted` first. The next call opens the session again.
   */
  async close(): Promise<void> {
    await this.#queue.add(async () => {
      if (!this.#open) return
      if (this.#turn && this.#inFlight === 0) await this.#endTurn('aborted')
      this.#open = false
      await this.#persistence.close(this.#id)
    })
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close()
  }

  /** @internal */
  get [RECORDER](): ToolCallRecorder {
    return {
      stageInput: (turnInput, run) => {
        if (run !== undefined) this.#latestRun = run
        // A turn left open by another run is ended before this run writes: its input is staged.
        if ((!this.#turn || this.#isOtherRun(run)) && Array.isArray(turnInput)) this.#staged = turnInput.filter((item) => isPlainJson(item))
      },
      recordCall: async (call, run) => {
        this.#inFlight++
        await this.#queue.add(() => this.#recordCall(call, run ?? this.#latestRun))
      },
      recordResult: async (call, output, run) => {
        await this.#queue.add(() => this.#recordResult(call, output, run))
      },
      settled: () => {
        this.#inFlight--
      },
    }
  }

  /** True when `run` is known and is not the run that opened `#turn`. */
  #isOtherRun(run: unknown): boolean {
    return run !== undefined && this.#turnRun !== undefined && run !== this.#turnRun
  }

  /**
   * A run that failed (the model or a tool threw) never hands its items over: its turn stays
   * open. When another run writes, that turn is ended first, as `close` ends it (`aborted`), so
   * the new run's input and calls go into a turn of their own, in the order the runs ran.
   */
  async #endLeftoverTurn(run: unknown): Promise<void> {
    if (this.#turn && this.#isOtherRun(run)) await this.#endTurn('aborted')
  }

  async #recordCall(call: FunctionCallItem, run: unknown): Promise<void> {
    await this.#ensureWritable()
    await this.#endLeftoverTurn(run)
    const drafts: EventDraft[] = []
    const items: AgentInputItem[] = []
    let state = this.#turn
    let input: AgentInputItem[] = []
    if (!state) {
      const opened = openTurn(this.#lastTurn + 1)
      drafts.push(opened.draft)
      state = opened.state
      input = await this.#newInput()
      items.push(...input)
    }
    // The SDK stores calls without their transient `id`; so does the record made ahead of it.
    // A call still open is on record already: the call an approval interrupted, which the
    // resumed run now invokes (same id, tool and arguments). A call id whose earlier call was
    // answered, or that only an open call of another tool or arguments has, is a new call.
    const { id: _id, ...stored } = call
    const onRecord = this.#recorded.isOpenCall(call)
    if (!onRecord) items.push(stored)
    const encoded = encodeItems(items, state, { provisional: true })
    await this.#write([...drafts, ...encoded.drafts])
    if (!this.#turn) {
      // The run whose tool opened the turn is the one whose `addItems` ends it (a run resumed
      // from a serialized state brings a RunContext no `agent_start` announced).
      this.#turnRun = run
      if (run !== undefined) this.#latestRun = run
    }
    this.#turn = encoded.state
    this.#lastTurn = encoded.state.turn
    this.#recorded.addInputs(input)
    this.#recorded.addTurnCall(call.callId)
  }

  async #recordResult(call: FunctionCallItem, output: unknown, run: unknown): Promise<void> {
    // A tool of a run whose turn was ended (another run started) answers nothing now.
    // Only an open call is answered (once): its result is then on record.
    if (!this.#turn || this.#isOtherRun(run) || !this.#recorded.isOpen(call.callId)) return
    let text: string
    try {
      text = typeof output === 'string' ? output : (JSON.stringify(output) ?? String(output))
    } catch {
      text = String(output)
    }
    const result: AgentInputItem = {
      type: 'function_call_result',
      name: call.name,
      callId: call.callId,
      status: 'completed',
      output: { type: 'text', text },
    }
    const encoded = encodeItems([result], this.#turn, { provisional: true })
    await this.#write(encoded.drafts)
    this.#turn = encoded.state
    this.#recorded.addTurnResult(call.callId)
  }

  /**
   * The run's new input: what its first turn input holds beyond the session's items. The SDK
   * leaves out of that input a call without a result (a failed run's), and a result without its
   * call: such items of the session may be missing from it.
   */
  async #newInput(): Promise<AgentInputItem[]> {
    const staged = this.#staged
    this.#staged = undefined
    if (!staged) return []
    const current = decodeItems(await this.#read())
    let i = 0
    for (const item of current) {
      if (i < staged.length && itemKey(item) === itemKey(staged[i])) i++
      else {
        const kind = classifyItem(item)?.kind
        if (kind !== 'call' && kind !== 'result') return []
      }
    }
    return staged.slice(i)
  }

  async #endTurn(kind: TurnEndKind): Promise<void> {
    if (!this.#turn) return
    await this.#write(closeTurn(this.#turn, kind))
    this.#turn = undefined
    this.#turnRun = undefined
  }

  /** Opens the session and learns what writes need: the calls still open, the last turn. */
  async #ensureWritable(): Promise<void> {
    await this.#ensureOpen()
    if (this.#learnt) return
    const events = this.#loaded ?? (await this.#read())
    this.#recorded = new RecordedItems()
    this.#recorded.scan(events)
    this.#lastTurn = await lastTurnOf(this.#persistence, this.#id, events, this.#base)
    this.#learnt = true
  }

  async #ensureOpen(): Promise<void> {
    if (this.#open) return
    let events: readonly SessionEvent[]
    let firstSeq = 0
    try {
      // From the last compaction (§15.1): with one in force, only the log's tail is read, and it
      // holds every item the session shows.
      const loaded = await this.#persistence.load(this.#id, { from: 'last-compaction' })
      events = loaded.events
      firstSeq = loaded.firstSeq
    } catch (err) {
      if (!isSessionPersistenceError(err, 'E_NOT_FOUND')) throw err
      const meta = { id: this.#id, createdAt: this.#now(), delegationDepth: 0, ...(this.#cwd === undefined ? {} : { cwd: this.#cwd }) }
      await this.#persistence.create(meta)
      events = []
    }
    this.#loaded = events
    this.#base = firstSeq
    this.#count = firstSeq + events.length
    // What writes need from the log is learnt when the first write comes: a session opened to
    // be read costs its load and nothing more.
    this.#learnt = false
    this.#turn = undefined
    this.#turnRun = undefined
    this.#open = true
    // A pop whose append a crash tore (JSONL) is completed before anything reads or writes.
    const completion = completeTornPop(events, firstSeq, this.#count)
    if (completion) {
      try {
        await this.#write(completion)
      } catch (err) {
        // Not open then: the next call loads the session again and completes the pop then.
        this.#open = false
        await this.#persistence.close(this.#id).catch(() => undefined)
        throw err
      }
    }
  }

  async #write(drafts: readonly EventDraft[]): Promise<void> {
    if (drafts.length === 0) return
    const time = this.#now()
    const base = this.#count
    const events = drafts.map((d, i) => ({ seq: base + i, type: d.type, time, ...d }) as SessionEvent)
    await this.#persistence.append(this.#id, events)
    this.#count += events.length
    this.#loaded = undefined
    for (const e of events) this.#recorded.note(e)
  }

  /** The log's events, for reading items; what is handed out of them is the caller's. */
  async #read(): Promise<readonly SessionEvent[]> {
    const loaded = this.#loaded
    this.#loaded = undefined
    if (loaded) return loaded
    // A created session holds nothing until its first append (the backend does not know it yet).
    if (this.#count === 0) return []
    // Only what is written counts (a range read adds no closers for a run in progress).
    return (await this.#persistence.read(this.#id, { fromSeq: this.#base, toSeq: this.#count })).events
  }
}
