import { randomUUID } from 'node:crypto'
import { EventEmitter } from 'eventemitter3'
import type { JsonValue, SessionEvent, SessionMeta } from '../session/schema.js'
import type { LoadedSession } from '../persistence.js'
import type { AgentHost, HostSessionEvents, LiveSession } from '../plugin/host.js'
import { assertSeedLength, forkMeta } from '../session/fork-point.js'
import { highestTurn } from '../session/last-turn.js'

export interface ToolCallScript {
  name: string
  arguments?: JsonValue
  callId?: string
}

export interface StepScript {
  /** The assistant's text; streamed as `chunks` deltas before the complete message. */
  text?: string
  reasoning?: string
  /** How many `assistant/chunk` events stream the text (default 3; 0 for none). */
  chunks?: number
  toolCalls?: ToolCallScript[]
}

export interface TurnScript {
  user: string
  /** A `request/header` emitted at the start of the turn. */
  header?: JsonValue
  steps: (StepScript & { results?: (string | { text: string; isError?: boolean })[] })[]
  end?: 'completed' | 'aborted' | 'error' | 'max-tokens' | 'blocked'
}

/** One scripted session of the reference host. Every emitted event is frozen and in seq order. */
export interface ReferenceSession {
  readonly meta: SessionMeta
  /** The session's events from `firstSeq` on: `events[i].seq === firstSeq + i`. */
  readonly events: readonly SessionEvent[]
  /** The seq of `events[0]`: 0, or where a resume from the last compaction started. */
  readonly firstSeq: number
  /** The turn number of the open (or last) turn; 0 before the first. */
  readonly turn: number
  /** Emits one event with the next seq. */
  emit(type: string, data?: JsonValue, extra?: Record<string, JsonValue>): SessionEvent
  requestHeader(header: JsonValue, reason?: 'initial' | 'resume' | 'change'): void
  beginTurn(userText: string): void
  /** step/start, streamed chunks, the assistant message, then one tool/call per call. Returns the call ids. */
  step(script: StepScript): string[]
  toolResult(callId: string, text: string, isError?: boolean): void
  endStep(): void
  endTurn(kind?: 'completed' | 'aborted' | 'error' | 'max-tokens' | 'blocked'): void
  /** A whole turn: header, user message, every step with its results, turn end. */
  runTurn(script: TurnScript): void
  /** Asks the plugin for a drain (`session/flush`). */
  flush(): void
  dispose(): void
}

export interface ReferenceHost extends AgentHost {
  readonly sessionEvents: EventEmitter<HostSessionEvents>
  startSession(init?: { id?: string; cwd?: string; createdAt?: number; extra?: Record<string, JsonValue> }): ReferenceSession
  /**
   * Continues a stored session: its events become the live session's seed, from
   * `loaded.firstSeq` on (a load from the last compaction holds only the tail). Its turns and
   * call ids continue the stored ones; `lastTurn` (what `lastTurnOf` finds before a tail that
   * records no turn) is the number to continue from when the tail does not say.
   */
  resume(loaded: LoadedSession, options?: { lastTurn?: number }): ReferenceSession
  /** A new session seeded with the parent's first `seedLength` events. */
  fork(parent: ReferenceSession, options: { seedLength: number; id?: string }): ReferenceSession
  /** A delegated sub-session: `delegationDepth` one deeper, `parentSession` set, empty seed. */
  delegate(parent: ReferenceSession, options?: { id?: string }): ReferenceSession
  session(id: string): ReferenceSession | undefined
}

export interface ReferenceHostOptions {
  /** Clock for event times and createdAt (default Date.now). */
  now?: () => number
  /** Default cwd of new sessions. */
  cwd?: string
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value)
    for (const v of Object.values(value)) deepFreeze(v)
  }
  return value
}

/**
 * An in-memory agent host that scripts realistic sessions (docs/contract.md §10): request headers,
 * streamed chunks, assistant messages with tool calls, tool calls and results, multi-step
 * turns, forks, delegated sub-sessions and resumes. Works without vitest.
 */
