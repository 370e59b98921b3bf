'use strict';
// Deterministic ping and pong payloads: the byte-for-byte twin of pingpong/kit/payloads.py (tests compare them).

const PAYLOAD_KINDS = ['text-ascii', 'text-utf8', 'binary'];
const ASCII_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
// One character of each UTF-8 length (1, 2, 3 and 4 bytes).
const UTF8_CYCLE = ['a', '\u00e9', '\u20ac', '\u{1F600}'];
const PING = 0;
const PONG = 1;

/**
 * The ping (which=0) or pong (which=1) payload: `bytes`, a Buffer of exactly `size` bytes; `binary`; and for text
 * kinds `text`, the same payload as a string (for APIs that send and receive text as strings).
 */
function makePayload(kind, size, which) {
  if (!Number.isInteger(size) || size < 1) throw new Error(`payload size must be at least 1 byte, got ${size}`);
  if (which !== PING && which !== PONG) throw new Error(`which must be 0 (ping) or 1 (pong), got ${which}`);
  if (kind === 'text-ascii') {
    let text = '';
    for (let i = 0; i < size; i++) text += ASCII_ALPHABET[(i + which) % ASCII_ALPHABET.length];
    return { bytes: Buffer.from(text, 'utf8'), text, binary: false };
  }
  if (kind === 'text-utf8') {
    const text = utf8Text(size, which);
    return { bytes: Buffer.from(text, 'utf8'), text, binary: false };
  }
  if (kind === 'binary') {
    const bytes = Buffer.alloc(size);
    for (let i = 0; i < size; i++) bytes[i] = (i * 31 + 7 + which * 101) & 0xff;
    return { bytes, binary: true };
  }
  throw new Error(`unknown payload kind '${kind}'; expected one of ${PAYLOAD_KINDS.join(', ')}`);
}

function utf8Text(size, which) {
  let text = '';
  let used = 0;
  let index = which;
  while (used < size) {
    let char = UTF8_CYCLE[index % UTF8_CYCLE.length];
    let width = Buffer.byteLength(char, 'utf8');
    if (used + width > size) {
      char = ASCII_ALPHABET[(index + which) % ASCII_ALPHABET.length];
      width = 1;
    }
    text += char;
    used += width;
    index += 1;
  }
  return text;
}

module.exports = { PAYLOAD_KINDS, PING, PONG, makePayload };
