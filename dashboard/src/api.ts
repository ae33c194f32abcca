// The read API of the agentbolt server (/v1/dashboard/...), with the token from settings.
import { getSettings } from "./settings";

/** An HTTP error from the server, with its status and the server's message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = "ApiError";
  }

  /** The token is missing or wrong: the user should open the settings. */
  get needsToken(): boolean {
    return this.status === 401 || this.status === 403;
  }
}

export type Query = Record<string, string | number | boolean | null | undefined | (string | number)[]>;

export function buildUrl(path: string, query?: Query): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null || value === "") continue;
    if (Array.isArray(value)) value.forEach((v) => params.append(key, String(v)));
    else params.append(key, String(value));
  }
  const qs = params.toString();
  return `${getSettings().serverUrl}${path}${qs ? `?${qs}` : ""}`;
}

declare global {
  interface Window {
    /** The default Rollouts page, asked for by index.html before the app's scripts ran:
     * `body` settles with the parsed JSON (undefined on any error), `value` holds it once there. */
    __agentboltPrefetch?: { url: string; body: Promise<unknown>; value: unknown };
  }
}

/** The early answer for ``url`` if index.html asked for it and it has already arrived
 * (taken once), else undefined: lets the first render show the rows without a second pass. */
export function takePrefetchedNow<T>(url: string): T | undefined {
  const early = window.__agentboltPrefetch;
  if (!early || early.url !== url || early.value === undefined) return undefined;
  window.__agentboltPrefetch = undefined;
  return early.value as T;
}

/** The early answer for ``url`` if index.html asked for it (taken once, awaited), else undefined. */
async function takePrefetched(url: string): Promise<unknown> {
  const early = window.__agentboltPrefetch;
  if (!early || early.url !== url) return undefined;
  window.__agentboltPrefetch = undefined;
  return early.body; // undefined on an error: the caller asks again, the usual way
}

export async function apiGet<T>(path: string, query?: Query, signal?: AbortSignal): Promise<T> {
  const { token } = getSettings();
  const headers: Record<string, string> = { Accept: "application/json" };
  if (token) headers.Authorization = `Bearer ${token}`;
  const url = buildUrl(path, query);
  const early = await takePrefetched(url);
  if (early !== undefined) return early as T;
  let response: Response;
  try {
    response = await fetch(url, { headers, signal });
  } catch (err) {
    if ((err as Error).name === "AbortError") throw err;
    throw new ApiError(0, `cannot reach the server (${getSettings().serverUrl || window.location.origin}): ${(err as Error).message}`);
  }
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      message = body?.error?.message ?? body?.detail ?? message;
    } catch {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, message);
  }
  return (await response.json()) as T;
}

/** Path segment for ids that may hold slashes (rollout ids are `{rollout_id:path}`). */
export function idPath(id: string): string {
  return id.split("/").map(encodeURIComponent).join("/");
}
