import { type ChildProcess, spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import type { WorkerCommand } from '../../src/torture/postgres-worker.js'

const WORKER = fileURLToPath(new URL('../../dist/torture/postgres-worker.js', import.meta.url))

export interface WorkerReply {
  ok: boolean
  code?: string
  message?: string
  [k: string]: unknown
}

/** A child process driving its own store (dist/torture/postgres-worker.js; build first). */
export class PgWorker {
  readonly child: ChildProcess
  readonly exited: Promise<number | null>
  readonly acks: { ack: string; seq: number; n: number }[] = []
  readonly #pending = new Map<number, (r: WorkerReply) => void>()
  #nextId = 0
  #onAck: (() => void) | undefined

  constructor() {
    this.child = spawn(process.execPath, [WORKER], { stdio: ['pipe', 'pipe', 'inherit'] })
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)))
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      const msg = JSON.parse(line) as WorkerReply & { id?: number; ack?: string; seq?: number; n?: number }
      if (msg.ack !== undefined) {
        this.acks.push({ ack: msg.ack, seq: msg.seq!, n: msg.n! })
        this.#onAck?.()
        return
      }
      if (msg.id === undefined) return
      this.#pending.get(msg.id)?.(msg)
      this.#pending.delete(msg.id)
    })
  }

  send(cmd: WorkerCommand): Promise<WorkerReply> {
    const id = this.#nextId++
    return new Promise((resolve, reject) => {
      this.#pending.set(id, resolve)
      this.exited.then(() => reject(new Error(`worker exited before answering ${cmd.op}`)))
      this.child.stdin!.write(`${JSON.stringify({ id, ...cmd })}\n`)
    })
  }

  /** Resolves once at least `count` batches have been acknowledged in total. */
  acked(count: number): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (this.acks.length >= count) {
          this.#onAck = undefined
          resolve()
        }
      }
      this.#onAck = check
      check()
    })
  }

  kill(signal: NodeJS.Signals): void {
    this.child.kill(signal)
  }

  /** Ends stdin: the worker ends its store and exits. */
  async end(): Promise<void> {
    this.child.stdin!.end()
    await this.exited
  }
}
