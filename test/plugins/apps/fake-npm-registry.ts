import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fake npm registry on loopback: one package, `tiny-dep@1.0.0`, packument and tarball. */
export async function fakeRegistry(t: { teardown(fn: () => unknown): void }): Promise<{ url: string; requests: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-registry-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'package'));
  writeFileSync(join(dir, 'package', 'package.json'), '{"name":"tiny-dep","version":"1.0.0","main":"index.js"}\n');
  writeFileSync(join(dir, 'package', 'index.js'), "module.exports = 'from tiny-dep';\n");
  execFileSync('tar', ['-czf', join(dir, 'tiny-dep-1.0.0.tgz'), '-C', dir, 'package']);
  const tarball = readFileSync(join(dir, 'tiny-dep-1.0.0.tgz'));
  const requests: string[] = [];
  const server = http.createServer((request, response) => {
    requests.push(`${request.method} ${request.url}`);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    if (request.url === '/tiny-dep') {
      const packument = {
        name: 'tiny-dep',
        'dist-tags': { latest: '1.0.0' },
        versions: {
          '1.0.0': {
            name: 'tiny-dep',
            version: '1.0.0',
            main: 'index.js',
            dist: {
              tarball: `${base}/tiny-dep/-/tiny-dep-1.0.0.tgz`,
              shasum: createHash('sha1').update(tarball).digest('hex'),
              integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
            },
          },
        },
      };
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(packument));
    } else if (request.url === '/tiny-dep/-/tiny-dep-1.0.0.tgz') {
      response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tarball);
    } else {
      response.writeHead(404).end('{}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, requests };
}
