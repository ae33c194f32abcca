// Fetch a read-API path, and fetch it again every `refreshMs` (live refresh) while mounted.
import { useCallback, useEffect, useRef, useState } from "react";

import { apiGet, ApiError, type Query } from "./api";
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
  const [state, setState] = useState<{ key: string | null; data?: T; error?: ApiError; loading: boolean }>({
    key,
    loading: path !== null,
  });
  const [tick, setTick] = useState(0);
  const refresh = useCallback(() => setTick((t) => t + 1), []);
  const queryRef = useRef(query);
  queryRef.current = query;

  useEffect(() => onSettingsChange(refresh), [refresh]);

  useEffect(() => {
    if (path === null) return;
    const controller = new AbortController();
    setState((s) => (s.key === key ? { ...s, loading: true } : { key, loading: true }));
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
