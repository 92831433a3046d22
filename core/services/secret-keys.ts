import { createSecretKey, randomBytes, type KeyObject } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isEmbeddedOnDisk } from '../../config/embedded-database.ts';
import { SECRET_KEY_PATTERN, type AppConfig } from '../../config/schema.ts';

/**
 * The keys customer secrets are encrypted under. Listed newest first: the first encrypts, every
 * one decrypts, so a new key can be put in front of the old ones, values re-encrypted
 * (`npm run cli -- secrets rotate`), and only then the old key dropped.
 */
export interface SecretKey {
  readonly id: string;
  /** A KeyObject, not a Buffer: it prints no bytes when inspected or logged. */
  readonly material: KeyObject;
}

export class SecretKeyring {
  private readonly byId: ReadonlyMap<string, SecretKey>;

  private constructor(readonly keys: readonly SecretKey[]) {
    this.byId = new Map(keys.map((key) => [key.id, key]));
  }

  /** `id:base64key` entries, already checked by the config schema or the key file's reader. */
  static fromEntries(entries: readonly string[]): SecretKeyring {
    if (entries.length === 0) throw new Error('a keyring needs at least one key');
    return new SecretKeyring(entries.map(parseEntry));
  }

  /** A key that lives as long as the process: for an in-memory database, whose rows die with it anyway. */
  static ephemeral(): SecretKeyring {
    return new SecretKeyring([{ id: 'ephemeral', material: createSecretKey(randomBytes(32)) }]);
  }

  get current(): SecretKey {
    return this.keys[0]!;
  }

  get(id: string): SecretKey | undefined {
    return this.byId.get(id);
  }
}

function parseEntry(entry: string): SecretKey {
  if (!SECRET_KEY_PATTERN.test(entry)) throw new Error('a secret key must be id:key with a 32-byte key in base64');
  const colon = entry.indexOf(':');
  const material = Buffer.from(entry.slice(colon + 1), 'base64');
  if (material.length !== 32) throw new Error('a secret key must be 32 bytes');
  return { id: entry.slice(0, colon), material: createSecretKey(material) };
}

/** A fresh `id:base64key` entry; the id says when it was made. */
export function generateKeyEntry(now = new Date()): string {
  const day = now.toISOString().slice(0, 10).replaceAll('-', '');
  return `k${day}-${randomBytes(3).toString('hex')}:${randomBytes(32).toString('base64')}`;
}

export type KeySource =
  | { kind: 'config' }
  | { kind: 'file'; path: string; created: boolean }
  | { kind: 'ephemeral' }
  /** PostgreSQL with no key given: the vault refuses to work until SVC_SECRET_KEYS is set. */
  | { kind: 'none' };

/** Where the keys come from under this configuration; the key file's path when one is used. */
export function keyFileOf(config: AppConfig): string | null {
  if (config.secrets.keys.length > 0) return null;
  if (config.secrets.keyFile !== undefined) return path.resolve(config.secrets.keyFile);
  return isEmbeddedOnDisk(config.storage.database) ? path.resolve(config.storage.dataDir, 'secret-keys') : null;
}

export interface LoadedKeys {
  keyring: SecretKeyring | null;
  source: KeySource;
  /** Something the operator should hear about (never containing a key). */
  warning?: string;
}

/**
 * Keys from `secrets.keys` (SVC_SECRET_KEYS) when given. Otherwise, on the embedded database (or
 * with `secrets.keyFile`), a key file that the first start creates with mode 0600, so `npm start`
 * needs no setup; an in-memory database gets a throwaway key. PostgreSQL without keys gets none:
 * a key generated on one replica's disk would make values unreadable on the others.
 */
export async function loadSecretKeys(config: AppConfig): Promise<LoadedKeys> {
  if (config.secrets.keys.length > 0) return { keyring: SecretKeyring.fromEntries(config.secrets.keys), source: { kind: 'config' } };
  const file = keyFileOf(config);
  if (file !== null) {
    const { entries, created } = await readOrCreateKeyFile(file);
    const mode = (await stat(file)).mode & 0o777;
    const warning = (mode & 0o077) !== 0 ? `the secret key file ${file} can be read by other users (mode ${mode.toString(8)}); chmod 600 it` : undefined;
    return { keyring: SecretKeyring.fromEntries(entries), source: { kind: 'file', path: file, created }, ...(warning ? { warning } : {}) };
  }
  if (config.storage.database.driver === 'pglite') return { keyring: SecretKeyring.ephemeral(), source: { kind: 'ephemeral' } };
  return {
    keyring: null,
    source: { kind: 'none' },
    warning: 'no secret-encryption key: set SVC_SECRET_KEYS (the same on every replica) before storing customer secrets',
  };
}

const HEADER = '# Keys that encrypt customer secrets, newest first (id:base64). Keep this file with the data and never share it.\n';

async function readOrCreateKeyFile(file: string): Promise<{ entries: string[]; created: boolean }> {
  let created = false;
  try {
    await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const handle = await open(file, 'wx', 0o600);
    try {
      await handle.writeFile(`${HEADER}${generateKeyEntry()}\n`);
      await handle.sync();
    } finally {
      await handle.close();
    }
    created = true;
  } catch (error) {
    // Already there (or made by a process racing us): read it.
    if ((error as { code?: unknown }).code !== 'EEXIST') throw error;
  }
  return { entries: await readKeyFile(file), created };
}

export async function readKeyFile(file: string): Promise<string[]> {
  const lines = (await readFile(file, 'utf8')).split('\n').map((line) => line.trim());
  const entries = lines.filter((line) => line !== '' && !line.startsWith('#'));
  entries.forEach((entry, i) => {
    if (!SECRET_KEY_PATTERN.test(entry)) throw new Error(`${file}: key ${i + 1} is not id:key with a 32-byte key in base64`);
  });
  if (entries.length === 0) throw new Error(`${file} holds no key`);
  if (new Set(entries.map((entry) => entry.split(':')[0])).size !== entries.length) throw new Error(`${file}: key ids must be unique`);
  return entries;
}

/** Puts a new key in front of the file's others (it encrypts from now on); returns its id. */
export async function prependKeyToFile(file: string, now = new Date()): Promise<string> {
  const entries = await readKeyFile(file);
  const entry = generateKeyEntry(now);
  const next = `${file}.new`;
  await rm(next, { force: true });
  await writeFile(next, `${HEADER}${[entry, ...entries].join('\n')}\n`, { mode: 0o600, flag: 'wx' });
  await rename(next, file);
  return entry.slice(0, entry.indexOf(':'));
}
