/**
 * Lines gathered in one growing buffer and handed out in pieces (`take`): what a rewrite of a
 * log (§16 migrate, redact) writes, built without a string per line.
 */
export class LineBuffer {
  protected buf: Buffer
  protected len = 0

  constructor(initialBytes = 1 << 20) {
    this.buf = Buffer.allocUnsafe(initialBytes)
  }

  get length(): number {
    return this.len
  }

  /** Makes room for `n` more bytes. */
  protected room(n: number): void {
    if (this.len + n <= this.buf.length) return
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n))
    this.buf.copy(bigger, 0, 0, this.len)
    this.buf = bigger
  }

  /** The line `src[start, end)` as it is, with its `\n`. */
  addLine(src: Buffer, start: number, end: number): void {
    this.room(end - start + 1)
    this.len += src.copy(this.buf, this.len, start, end)
    this.buf[this.len++] = 10
  }

  /** Text as it is (whole lines, each with its `\n`). */
  addText(text: string): void {
    this.room(Buffer.byteLength(text))
    this.len += this.buf.write(text, this.len, 'utf8')
  }

  /** What was added since the last call, as a buffer of its own; the builder starts empty again. */
  take(): Buffer {
    const out = Buffer.from(this.buf.subarray(0, this.len))
    this.len = 0
    return out
  }
}
