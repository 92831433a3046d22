import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

/** One page of a list operation as the API answers it (core/vocabulary/pagination.ts). */
export interface ListPage<T> {
  readonly data: readonly T[];
  readonly nextCursor: string | null;
}

export interface CursorList<T> {
  /** null until the first page came. */
  readonly items: readonly T[] | null;
  readonly failure: string | null;
  /** The API said there is an older page (`nextCursor`). */
  readonly hasMore: boolean;
  /** Asks for the first page again; older pages already shown stay below it. */
  reload(): Promise<void>;
  /** Appends the next older page. */
  more(): Promise<void>;
  /** Puts one row the API answered in place of the shown one with its id. */
  replace(item: T): void;
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * A newest-first list paged with the API's cursor. Reloading asks for the first page only and keeps
 * the older rows loaded with More after it, so a refresh (or a poll) never throws away what the
 * person paged to; rows gone from the first page are gone from the list.
 */
export function useCursorList<T extends { id: string }>(
  fetchPage: (cursor: string | undefined) => Promise<ListPage<T>>,
  key: string,
  /** false when a poller (visible-polling.ts) asks for the first page itself. */
  loadOnMount = true,
): CursorList<T> {
  const [items, setItems] = useState<readonly T[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  // Whether More was used: then the cursor is the last older page's, not the first page's.
  const pagedOn = useRef(false);
  const latest = useRef(fetchPage);
  latest.current = fetchPage;

  const reload = useCallback(async () => {
    try {
      const page = await latest.current(undefined);
      setFailure(null);
      setItems((previous) => (pagedOn.current && page.nextCursor !== null ? withOlder(page.data, previous ?? []) : page.data));
      if (!pagedOn.current || page.nextCursor === null) {
        pagedOn.current = false;
        setCursor(page.nextCursor);
      }
    } catch (error) {
      setFailure(messageOf(error));
    }
  }, []);

  const more = useCallback(async () => {
    if (cursor === null) return;
    try {
      const page = await latest.current(cursor);
      pagedOn.current = true;
      setItems((previous) => {
        const shown = new Set((previous ?? []).map((item) => item.id));
        return [...(previous ?? []), ...page.data.filter((item) => !shown.has(item.id))];
      });
      setCursor(page.nextCursor);
    } catch (error) {
      setFailure(messageOf(error));
    }
  }, [cursor]);

  const replace = useCallback((item: T) => setItems((previous) => previous?.map((shown) => (shown.id === item.id ? item : shown)) ?? null), []);

  useEffect(() => {
    pagedOn.current = false;
    setItems(null);
    if (loadOnMount) void reload();
  }, [key]);

  return { items, failure, hasMore: cursor !== null, reload, more, replace };
}

/** The fresh first page, then the rows shown after its last one (the older pages loaded before). */
function withOlder<T extends { id: string }>(fresh: readonly T[], previous: readonly T[]): readonly T[] {
  const last = fresh.at(-1);
  const at = last === undefined ? -1 : previous.findIndex((item) => item.id === last.id);
  const inFresh = new Set(fresh.map((item) => item.id));
  const older = (at === -1 ? previous : previous.slice(at + 1)).filter((item) => !inFresh.has(item.id));
  return [...fresh, ...older];
}
