import { parseBuffer } from 'music-metadata';

/** What audio calls are billed on, counted the one way every provider and the gateway count them. */

/** Speech is billed per character of input: Unicode code points, so an emoji is one character, not two. */
export function speechCharacters(input: string): number {
  let characters = 0;
  for (const _ of input) characters++;
  return characters;
}

/**
 * The length of an audio file in seconds, read from the file itself (music-metadata: WAV, MP3,
 * Ogg/Opus, FLAC, M4A, WebM…), or null when it is not audio that can be read. What transcription
 * is billed on: never the client's word, never the upstream's.
 */
export async function audioDurationSeconds(file: { data: Uint8Array; filename: string; contentType: string }): Promise<number | null> {
  try {
    const metadata = await parseBuffer(file.data, { mimeType: file.contentType, path: file.filename, size: file.data.byteLength }, { duration: true, skipCovers: true });
    const duration = metadata.format.duration;
    return duration !== undefined && Number.isFinite(duration) && duration >= 0 ? duration : null;
  } catch {
    return null;
  }
}
