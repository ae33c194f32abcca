// How numbers, times and durations read in the dashboard.

export function fmtDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "—";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(seconds < 10 ? 2 : 1)} s`;
  const m = Math.floor(seconds / 60);
  if (m < 60) return `${m} m ${Math.round(seconds % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} m`;
}

// Made once: what toLocaleTimeString / toLocaleDateString would give, without building a
// formatter per call (a table of rows calls this often).
let timeFormat: Intl.DateTimeFormat | undefined;
let dateFormat: Intl.DateTimeFormat | undefined;

export function fmtTime(epoch: number | null | undefined): string {
  if (epoch === null || epoch === undefined) return "—";
  const d = new Date(epoch * 1000);
  const now = new Date();
  timeFormat ??= new Intl.DateTimeFormat(undefined, { hour12: false, hour: "numeric", minute: "numeric", second: "numeric" });
  const time = timeFormat.format(d);
  if (d.toDateString() === now.toDateString()) return time;
  dateFormat ??= new Intl.DateTimeFormat(undefined, { year: "numeric", month: "numeric", day: "numeric" });
  return `${dateFormat.format(d)} ${time}`;
}

export function fmtNumber(value: number | null | undefined, digits = 3): string {
  if (value === null || value === undefined) return "—";
  if (!Number.isFinite(value)) return String(value);
  if (Number.isInteger(value)) return value.toLocaleString();
  const abs = Math.abs(value);
  if (abs !== 0 && (abs < 1e-3 || abs >= 1e6)) return value.toExponential(2);
  return value.toFixed(digits).replace(/\.?0+$/, "");
}

export function fmtAge(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return `${seconds.toFixed(1)} s ago`;
  return `${fmtDuration(seconds)} ago`;
}

export const STATUS_COLORS: Record<string, string> = {
  queuing: "gray",
  preparing: "cyan",
  running: "blue",
  requeuing: "orange",
  succeeded: "green",
  failed: "red",
  cancelled: "dark",
  timeout: "orange",
  unresponsive: "grape",
  idle: "teal",
  busy: "blue",
  offline: "gray",
  ok: "green",
  error: "red",
  unset: "gray",
};
