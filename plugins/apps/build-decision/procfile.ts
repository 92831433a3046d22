import type { SourceTree } from './source-tree.ts';

/**
 * The Procfile's process types (`web: gunicorn app:app`), in the format Heroku defined and other
 * platforms kept: one `name: command` a line, `#` comments. Only `web` matters here: it is the process
 * that answers HTTP, and when present it is how the app starts, whatever the language.
 */
export interface Procfile {
  readonly processes: ReadonlyMap<string, string>;
}

const LINE = /^([A-Za-z0-9_-]+)[ \t]*:[ \t]*(.*)$/;

export function parseProcfile(text: string): Procfile {
  const processes = new Map<string, string>();
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    // A name repeated: the first one stands, as the platforms that read Procfiles do.
    if (match && !processes.has(match[1]!)) processes.set(match[1]!, match[2]!.trim());
  }
  return { processes };
}

/** The folder's Procfile, or null when it has none (or one too large to be a Procfile). */
export async function readProcfile(tree: SourceTree): Promise<Procfile | null> {
  const text = await tree.readText('Procfile');
  return text === null ? null : parseProcfile(text);
}
