// Where the dashboard reads from, and with which token: kept in the browser (localStorage),
// so the admin token is entered once per browser, never put in a URL.

const KEY = "agentbolt.dashboard.settings";

export interface Settings {
  /** Base URL of the agentbolt server; "" = the server that served this page. */
  serverUrl: string;
  /** The server's admin token; "" when the server has none. */
  token: string;
}

type Listener = (s: Settings) => void;
const listeners = new Set<Listener>();

function read(): Settings {
  try {
    const raw = window.localStorage.getItem(KEY);
    if (raw) {
      const parsed = JSON.parse(raw) as Partial<Settings>;
      return { serverUrl: parsed.serverUrl ?? "", token: parsed.token ?? "" };
    }
  } catch {
    // unreadable storage (private mode, bad JSON): fall back to defaults
  }
  return { serverUrl: "", token: "" };
}

let current = read();

export function getSettings(): Settings {
  return current;
}

export function saveSettings(next: Settings): void {
  current = { serverUrl: next.serverUrl.trim().replace(/\/+$/, ""), token: next.token.trim() };
  try {
    window.localStorage.setItem(KEY, JSON.stringify(current));
  } catch {
    // storage full or disabled: the settings still hold for this tab
  }
  listeners.forEach((l) => l(current));
}

export function onSettingsChange(listener: Listener): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
