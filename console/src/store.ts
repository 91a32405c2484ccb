// The console's copy of the control plane's resources: one list per kind
// at start, then the watch feed (`GET /api/v1/watch?from=R`, long-poll)
// patches it. Nothing polls per row; views re-render when `version` moves.

import { apiGet, ApiError } from "./api";

export interface Resource {
  apiVersion: string;
  kind: string;
  metadata: { name: string; mesh?: string; resourceVersion?: string; labels?: Record<string, string> };
  spec: any;
  status?: any;
}

/** Plural of each kind the console shows, by `kind`. */
export const KINDS: Record<string, string> = {
  Mesh: "meshes",
  Dataplane: "dataplanes",
  MeshTrafficPermission: "meshtrafficpermissions",
  Site: "sites",
  Link: "links",
  Listener: "listeners",
  MultiKeyListener: "multikeylisteners",
  Connector: "connectors",
  MeshService: "meshservices",
  MeshHTTPRoute: "meshhttproutes",
  MeshTCPRoute: "meshtcproutes",
  MeshTimeout: "meshtimeouts",
  MeshRetry: "meshretries",
  MeshRateLimit: "meshratelimits",
  MeshAccessLog: "meshaccesslogs",
  MeshCircuitBreaker: "meshcircuitbreakers",
  MeshFaultInjection: "meshfaultinjections",
  MeshLoadBalancingStrategy: "meshloadbalancingstrategies",
  MeshHealthCheck: "meshhealthchecks",
  MeshTrace: "meshtraces",
  MeshMetric: "meshmetrics",
};

/** The Kuma policies the Policies page lists besides permissions, with
 * what each does (the routes have their own page). */
export const POLICY_KINDS: Record<string, string> = {
  MeshTimeout: "timeouts",
  MeshRetry: "retries",
  MeshRateLimit: "local rate limits",
  MeshAccessLog: "access logs",
  MeshCircuitBreaker: "connection limits and outlier detection",
  MeshFaultInjection: "fault injection",
  MeshLoadBalancingStrategy: "load balancing",
  MeshHealthCheck: "active health checks",
  MeshTrace: "tracing",
  MeshMetric: "metrics (stored, not applied yet)",
};

export type Kind = keyof typeof KINDS;
export type Feed = "connecting" | "live" | "retrying";

const key = (r: Resource) => `${r.metadata.mesh ?? ""}/${r.metadata.name}`;
const rev = (r: Resource) => Number(r.metadata.resourceVersion ?? 0);

export class Store {
  items = new Map<string, Map<string, Resource>>();
  version = 0;
  revision = 0;
  feed: Feed = "connecting";
  feedError = "";
  /** Link name -> remote site id, remembered while the console runs, so a
   * link that went down still points at the site it joined. */
  linkPeers = new Map<string, { id: string; name: string }>();
  /** Site id -> name of every site seen in the network this session. */
  knownSites = new Map<string, string>();
  /** Called when the watch feed is refused with 401 (the token changed). */
  onUnauthorized?: (message: string) => void;
  private listeners = new Set<() => void>();
  private abort = new AbortController();

  constructor() {
    for (const k of Object.keys(KINDS)) this.items.set(k, new Map());
  }

  list(kind: Kind): Resource[] {
    return [...this.items.get(kind)!.values()];
  }

  get(kind: Kind, name: string, mesh?: string): Resource | undefined {
    return this.items.get(kind)!.get(`${mesh ?? ""}/${name}`);
  }

  subscribe(f: () => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  private changed() {
    this.version++;
    for (const f of this.listeners) f();
  }

  /** Lists every kind, then follows the watch feed until `stop`. Rejects
   * only when the first lists fail (e.g. 401), so login can say why. */
  async start(): Promise<void> {
    await this.relist();
    this.feed = "live";
    this.changed();
    void this.follow();
  }

  /** Lists every kind and replaces what the console holds; the watch
   * resumes from the oldest list's revision. */
  private async relist(): Promise<void> {
    const signal = this.abort.signal;
    let from = Infinity;
    const list = async ([kind, plural]: [string, string]) => {
      const l = await apiGet<{ items: Resource[]; revision: string }>(`/api/v1/${plural}`, signal);
      from = Math.min(from, Number(l.revision));
      return [kind, l.items] as const;
    };
    // One request first, so a wrong token costs one 401, not one per kind.
    const [first, ...rest] = Object.entries(KINDS);
    const lists = [await list(first), ...(await Promise.all(rest.map(list)))];
    for (const [kind, items] of lists) {
      const m = this.items.get(kind)!;
      m.clear();
      for (const r of items) m.set(key(r), r);
    }
    this.revision = from;
    this.remember();
  }

  stop() {
    this.abort.abort();
  }

  private async follow() {
    const signal = this.abort.signal;
    let backoff = 500;
    while (!signal.aborted) {
      try {
        const w = await apiGet<{ events: { revision: string; type: string; resource: Resource }[]; revision: string }>(
          `/api/v1/watch?from=${this.revision}&timeout=30s`,
          signal,
        );
        for (const e of w.events) this.apply(e.type, e.resource, Number(e.revision));
        this.revision = Math.max(this.revision, Number(w.revision));
        backoff = 500;
        if (this.feed !== "live" || w.events.length) {
          this.feed = "live";
          this.feedError = "";
          this.remember();
          this.changed();
        }
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof ApiError && e.status === 401) {
          // The admin token changed under us: back to the login form.
          this.onUnauthorized?.(e.message);
          return;
        }
        if (e instanceof ApiError && e.status === 410) {
          // The console fell behind the change feed's window (compacted):
          // list everything again, as a Kubernetes client does on 410
          // Gone, instead of asking for the same revision forever.
          try {
            await this.relist();
            this.feed = "live";
            this.feedError = "";
            this.changed();
            continue;
          } catch (e2) {
            if (signal.aborted) return;
            e = e2;
          }
        }
        this.feed = "retrying";
        this.feedError = e instanceof ApiError ? e.message : String(e);
        this.changed();
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 10_000);
      }
    }
  }

  private apply(type: string, r: Resource, revision: number) {
    const m = this.items.get(r.kind);
    if (!m) return; // a kind the console does not show
    const k = key(r);
    const old = m.get(k);
    if (type === "Deleted") {
      if (!old || rev(old) <= revision) m.delete(k);
    } else if (!old || rev(old) <= rev(r)) {
      m.set(k, r);
    }
  }

  private remember() {
    for (const s of this.list("Site")) {
      for (const rec of s.status?.network ?? []) {
        if (rec.id) this.knownSites.set(rec.id, rec.name ?? rec.id);
        for (const l of rec.links ?? []) {
          if (l.remoteSiteId) this.linkPeers.set(`${rec.id}/${l.name}`, { id: l.remoteSiteId, name: l.remoteSiteName ?? "" });
        }
      }
    }
  }
}

/** Whether condition `type` of `r` is True (undefined when absent). */
export function condition(r: Resource | undefined, type: string): { ok: boolean; reason: string; message: string } | undefined {
  const c = (r?.status?.conditions ?? []).find((c: any) => c.type === type);
  return c ? { ok: c.status === "True", reason: c.reason ?? "", message: c.message ?? "" } : undefined;
}
