// Traffic figures of this site's router by routing key
// (`GET /api/v1/traffic`: flows opened and open, bytes each way), polled
// every 5 s while a page shows them. They are counters the router keeps
// in memory and reports every 10 s; the control plane never stores them,
// so they do not come over the watch feed.
import { useEffect, useState } from "preact/hooks";
import { apiGet } from "./api";

export interface KeyTraffic {
  routingKey: string;
  flowsOpened: number;
  flowsActive: number;
  bytesToConnector: number;
  bytesToListener: number;
}

export interface Traffic {
  site?: string;
  reportedAt?: string;
  services: KeyTraffic[];
  message?: string;
}

const EVERY_MS = 5000;

/** The latest figures (undefined until the first answer). */
export function useTraffic(): Traffic | undefined {
  const [traffic, setTraffic] = useState<Traffic>();
  useEffect(() => {
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout>;
    const poll = async () => {
      try {
        setTraffic(await apiGet<Traffic>("/api/v1/traffic", abort.signal));
      } catch (e) {
        if (abort.signal.aborted) return;
        setTraffic({ services: [], message: String(e) });
      }
      timer = setTimeout(poll, EVERY_MS);
    };
    void poll();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, []);
  return traffic;
}

/** `1.2 MB` style size. */
export function bytes(n: number): string {
  const units = ["B", "kB", "MB", "GB", "TB"];
  let i = 0;
  let v = n;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}
