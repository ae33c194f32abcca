// Fetch a read-API path, and fetch it again every `refreshMs` (live refresh) while mounted.
import { useCallback, useEffect, useRef, useState } from "react";

import { apiGet, ApiError, buildUrl, takePrefetchedNow, type Query } from "./api";
import { onSettingsChange } from "./settings";

export interface ApiState<T> {
  data: T | undefined;
  error: ApiError | undefined;
  loading: boolean;
  /** Fetch now (e.g. after the user changed something). */
  refresh: () => void;
}

export function useApi<T>(path: string | null, query?: Query, refreshMs?: number): ApiState<T> {
  const key = path === null ? null : `${path}?${JSON.stringify(query ?? {})}`;
  // The rows index.html already fetched, when they are in: shown by the first render, and
  // the mount's own fetch is skipped (the next one is the live refresh).
  const [state, setState] = useState<{ key: string | null; data?: T; error?: ApiError; loading: boolean }>(() => {
    const early = path === null ? undefined : takePrefetchedNow<T>(buildUrl(path, query));
    return early === undefined ? { key, loading: path !== null } : { key, data: early, loading: false };
  });
  const prefetchedKey = useRef(state.data === undefined ? null : key);
  const [tick, setTick] = useState(0);
  const refresh = useCallback(() => setTick((t) => t + 1), []);
  const queryRef = useRef(query);
  queryRef.current = query;

  useEffect(() => onSettingsChange(refresh), [refresh]);

  useEffect(() => {
    if (path === null) return;
    if (prefetchedKey.current === key) {
      prefetchedKey.current = null;
      return;
    }
    const controller = new AbortController();
    setState((s) => (s.key !== key ? { key, loading: true } : s.loading ? s : { ...s, loading: true }));
    apiGet<T>(path, queryRef.current, controller.signal).then(
      (data) => setState({ key, data, loading: false }),
      (err: Error) => {
        if (err.name === "AbortError") return;
        const error = err instanceof ApiError ? err : new ApiError(0, err.message);
        setState((s) => ({ ...s, key, error, loading: false }));
      },
    );
    return () => controller.abort();
  }, [key, path, tick]);

  useEffect(() => {
    if (!refreshMs || path === null) return;
    const timer = window.setInterval(() => {
      if (document.visibilityState === "visible") refresh();
    }, refreshMs);
    return () => window.clearInterval(timer);
  }, [refreshMs, path, refresh]);

  const current = state.key === key;
  return {
    data: current ? state.data : undefined,
    error: current ? state.error : undefined,
    loading: current ? state.loading : path !== null,
    refresh,
  };
}
