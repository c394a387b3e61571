/** The known-answer vectors of `tests/vectors/` (shared with the Python tests), read at import. */
import { readFileSync } from 'node:fs';

const folder = new URL('../../tests/vectors/', import.meta.url);

export function load(name) {
  return JSON.parse(readFileSync(new URL(name, folder), 'utf8'));
}

export const fromHex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (byte) => parseInt(byte, 16));
export const toHex = (bytes) => [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');

/** A byte source that replays a recorded tape and reports how much of it was taken. */
export class Tape {
  constructor(hex) {
    this.bytesLeft = fromHex(hex);
    this.offset = 0;
  }

  bytes(size) {
    if (this.offset + size > this.bytesLeft.length) throw new Error('the sampler read past the recorded tape');
    const chunk = this.bytesLeft.slice(this.offset, this.offset + size);
    this.offset += size;
    return chunk;
  }

  get exhausted() {
    return this.offset === this.bytesLeft.length;
  }
}
