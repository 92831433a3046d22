import { MockRandom } from './mock-random.ts';

/** What `auto` (or no size) renders at, as OpenAI's image models default to. */
export const DEFAULT_IMAGE_SIZE = '1024x1024';
/** Largest side the mock draws; real image models stop well below it. */
export const MAX_IMAGE_SIDE = 4096;

export function parseImageSize(size: string | undefined): { width: number; height: number } | null {
  const match = /^(\d+)x(\d+)$/.exec(size === undefined || size === 'auto' ? DEFAULT_IMAGE_SIZE : size);
  if (!match) return null;
  const width = Number(match[1]);
  const height = Number(match[2]);
  return width >= 1 && height >= 1 && width <= MAX_IMAGE_SIDE && height <= MAX_IMAGE_SIDE ? { width, height } : null;
}

type Rgb = [number, number, number];

function hslToRgb(hue: number, saturation: number, lightness: number): Rgb {
  const chroma = (1 - Math.abs(2 * lightness - 1)) * saturation;
  const x = chroma * (1 - Math.abs(((hue / 60) % 2) - 1));
  const m = lightness - chroma / 2;
  const [r, g, b] = hue < 60 ? [chroma, x, 0] : hue < 120 ? [x, chroma, 0] : hue < 180 ? [0, chroma, x] : hue < 240 ? [0, x, chroma] : hue < 300 ? [x, 0, chroma] : [chroma, 0, x];
  return [Math.round((r + m) * 255), Math.round((g + m) * 255), Math.round((b + m) * 255)];
}

/**
 * A PNG at the full requested size, drawn from the prompt: a diagonal gradient between two
 * colours and a ring, all chosen by a hash of the prompt and the image's index, so the same
 * prompt draws the same picture and each of `n` images differs. Drawn at the real size because
 * it is cheap: about 75 ms for 1024x1024 (190 KB), the pixels on the event loop and the
 * compression in zlib's thread pool.
 */
export async function renderMockImage(prompt: string, index: number, width: number, height: number): Promise<Buffer> {
  const random = new MockRandom('image', prompt, index);
  const hue = random.next() * 360;
  const from = hslToRgb(hue, 0.65, 0.35 + random.next() * 0.2);
  const to = hslToRgb((hue + 90 + random.next() * 180) % 360, 0.7, 0.55 + random.next() * 0.2);
  const ring = hslToRgb((hue + 180) % 360, 0.8, 0.8);
  const centre = { x: width * (0.3 + random.next() * 0.4), y: height * (0.3 + random.next() * 0.4) };
  const radius = Math.min(width, height) * (0.15 + random.next() * 0.2);
  const thickness = Math.max(1, radius * 0.12);

  // pngjs only once the mock draws: most gateways never ask it for an image.
  const { PNG } = await import('pngjs');
  const png = new PNG({ width, height, colorType: 2, inputColorType: 6, inputHasAlpha: true });
  const span = width + height - 2 || 1;
  for (let y = 0; y < height; y++) {
    const dy = y - centre.y;
    for (let x = 0; x < width; x++) {
      const at = (y * width + x) * 4;
      const dx = x - centre.x;
      const onRing = Math.abs(Math.sqrt(dx * dx + dy * dy) - radius) < thickness;
      const t = (x + y) / span;
      png.data[at] = onRing ? ring[0] : from[0] + (to[0] - from[0]) * t;
      png.data[at + 1] = onRing ? ring[1] : from[1] + (to[1] - from[1]) * t;
      png.data[at + 2] = onRing ? ring[2] : from[2] + (to[2] - from[2]) * t;
      png.data[at + 3] = 255;
    }
  }
  const chunks: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    png
      .pack()
      .on('data', (chunk: Buffer) => chunks.push(chunk))
      .on('end', resolve)
      .on('error', reject);
  });
  return Buffer.concat(chunks);
}

/** How the mock "revised" the prompt, as DALL·E 3 reports the prompt it actually drew. */
export function revisedPrompt(prompt: string): string {
  return `${prompt.trim()}, drawn by the offline mock as a colour gradient with a ring`;
}
