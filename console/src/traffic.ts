// Traffic figures (`GET /api/v1/traffic`), polled every 5 s while a page
// shows them: this site's router by routing key (flows opened and open,
// bytes each way) and by link (bytes each way), and each sidecar by
// inbound (connections, bytes each way). They are counters the router and
// the sidecars keep in memory and report every 10 s; the control plane
// never stores them, so they do not come over the watch feed.
import { useEffect, useState } from "preact/hooks";
import { apiGet } from "./api";

export interface KeyTraffic {
  routingKey: string;
  flowsOpened: number;
  flowsActive: number;
  bytesToConnector: number;
  bytesToListener: number;
}

export interface LinkTraffic {
  name: string;
  /** The router (site id) at the other end. */
  remoteSiteId: string;
  bytesSent: number;
  bytesReceived: number;
}

export interface InboundTraffic {
  port: number;
  connectionsOpened: number;
  connectionsActive: number;
  bytesReceived: number;
  bytesSent: number;
}

export interface DataplaneTraffic {
  mesh: string;
  name: string;
  reportedAt: string;
  inbounds: InboundTraffic[];
}

export interface Traffic {
  site?: string;
  reportedAt?: string;
  services: KeyTraffic[];
  links?: LinkTraffic[];
  dataplanes?: DataplaneTraffic[];
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

/** One mesh service's traffic: the sum over its Dataplanes' inbounds. */
export interface ServiceTraffic {
  connectionsOpened: number;
  connectionsActive: number;
  bytesReceived: number;
  bytesSent: number;
  /** Dataplanes whose sidecar reported figures. */
  reporting: number;
}

/** Sums `dataplanes`' inbound figures per `mesh/service`, where
 * `serviceOf(mesh, dataplane, port)` names the service an inbound serves. */
export function serviceTraffic(
  dataplanes: DataplaneTraffic[],
  serviceOf: (mesh: string, dataplane: string, port: number) => string | undefined,
): Map<string, ServiceTraffic> {
  const out = new Map<string, ServiceTraffic>();
  for (const dp of dataplanes) {
    const counted = new Set<string>();
    for (const i of dp.inbounds) {
      const service = serviceOf(dp.mesh, dp.name, i.port);
      if (!service) continue;
      const k = `${dp.mesh}/${service}`;
      const t = out.get(k) ?? { connectionsOpened: 0, connectionsActive: 0, bytesReceived: 0, bytesSent: 0, reporting: 0 };
      t.connectionsOpened += i.connectionsOpened;
      t.connectionsActive += i.connectionsActive;
      t.bytesReceived += i.bytesReceived;
      t.bytesSent += i.bytesSent;
      if (!counted.has(k)) t.reporting++;
      counted.add(k);
      out.set(k, t);
    }
  }
  return out;
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
