import { createHash } from 'node:crypto'
import { SessionPersistenceError } from '../errors.js'
import type { Batch } from './append-batch.js'
import { changeChannel, changePayload } from './change-feed.js'
import { type Db, isConnectionError } from './db.js'
import { fromLargeObject, isParted, withStagedBytes } from './line-parts.js'

// Batches of several sessions in one statement, so one transaction and one WAL flush. Each
// batch is still fenced on its own: the UPDATE claims a session only where the row carries the
// batch's writer token and expected length, and the INSERT takes only the claimed batches'
// lines. A batch that was not claimed stored nothing; the others are unaffected.
//
// The statement's sessions are notified on the schema's channel (change-feed.ts), in one
// notification whose payload lists a hash of each one's id (at most 128 of 32 hex digits: 4,224
// bytes, under the 8,000 a payload may hold); an uncorrelated sub-SELECT, so it runs once, and
// only when a batch was claimed. Delivered to watchers when, and only if, the statement commits.
// (One pg_notify per session cost a tenth more server time a statement; a session named but not
// claimed only wakes its watchers for nothing.)
//
// The lines travel as one text, split on "\n" by the server: a JSON line never holds a raw
// newline, and one text costs far less to send and parse than a text[] of quoted JSON. The
// per-line numbers travel as array literals built here ("{1,1,2}"), cheaper than node-postgres
// quoting each element of a JavaScript array. A line's kind (event-kinds.ts) travels in the low
// three bits of its batch number (`bk` = batch * 8 + kind; 7: unknown, stored as NULL for the
// schema's trigger to compute): a fourth per-line array cost an eighth more server time a statement.
const GROUP_APPEND = (s: string) => `
  WITH claim AS (
    UPDATE "${s}".sessions s
       SET length = s.length + b.n, size_bytes = s.size_bytes + b.bytes, updated_at = now()
      FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[])
             WITH ORDINALITY AS b(session_id, epoch, first_seq, n, bytes, bi)
     WHERE s.session_id = b.session_id AND s.writer_epoch = b.epoch AND s.length = b.first_seq
    RETURNING b.bi, s.session_id
  ), inserted AS (
    INSERT INTO "${s}".events (session_id, seq, line, kind)
    SELECT ($1::text[])[l.bk / 8], l.seq, l.line, nullif(l.bk % 8, ${UNKNOWN_KIND})::smallint
      FROM ROWS FROM (string_to_table($8::text, E'\\n'), unnest($6::bigint[]), unnest($7::bigint[])) AS l(line, bk, seq)
     WHERE l.bk / 8 = ANY (ARRAY(SELECT bi FROM claim))
  )
  SELECT bi::integer AS bi, (SELECT pg_notify($9, $10)) AS notified FROM claim`

/** The kind sent for a line whose kind the caller did not give (stored NULL: the trigger computes it). */
const UNKNOWN_KIND = 7

/** At most this many lines in one statement: a group never grows into one huge message. */
const MAX_GROUP_LINES = 5_000
/**
 * At most this many bytes of lines in one statement (a batch that is bigger goes alone, and so
 * does one sent in parts, PARTED_BYTES or more): a few
 * huge lines (a 64 MiB tool result) never make one statement of hundreds of MiB, which would
 * cost their sum in memory on both sides and could pass the server's 1 GB limit on a value.
 */
const MAX_GROUP_BYTES = 16 * 1024 * 1024
/**
 * At most this many batches in one statement: each line is matched against the claimed batches'
 * positions (an array scan, cheaper than a hash join for a few batches), so the work stays small.
 */
const MAX_GROUP_BATCHES = 128

interface Waiter {
  batch: Batch
  resolve(claimed: boolean): void
  reject(err: unknown): void
}

/**
 * Sends appends of different sessions together: up to `slots` statements run at once, and the
 * batches that arrive while they run share the next one. A lone batch is sent at once. The
 * caller keeps at most one batch of a session in flight (its session queue), so no two batches
 * of one session ever share a statement.
 *
 * When a statement of several batches returns, the slot it frees waits for the sessions it
 * acknowledged: they usually append their next batch in the same turn of the event loop. Sent
 * at once, the batches already waiting would leave without them, and the sessions would break
 * into ever smaller cohorts. The slot is filled as soon as the waiting batches are a fair share
 * (1/slots) of all the batches in flight, waiting or still expected from those sessions, and at
 * the latest one turn later (`setImmediate`). So the sessions settle into one cohort a slot, of
 * equal size, taking turns: while the server runs one cohort's statement, this process prepares
 * the next cohort's batches. (Waiting for the whole turn instead put every session in one
 * statement, and left the server idle while the process prepared it.) A statement of one batch
 * frees its slot at once, so a lone session waits for nothing but a fill already due this turn.
 */
