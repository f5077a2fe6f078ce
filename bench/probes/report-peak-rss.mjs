// Loaded with `node --import` into a process whose peak RSS a bench wants: prints `RSS <KiB>` on
// stderr as the process exits (its own high-water mark, not its parent's: see peakRssBytes).
import { peakRssBytes } from '../lib.mjs'

process.on('exit', () => console.error('RSS', Math.round(peakRssBytes() / 1024)))
