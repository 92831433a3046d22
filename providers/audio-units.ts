/** What audio calls are billed on, counted the one way every provider and the gateway count them. */

/** Speech is billed per character of input: Unicode code points, so an emoji is one character, not two. */
export function speechCharacters(input: string): number {
  let characters = 0;
  for (const _ of input) characters++;
  return characters;
}

/**
 * music-metadata is imported on the first transcription, not at start: with its parsers for every
 * container and their dependencies it is some 160 modules, several MiB of a gateway's memory that
 * serves no audio. A failed import rejects the call (a server error), as a missing module would.
 */
let musicMetadataModule: Promise<typeof import('music-metadata')> | undefined;
function musicMetadata(): Promise<typeof import('music-metadata')> {
  musicMetadataModule ??= import('music-metadata');
  return musicMetadataModule;
}

/**
 * The length of an audio file in seconds, read from the file itself (music-metadata: WAV, MP3,
 * Ogg/Opus, FLAC, M4A, WebM…), or null when it is not audio that can be read. What transcription
 * is billed on: never the client's word, never the upstream's.
 */
export async function audioDurationSeconds(file: { data: Uint8Array; filename: string; contentType: string }): Promise<number | null> {
  const { parseBuffer } = await musicMetadata();
  try {
    const metadata = await parseBuffer(file.data, { mimeType: file.contentType, path: file.filename, size: file.data.byteLength }, { duration: true, skipCovers: true });
    const duration = metadata.format.duration;
    return duration !== undefined && Number.isFinite(duration) && duration >= 0 ? duration : null;
  } catch {
    return null;
  }
}