export class GroupCommit {
  readonly #db: Db
  readonly #text: string
  /**
   * The prepared statement's name, from its text: a caller's pool shared with another release of
   * this package (another text) or with a schema whose name starts the same (names are cut at
   * 63 bytes) never meets a statement of that name prepared with other text.
   */
  readonly #name: string
  /** The statement for a lone batch of PARTED_BYTES or more, its lines sent in parts (line-parts.ts). */
  readonly #partedText: string
  readonly #partedName: string
  readonly #slots: number
  readonly #channel: string
  #waiting: Waiter[] = []
  #running = 0
  /** Batches in the statements that are running. */
  #inFlight = 0
  /**
   * Batches still expected this turn: one per batch a shared statement just stored, less one per
   * batch submitted since (from those sessions or not: an estimate, reset when the turn ends).
   */
  #expected = 0
  /** A freed slot is filled by the next turn of the event loop; until then, only a fair share goes. */
  #pumpScheduled = false

  constructor(db: Db, schema: string, slots: number) {
    this.#db = db
    this.#text = GROUP_APPEND(schema)
    this.#name = `spj_append_${createHash('sha256').update(this.#text).digest('hex').slice(0, 32)}`
    this.#partedText = fromLargeObject(this.#text, 8)
    this.#partedName = `spj_append_${createHash('sha256').update(this.#partedText).digest('hex').slice(0, 32)}`
    this.#slots = slots
    this.#channel = changeChannel(schema)
  }

