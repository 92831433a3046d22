import { useEffect, useRef } from 'preact/hooks';

/**
 * Runs `refresh` at once and then every `everyMs` while the page is visible: a hidden tab asks the
 * service nothing, and the refresh resumes (at once) when it is shown again. One refresh at a time;
 * the next is timed from the end of the last, so a slow answer never stacks calls.
 */
export function useVisiblePolling(refresh: () => Promise<unknown>, everyMs: number): void {
  // The latest callback, so a re-render with new state does not restart the timer.
  const latest = useRef(refresh);
  latest.current = refresh;
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    let running = false;
    let stopped = false;
    const visible = () => document.visibilityState === 'visible';
    const tick = async () => {
      timer = undefined;
      if (stopped || !visible()) return;
      running = true;
      try {
        await latest.current();
      } catch {
        // The page shows its own failure; polling goes on so it recovers when the service does.
      } finally {
        running = false;
      }
      if (!stopped && visible() && timer === undefined) timer = setTimeout(() => void tick(), everyMs);
    };
    const onVisibility = () => {
      if (visible()) {
        if (!running && timer === undefined) void tick();
      } else if (timer !== undefined) {
        clearTimeout(timer);
        timer = undefined;
      }
    };
    document.addEventListener('visibilitychange', onVisibility);
    void tick();
    return () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, [everyMs]);
}
