import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

/** A package the fake registry serves: its package.json fields and files (package.json is made from them). */
export interface FakePackage {
  name: string;
  version: string;
  manifest?: Record<string, unknown>;
  files: Record<string, string>;
}

export const TINY_DEP: FakePackage = {
  name: 'tiny-dep',
  version: '1.0.0',
  manifest: { main: 'index.js' },
  files: { 'index.js': "module.exports = 'from tiny-dep';\n" },
};

type Teardown = { teardown(fn: () => unknown): void };
type Registry = { url: string; requests: string[] };

/** A fake npm registry on loopback: by default one package, `tiny-dep@1.0.0`; packument and tarball of each. */
export async function fakeRegistry(t: Teardown, packages: readonly FakePackage[] = [TINY_DEP]): Promise<Registry> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-registry-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const tarballs = new Map<string, { pkg: FakePackage; file: string; tarball: Buffer }>();
  for (const pkg of packages) {
    const root = join(dir, pkg.name, 'package');
    const manifest = { name: pkg.name, version: pkg.version, ...pkg.manifest };
    for (const [name, content] of Object.entries({ ...pkg.files, 'package.json': `${JSON.stringify(manifest)}\n` })) {
      mkdirSync(dirname(join(root, name)), { recursive: true });
      writeFileSync(join(root, name), content);
    }
    const file = `${pkg.name}-${pkg.version}.tgz`;
    execFileSync('tar', ['-czf', join(dir, file), '-C', join(dir, pkg.name), 'package']);
    tarballs.set(pkg.name, { pkg, file, tarball: readFileSync(join(dir, file)) });
  }
  const requests: string[] = [];
  const server = http.createServer((request, response) => {
    requests.push(`${request.method} ${request.url}`);
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const name = decodeURIComponent((request.url ?? '').slice(1).split('/-/')[0]!);
    const found = tarballs.get(name);
    if (found && request.url === `/${name}`) {
      const { pkg, file, tarball } = found;
      const packument = {
        name: pkg.name,
        'dist-tags': { latest: pkg.version },
        versions: {
          [pkg.version]: {
            name: pkg.name,
            version: pkg.version,
            ...pkg.manifest,
            dist: {
              tarball: `${base}/${pkg.name}/-/${file}`,
              shasum: createHash('sha1').update(tarball).digest('hex'),
              integrity: `sha512-${createHash('sha512').update(tarball).digest('base64')}`,
            },
          },
        },
      };
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(packument));
    } else if (found && request.url === `/${name}/-/${found.file}`) {
      response.writeHead(200, { 'content-type': 'application/octet-stream' }).end(found.tarball);
    } else {
      response.writeHead(404).end('{}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, requests };
}