  /**
   * Resolves true when the batch was stored by this statement, false when its session was not
   * claimed (another writer's token, another length, no row: nothing of it was stored). Rejects
   * with the connection error when the statement's outcome is unknown, or with the statement's
   * own error.
   */
  submit(batch: Batch): Promise<boolean> {
    // Both would shift the lines of the batches after it in the statement to other seqs: the
    // server splits the statement's text on "\n", so `text` must split into exactly `count`
    // lines. Neither can come from a caller (append stores nothing for an empty batch; JSON lines
    // hold no raw newline): refused here before anything is sent.
    if (batch.count === 0) return Promise.reject(refused(batch, 'an empty batch cannot share a statement'))
    if (newlines(batch.text) !== batch.count - 1) return Promise.reject(refused(batch, 'a line holds a raw newline'))
    return new Promise((resolve, reject) => {
      this.#waiting.push({ batch, resolve, reject })
      if (!this.#pumpScheduled) this.#pump()
      else {
        if (this.#expected > 0) this.#expected--
        if (this.#fairShareWaiting()) this.#pump()
      }
    })
  }

  /** Whether a free slot's statement would carry its share of all the batches in play. */
  #fairShareWaiting(): boolean {
    const waiting = this.#waiting.length
    return this.#running < this.#slots && waiting * this.#slots >= this.#inFlight + waiting + this.#expected
  }

  #pump(): void {
    while (this.#running < this.#slots && this.#waiting.length > 0) {
      let lines = 0
      let bytes = 0
      let take = 0
      while (
        take < this.#waiting.length &&
        take < MAX_GROUP_BATCHES &&
        (take === 0 ||
          (!isParted(this.#waiting[0]!.batch.text) &&
            !isParted(this.#waiting[take]!.batch.text) &&
            lines + this.#waiting[take]!.batch.count <= MAX_GROUP_LINES &&
            bytes + this.#waiting[take]!.batch.bytes <= MAX_GROUP_BYTES))
      ) {
        lines += this.#waiting[take]!.batch.count
        bytes += this.#waiting[take]!.batch.bytes
        take++
      }
      const group = this.#waiting.splice(0, take)
      this.#running++
      this.#inFlight += group.length
      void this.#send(group)
    }
  }

  /**
   * Frees the slot of a statement that returned, before its callers learn the outcome (so the
   * batches they append next find it free). `appendingNext`: how many of its callers learn now
   * that their batch is stored, and so will likely append again in this turn.
   */
  #release(group: Waiter[], appendingNext: number): void {
    this.#running--
    this.#inFlight -= group.length
    if (group.length > 1) {
      this.#expected += appendingNext
      this.#schedulePump()
    } else if (!this.#pumpScheduled) this.#pump()
  }

  #schedulePump(): void {
    if (this.#pumpScheduled) return
    this.#pumpScheduled = true
    setImmediate(() => {
      this.#pumpScheduled = false
      this.#expected = 0
      this.#pump()
    })
  }

  async #send(group: Waiter[]): Promise<void> {
    let claimed: Set<number>
    try {
      claimed = await this.#statement(group.map((w) => w.batch))
    } catch (err) {
      // A failed connection leaves every batch's outcome unknown: each caller finds out its own.
      if (group.length === 1 || isConnectionError(err)) {
        this.#release(group, 0)
        for (const w of group) w.reject(err)
        return
      }
      // The statement failed and stored nothing (a deadlock, a server limit): one batch may be
      // the cause, so each is sent alone, in this slot, and meets its own fate.
      for (const w of group) {
        try {
          w.resolve((await this.#statement([w.batch])).has(1))
        } catch (own) {
          w.reject(own)
        }
      }
      this.#release(group, 0) // its callers already know, one by one
      return
    }
    this.#release(group, claimed.size)
    for (const [i, w] of group.entries()) w.resolve(claimed.has(i + 1))
  }

  /** One statement for `batches`; resolves with the 1-based positions of the claimed ones. */
  async #statement(batches: Batch[]): Promise<Set<number>> {
    const ids: string[] = []
    const epochs: string[] = []
    const firsts: number[] = []
    const counts: number[] = []
    const sizes: number[] = []
    const lineBatch: number[] = []
    const lineSeq: number[] = []
    const texts: (string | Buffer)[] = []
    for (const [i, b] of batches.entries()) {
      ids.push(b.sessionId)
      epochs.push(b.epoch)
      firsts.push(b.firstSeq)
      counts.push(b.count)
      sizes.push(b.bytes)
      for (let k = 0; k < b.count; k++) {
        lineBatch.push((i + 1) * 8 + (b.kinds?.[k] ?? UNKNOWN_KIND))
        lineSeq.push(b.firstSeq + k)
      }
      texts.push(b.text)
    }
    // One batch sends its lines as they are (text, or the bytes of a huge batch); several are joined as text.
    const lines = texts.length === 1 ? texts[0]! : texts.map((t) => (typeof t === 'string' ? t : t.toString('utf8'))).join('\n')
    const values = (linesValue: string | Buffer) => [
      ids,
      epochs,
      literal(firsts),
      literal(counts),
      literal(sizes),
      literal(lineBatch),
      literal(lineSeq),
      linesValue,
      this.#channel,
      batches.map((b) => changePayload(b.sessionId)).join(' '),
    ]
    // A huge batch (it is always alone: MAX_GROUP_BYTES) is sent in parts, in a transaction of its own.
    const { rows } = isParted(lines)
      ? await this.#db.transaction((client) =>
          withStagedBytes(client, lines, (oid) => client.query<{ bi: number }>({ name: this.#partedName, text: this.#partedText, values: values(oid) })),
        )
      : await this.#db.query<{ bi: number }>(this.#text, values(lines), this.#name) // named: each connection parses and plans the statement once, not on every batch
    return new Set(rows.map((r) => r.bi))
  }
}

/** A PostgreSQL array literal of integers: one element per line, cheaper built here than by `pg`. */
function literal(values: number[]): string {
  return `{${values.join(',')}}`
}

function newlines(text: string | Buffer): number {
  const nl = typeof text === 'string' ? '\n' : 0x0a
  let n = 0
  for (let at = text.indexOf(nl as never); at !== -1; at = text.indexOf(nl as never, at + 1)) n++
  return n
}

function refused(batch: Batch, why: string): SessionPersistenceError {
  return new SessionPersistenceError('E_INVALID_EVENT', `session '${batch.sessionId}': ${why}`, { sessionId: batch.sessionId })
}
