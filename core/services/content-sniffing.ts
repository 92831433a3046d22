/**
 * The content type of a file from its first bytes, never from what the uploader said: a file
 * declared `image/png` that is an HTML page is text here. Only types a browser will not run as a
 * document come out (no text/html, image/svg+xml, XML or JavaScript): anything that reads as UTF-8
 * text is `text/plain`, anything else unrecognised `application/octet-stream`. Served files also
 * carry `nosniff` and `content-disposition: attachment` (core/http/file-answer.ts), so a browser
 * neither guesses nor renders.
 */

/** How many leading bytes `sniffContentType` looks at. */
export const SNIFF_BYTES = 4096;

export const OCTET_STREAM = 'application/octet-stream';
export const PLAIN_TEXT = 'text/plain; charset=utf-8';

interface Signature {
  readonly type: string;
  /** Bytes at `offset`; null matches any byte. */
  readonly bytes: readonly (number | null)[];
  readonly offset?: number;
}

const ascii = (text: string) => [...text].map((char) => char.charCodeAt(0));

const SIGNATURES: readonly Signature[] = [
  { type: 'image/png', bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { type: 'image/jpeg', bytes: [0xff, 0xd8, 0xff] },
  { type: 'image/gif', bytes: ascii('GIF87a') },
  { type: 'image/gif', bytes: ascii('GIF89a') },
  { type: 'image/webp', bytes: [...ascii('RIFF'), null, null, null, null, ...ascii('WEBP')] },
  { type: 'application/pdf', bytes: ascii('%PDF-') },
  { type: 'application/zip', bytes: [0x50, 0x4b, 0x03, 0x04] },
  { type: 'application/gzip', bytes: [0x1f, 0x8b] },
  { type: 'audio/wav', bytes: [...ascii('RIFF'), null, null, null, null, ...ascii('WAVE')] },
  { type: 'video/mp4', bytes: ascii('ftyp'), offset: 4 },
];

function matches(head: Uint8Array, signature: Signature): boolean {
  const offset = signature.offset ?? 0;
  if (head.length < offset + signature.bytes.length) return false;
  return signature.bytes.every((byte, i) => byte === null || head[offset + i] === byte);
}

/**
 * Whether the bytes read as UTF-8 text: no NUL and no invalid sequence, except one cut short at
 * the end of a head that is only the start of the file.
 */
function isText(head: Uint8Array, whole: boolean): boolean {
  if (head.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: !whole });
    return true;
  } catch {
    return false;
  }
}

/**
 * The type of a file whose first bytes are `head` (at most SNIFF_BYTES are read); `whole` says the
 * head is the entire file. An empty file is text.
 */
export function sniffContentType(head: Uint8Array, whole = false): string {
  const start = head.subarray(0, SNIFF_BYTES);
  for (const signature of SIGNATURES) if (matches(start, signature)) return signature.type;
  return isText(start, whole && head.length <= SNIFF_BYTES) ? PLAIN_TEXT : OCTET_STREAM;
}

/**
 * Reads the first SNIFF_BYTES of a body, sniffs them and hands back the whole body unchanged, so a
 * stream can be typed before it is stored without being held in memory.
 */
export async function sniffStream(body: AsyncIterable<Uint8Array>): Promise<{ contentType: string; body: AsyncIterable<Uint8Array> }> {
  const iterator = body[Symbol.asyncIterator]();
  const head: Uint8Array[] = [];
  let length = 0;
  let ended = false;
  while (length < SNIFF_BYTES) {
    const next = await iterator.next();
    if (next.done) {
      ended = true;
      break;
    }
    head.push(next.value);
    length += next.value.length;
  }
  const joined = Buffer.concat(head);
  async function* replay(): AsyncGenerator<Uint8Array> {
    if (joined.length > 0) yield joined;
    if (ended) return;
    for (;;) {
      const next = await iterator.next();
      if (next.done) return;
      yield next.value;
    }
  }
  return { contentType: sniffContentType(joined, ended), body: replay() };
}
