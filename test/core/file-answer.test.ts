import t from 'tap';
import { acceptsOctetStream, contentDisposition } from '../../core/http/file-answer.ts';

t.test('a download names the file twice: an ASCII fallback and the exact UTF-8 name', async (t) => {
  t.equal(contentDisposition('report.pdf'), `attachment; filename="report.pdf"; filename*=UTF-8''report.pdf`);
  t.equal(contentDisposition('naïve "plan" 100%.txt'), `attachment; filename="na_ve _plan_ 100_.txt"; filename*=UTF-8''na%C3%AFve%20%22plan%22%20100%25.txt`);
  t.equal(contentDisposition("it's (v2)*.txt"), `attachment; filename="it's (v2)*.txt"; filename*=UTF-8''it%27s%20%28v2%29%2A.txt`);
  t.equal(contentDisposition(''), `attachment; filename="download"; filename*=UTF-8''`);
  t.notMatch(contentDisposition('a\r\nSet-Cookie: x=1'), /\r|\n/, 'no header injection');
});

t.test('only a request that accepts application/octet-stream with a positive q gets the bytes', async (t) => {
  t.equal(acceptsOctetStream('application/octet-stream'), true);
  t.equal(acceptsOctetStream('application/json, Application/Octet-Stream;q=0.5'), true);
  t.equal(acceptsOctetStream('application/octet-stream;q=0'), false);
  t.equal(acceptsOctetStream('*/*'), false, 'a wildcard keeps JSON');
  t.equal(acceptsOctetStream('text/html,application/xhtml+xml'), false);
  t.equal(acceptsOctetStream(undefined), false);
});
