// A child process that drives one PostgreSQL store for the multi-process tests and the torture
// phase. It reads one JSON command per stdin line and answers one JSON line per command on
// stdout: {id, ok: true, ...} or {id, ok: false, code, message}. `stream` instead prints one
// {ack} line per acknowledged batch, forever (until the process is killed).
import { createInterface } from 'node:readline'
import type { SessionEvent } from '../session/schema.js'
import { isSessionPersistenceError } from '../errors.js'
import { createPostgresPersistence, type PostgresSessionPersistence } from '../postgres/index.js'

export type WorkerCommand =
  | { op: 'open'; url: string; schema: string; host: string; retryTimeoutMs?: number }
  | { op: 'create'; session: string }
  | { op: 'load'; session: string }
  | { op: 'append'; session: string; count: number; tag: string }
  | { op: 'close'; session: string }
  | { op: 'stream'; sessions: string[]; batch: number; tag: string }

/** Events of the torture's shape: turns of `count - 2` messages; each names its writer in `data.tag`. */
export function workerEvents(first: number, count: number, tag: string): SessionEvent[] {
  return Array.from({ length: count }, (_, i) => ({
    seq: first + i,
    type: 'torture/event',
    time: 1_700_000_000_000 + first + i,
    data: { tag, n: first + i, text: `e\u2028${first + i} ✓` },
  }))
}

let store: PostgresSessionPersistence | undefined
const next = new Map<string, number>()
const say = (msg: unknown) => process.stdout.write(`${JSON.stringify(msg)}\n`)

async function handle(cmd: WorkerCommand): Promise<Record<string, unknown>> {
  if (cmd.op === 'open') {
    store = createPostgresPersistence({
      connectionString: cmd.url,
      schema: cmd.schema,
      host: cmd.host,
      poolSize: 4,
      ...(cmd.retryTimeoutMs === undefined ? {} : { retryTimeoutMs: cmd.retryTimeoutMs }),
    })
    return {}
  }
  const s = store!
  switch (cmd.op) {
    case 'create':
      await s.create({ id: cmd.session, createdAt: 1_700_000_000_000, delegationDepth: 0 })
      next.set(cmd.session, 0)
      return {}
    case 'load': {
      const loaded = await s.load(cmd.session, { closeOpenTurn: false })
      next.set(cmd.session, loaded.events.length)
      return { length: loaded.events.length }
    }
    case 'append': {
      const first = next.get(cmd.session) ?? 0
      await s.append(cmd.session, workerEvents(first, cmd.count, cmd.tag))
      next.set(cmd.session, first + cmd.count)
      return { seq: first }
    }
    case 'close':
      await s.close(cmd.session)
      return {}
    case 'stream':
      for (const id of cmd.sessions) void stream(s, id, cmd.batch, cmd.tag)
      return {}
  }
}

/** Appends batches to `id` forever, printing each acknowledgement; a rejected batch is retried as is. */
async function stream(s: PostgresSessionPersistence, id: string, batch: number, tag: string): Promise<void> {
  for (;;) {
    const first = next.get(id) ?? 0
    const events = workerEvents(first, batch, tag)
    try {
      await s.append(id, events)
    } catch (err) {
      say({ error: id, code: isSessionPersistenceError(err) ? err.code : 'foreign', message: (err as Error).message })
      if (isSessionPersistenceError(err) && (err.code === 'E_LOCKED' || err.code === 'E_NOT_FOUND')) return
      // Same batch again: an unknown outcome is resolved, never stored twice. After a pause, so
      // that an error that repeats reports a line now and then instead of spinning.
      await new Promise((resolve) => setTimeout(resolve, 10))
      continue
    }
    next.set(id, first + batch)
    say({ ack: id, seq: first, n: batch })
  }
}

const lines = createInterface({ input: process.stdin })
lines.on('line', (line) => {
  const { id, ...cmd } = JSON.parse(line) as WorkerCommand & { id: number }
  handle(cmd as WorkerCommand).then(
    (result) => say({ id, ok: true, ...result }),
    (err: unknown) =>
      say({ id, ok: false, code: isSessionPersistenceError(err) ? err.code : 'foreign', message: (err as Error).message }),
  )
})
lines.on('close', () => {
  void store?.end().finally(() => process.exit(0))
})