export function createReferenceHost(options: ReferenceHostOptions = {}): ReferenceHost {
  const now = options.now ?? Date.now
  const sessionEvents = new EventEmitter<HostSessionEvents>()
  const live = new Map<string, ReferenceSession>()

  function open(meta: SessionMeta, seed: readonly SessionEvent[], firstSeq = 0, lastTurn = 0): ReferenceSession {
    const frozenMeta = deepFreeze({ ...meta })
    const events: SessionEvent[] = seed.map((e) => deepFreeze(structuredClone(e)))
    // A resumed session continues its numbers: the highest turn its seed records (a tail from the
    // last compaction may hold only the compaction, whose `lastTurn` says it, or that of `options`),
    // and call ids past those of its seed.
    let turn = Math.max(highestTurn(events) ?? 0, lastTurn)
    let step = -1
    let callCounter = 0
    const callPrefix = `call-${frozenMeta.id.slice(0, 8)}-`
    for (const e of events) {
      const id = (e.data as { callId?: unknown } | undefined)?.callId
      const n = typeof id === 'string' && id.startsWith(callPrefix) ? id.slice(callPrefix.length) : undefined
      if (n !== undefined && /^\d{1,15}$/.test(n)) callCounter = Math.max(callCounter, Number(n))
    }
    const session: ReferenceSession = {
      meta: frozenMeta,
      events,
      firstSeq,
      get turn() {
        return turn
      },
      emit(type, data, extra) {
        const event: SessionEvent = { seq: firstSeq + events.length, type, time: now(), ...(data === undefined ? {} : { data }), ...extra }
        deepFreeze(event)
        events.push(event)
        sessionEvents.emit('session/event', frozenMeta.id, event)
        return event
      },
      requestHeader(header, reason = 'initial') {
        session.emit('request/header', { header, reason })
      },
      beginTurn(userText) {
        turn++
        step = -1
        session.emit('turn/start', { turn })
        session.emit('user/message', { content: userText })
      },
      step(script) {
        step++
        session.emit('step/start', { turn, step })
        const text = script.text ?? ''
        const chunks = script.chunks ?? 3
        for (let i = 0; i < chunks && text.length > 0; i++) {
          const size = Math.ceil(text.length / chunks)
          session.emit('assistant/chunk', { turn, step, chunk: { type: 'text-delta', text: text.slice(i * size, (i + 1) * size) } })
        }
        const calls = (script.toolCalls ?? []).map((c) => ({ ...c, callId: c.callId ?? `call-${frozenMeta.id.slice(0, 8)}-${++callCounter}` }))
        const content: JsonValue[] = []
        if (script.reasoning) content.push({ type: 'reasoning', text: script.reasoning })
        if (text) content.push({ type: 'text', text })
        for (const c of calls) content.push({ type: 'tool-call', callId: c.callId, name: c.name, arguments: c.arguments ?? {} })
        session.emit('assistant/message', { turn, step, content })
        for (const c of calls) session.emit('tool/call', { turn, step, callId: c.callId, name: c.name, arguments: c.arguments ?? {} })
        return calls.map((c) => c.callId)
      },
      toolResult(callId, text, isError = false) {
        session.emit('tool/result', { turn, step, callId, content: [{ type: 'text', text }], ...(isError ? { isError } : {}) })
      },
      endStep() {
        session.emit('step/end', { turn, step })
      },
      endTurn(kind = 'completed') {
        session.emit('turn/end', { turn, reason: { kind } })
      },
      runTurn(script) {
        if (script.header !== undefined) session.requestHeader(script.header, turn === 0 ? 'initial' : 'change')
        session.beginTurn(script.user)
        for (const s of script.steps) {
          const ids = session.step(s)
          ids.forEach((id, i) => {
            const r = s.results?.[i] ?? 'ok'
            typeof r === 'string' ? session.toolResult(id, r) : session.toolResult(id, r.text, r.isError)
          })
          session.endStep()
        }
        session.endTurn(script.end)
      },
      flush() {
        sessionEvents.emit('session/flush', frozenMeta.id)
      },
      dispose() {
        live.delete(frozenMeta.id)
        sessionEvents.emit('session/disposed', frozenMeta.id)
      },
    }
    live.set(frozenMeta.id, session)
    if (firstSeq === 0) sessionEvents.emit('session/created', frozenMeta, events.slice())
    else sessionEvents.emit('session/created', frozenMeta, events.slice(), { firstSeq })
    return session
  }

  /** What a fork and a delegated sub-session share: a new id, now, the parent's cwd and id. */
  function childOf(parent: ReferenceSession, id: string | undefined) {
    const { cwd } = parent.meta
    return { id: id ?? randomUUID(), createdAt: now(), ...(cwd === undefined ? {} : { cwd }), parentSession: parent.meta.id }
  }

  return {
    sessionEvents,
    liveSessions(): Iterable<LiveSession> {
      return [...live.values()].map((s) => ({ meta: s.meta, events: s.events.slice(), ...(s.firstSeq === 0 ? {} : { firstSeq: s.firstSeq }) }))
    },
    startSession(init = {}) {
      const cwd = init.cwd ?? options.cwd
      return open(
        {
          ...init.extra,
          id: init.id ?? randomUUID(),
          createdAt: init.createdAt ?? now(),
          ...(cwd === undefined ? {} : { cwd }),
          delegationDepth: 0,
        },
        [],
      )
    },
    resume(loaded, options) {
      return open(loaded.meta, loaded.events, loaded.firstSeq ?? 0, options?.lastTurn ?? 0)
    },
    fork(parent, { seedLength, id }) {
      if (parent.firstSeq > 0 && seedLength > 0) {
        // A fork's seed is the parent's first events, which a session resumed from a tail does not hold.
        throw new Error(`the reference host cannot fork '${parent.meta.id}' with a seed: it holds only its events from seq ${parent.firstSeq} on`)
      }
      // The fork point is checked as the backends check it (E_INVALID_META, E_BAD_FORK_POINT):
      // the host never starts a fork the persistence would refuse.
      const child = { ...childOf(parent, id), seedLength }
      assertSeedLength(child)
      const meta = forkMeta({ id: parent.meta.id, path: `reference-host:${parent.meta.id}`, scan: { events: parent.events, header: { ...parent.meta, type: 'session', version: 0 } } }, child)
      return open(meta, parent.events.slice(0, seedLength))
    },
    delegate(parent, { id } = {}) {
      return open({ ...childOf(parent, id), delegationDepth: parent.meta.delegationDepth + 1 }, [])
    },
    session(id) {
      return live.get(id)
    },
  }
}
