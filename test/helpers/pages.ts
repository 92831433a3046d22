import type { TestApp } from './app.ts';

export type Item = Record<string, any>;

export interface PagedList {
  /** Every item of every page, in the order the pages gave them. */
  items: Item[];
  /** How many items each page held. */
  pageSizes: number[];
}

/**
 * Follows nextCursor from the first page of a list to its last, `limit` rows a page, and throws
 * on anything but a 200, on a page over the limit, and on a list that never ends.
 */
export async function pageThrough(test: TestApp, path: string, options: { limit: number; token?: string; maxPages?: number }): Promise<PagedList> {
  const items: Item[] = [];
  const pageSizes: number[] = [];
  const separator = path.includes('?') ? '&' : '?';
  let cursor: string | null = null;
  do {
    if (pageSizes.length === (options.maxPages ?? 1000)) throw new Error(`${path}: still more after ${pageSizes.length} pages`);
    const url = `${path}${separator}limit=${options.limit}${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
    const response = await test.call('GET', url, { token: options.token });
    if (response.statusCode !== 200) throw new Error(`GET ${url}: ${response.statusCode} ${response.body}`);
    const page = response.json() as { data: Item[]; nextCursor: string | null };
    if (page.data.length > options.limit) throw new Error(`GET ${url}: ${page.data.length} rows, over the limit`);
    items.push(...page.data);
    pageSizes.push(page.data.length);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return { items, pageSizes };
}
