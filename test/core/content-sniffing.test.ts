import t from 'tap';
import { OCTET_STREAM, PLAIN_TEXT, SNIFF_BYTES, sniffContentType, sniffStream } from '../../core/services/content-sniffing.ts';

const hex = (text: string) => Buffer.from(text, 'hex');

t.test('well-known formats are recognised by their first bytes', async (t) => {
  t.equal(sniffContentType(hex('89504e470d0a1a0a0000')), 'image/png');
  t.equal(sniffContentType(hex('ffd8ffe000104a464946')), 'image/jpeg');
  t.equal(sniffContentType(Buffer.from('GIF89a\x01\x00')), 'image/gif');
  t.equal(sniffContentType(Buffer.from('RIFF\x10\x00\x00\x00WEBPVP8 ')), 'image/webp');
  t.equal(sniffContentType(Buffer.from('%PDF-1.7\n')), 'application/pdf');
  t.equal(sniffContentType(hex('504b0304140000000800')), 'application/zip');
  t.equal(sniffContentType(hex('1f8b0800000000000003')), 'application/gzip');
});

t.test('what a browser would run is text: HTML, SVG and scripts are text/plain', async (t) => {
  for (const page of ['<!doctype html><script>alert(1)</script>', '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>', 'alert(document.cookie)']) {
    t.equal(sniffContentType(Buffer.from(page), true), PLAIN_TEXT, page);
  }
});

t.test('text is UTF-8 without NUL; anything else unknown is application/octet-stream', async (t) => {
  t.equal(sniffContentType(Buffer.from('Grüße, 世界'), true), PLAIN_TEXT);
  t.equal(sniffContentType(Buffer.alloc(0), true), PLAIN_TEXT, 'an empty file');
  t.equal(sniffContentType(Buffer.from([0x61, 0x00, 0x62]), true), OCTET_STREAM, 'a NUL');
  t.equal(sniffContentType(Buffer.from([0xc3, 0x28]), true), OCTET_STREAM, 'an invalid sequence');
  const cut = Buffer.concat([Buffer.alloc(SNIFF_BYTES - 1, 0x61), Buffer.from('é')]);
  t.equal(sniffContentType(cut, false), PLAIN_TEXT, 'a character cut by the end of the head of a longer file');
  t.equal(sniffContentType(Buffer.from([0x61, 0xc3]), true), OCTET_STREAM, 'the same cut at the end of a whole file');
});

t.test('sniffing a stream reads only its head and hands back every byte', async (t) => {
  const chunks = [Buffer.from('%PDF-'), Buffer.alloc(SNIFF_BYTES, 0x20), Buffer.from('tail')];
  let pulled = 0;
  async function* source() {
    for (const chunk of chunks) {
      pulled += 1;
      yield chunk;
    }
  }
  const sniffed = await sniffStream(source());
  t.equal(sniffed.contentType, 'application/pdf');
  t.equal(pulled, 2, 'no further than the head');
  const out: Buffer[] = [];
  for await (const chunk of sniffed.body) out.push(Buffer.from(chunk));
  t.ok(Buffer.concat(out).equals(Buffer.concat(chunks)));
});
