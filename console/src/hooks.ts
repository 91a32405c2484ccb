// Small hooks shared by the pages: the store's version, the clock (for
// countdowns) and the hash route.
import { useEffect, useState } from "preact/hooks";
import type { Store } from "./store";

/** Re-renders the caller whenever the store changes. */
export function useStore(store: Store): number {
  const [, set] = useState(0);
  useEffect(() => store.subscribe(() => set(store.version)), [store]);
  return store.version;
}

/** The current time, updated every second (for countdowns only). */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);
  return now;
}

/** The `#/...` route, split on `/`. */
export function useRoute(): string[] {
  const read = () => location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  const [route, setRoute] = useState(read());
  useEffect(() => {
    const f = () => setRoute(read());
    addEventListener("hashchange", f);
    return () => removeEventListener("hashchange", f);
  }, []);
  return route;
}

/** `1h 2m 3s` style duration of `ms` (negative: `expired`). */
export function countdown(ms: number): string {
  if (ms <= 0) return "expired";
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400);
  s -= d * 86400;
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return [d && `${d}d`, (d || h) && `${h}h`, (d || h || m) && `${m}m`, `${s}s`].filter(Boolean).join(" ");
}

/** A short local date-time for an RFC 3339 string. */
export function when(t?: string): string {
  if (!t) return "–";
  const d = new Date(t);
  return isNaN(d.getTime()) ? t : d.toLocaleString();
}
