/**
 * Something costly made on first use and shared after, typically a module imported only when a
 * request needs it: `const sdk = loadOnce(() => import('…'))`. A failed load is not kept: the next
 * use tries again.
 */
export function loadOnce<T>(load: () => Promise<T>): () => Promise<T> {
  let loading: Promise<T> | null = null;
  return () => {
    loading ??= load().catch((error: unknown) => {
      loading = null;
      throw error;
    });
    return loading;
  };
}
