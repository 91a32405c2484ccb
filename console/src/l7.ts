// The L7 view of each mesh destination, from the REST lists the store
// keeps (Dataplanes, MeshServices, MeshHTTPRoutes, MeshTCPRoutes,
// MeshTimeouts, MeshRetries): its protocol (docs/resources.md, "Routing,
// timeouts and retries": HTTP only when every inbound agrees), the routes
// whose `to[].targetRef` selects it, and the timeout and retry values every
// caller gets (Kuma's merge order over the policies whose top-level
// targetRef is the Mesh, then Kuma's defaults). Policies that select only
// some callers are listed, not folded: what they give depends on the
// caller (`meshlink inspect dataplane NAME --rules` shows one caller's).
// Pure: no fetches, no clock.
import { condition, type Resource, type Store } from "./store";

/** A destination: a `kuma.io/service` tag value or a MeshService. */
export interface Destination {
  mesh: string;
  name: string;
  /** `http`, `http2`, `grpc` or `tcp`, as the sidecars serve it. */
  protocol: string;
  /** Why it is TCP although something declared HTTP, if so. */
  mismatch?: string;
  routes: RouteView[];
  timeouts: Field[];
  retries: Field[];
  /** Timeout and retry policies that select only some callers. */
  partial: string[];
}

export interface RouteView {
  kind: "MeshHTTPRoute" | "MeshTCPRoute";
  name: string;
  callers: string;
  shadow: boolean;
  /** Whether the sidecars apply it (see `notApplied`). */
  applied: boolean;
  notApplied: string;
  rules: { matches: string; backends: { name: string; weight: number; share: number }[]; filters: string[] }[];
}

/** One effective value and who set it. */
export interface Field {
  field: string;
  value: string;
  source: string;
}

const HTTP = new Set(["http", "http2", "grpc"]);
const family = (p: string | undefined) => (p && HTTP.has(p) ? p : "tcp");

/** Kuma's defaults (mesh-timeout-all-default, mesh-retry-all-default). */
const TIMEOUT_DEFAULTS: [string, string][] = [
  ["connectionTimeout", "5s"],
  ["idleTimeout", "1h"],
  ["http.requestTimeout", "15s"],
  ["http.streamIdleTimeout", "30m"],
  ["http.maxStreamDuration", "disabled"],
  ["http.maxConnectionDuration", "disabled"],
  ["http.requestHeadersTimeout", "disabled"],
];
const RETRY_DEFAULTS: Record<string, [string, string][]> = {
  // Without a MeshRetry a sidecar makes 3 connect attempts.
  tcp: [["maxConnectAttempt", "3"]],
  http: [
    ["numRetries", "5"],
    ["perTryTimeout", "16s"],
    ["backOff", "25ms–250ms"],
    ["retryOn", "GatewayError, ConnectFailure, RefusedStream"],
  ],
  grpc: [
    ["numRetries", "5"],
    ["perTryTimeout", "16s"],
    ["backOff", "25ms–250ms"],
    ["retryOn", "Canceled, ResourceExhausted, Unavailable"],
  ],
};

/** `Mesh`, `Dataplane app=web`, `MeshService backend`… */
export function describeRef(ref: any): string {
  if (!ref || !ref.kind || ref.kind === "Mesh") return "every caller (Mesh)";
  const labels = Object.entries(ref.labels ?? ref.tags ?? {}).map(([k, v]) => `${k}=${v}`);
  return [ref.kind, ref.name, labels.join(","), ref.sectionName && `:${ref.sectionName}`].filter(Boolean).join(" ");
}

function selects(ref: any, d: { name: string; labels: Record<string, string> }): boolean {
  if (ref?.kind !== "MeshService") return false;
  if (ref.name) return ref.name === d.name;
  return Object.entries(ref.labels ?? {}).every(([k, v]) => d.labels[k] === v) && !!ref.labels;
}

function matchText(m: any): string {
  const parts: string[] = [];
  if (m.path) parts.push(`${m.path.type ?? "PathPrefix"} ${m.path.value}`);
  if (m.method) parts.push(m.method);
  for (const h of m.headers ?? []) parts.push(`header ${h.name} ${h.type ?? "Exact"}${h.value !== undefined ? ` ${h.value}` : ""}`);
  for (const q of m.queryParams ?? []) parts.push(`query ${q.name} ${q.type ?? "Exact"} ${q.value}`);
  return parts.join(" ∧ ") || "everything";
}

function backendsOf(refs: any[] | undefined, fallback: string) {
  const list = (refs ?? []).map((b) => ({
    name: `${b.name ?? describeRef(b)}${b.port ? `:${b.port}` : ""}`,
    weight: b.weight ?? 1,
  }));
  if (!list.length) list.push({ name: fallback, weight: 1 });
  const total = list.reduce((s, b) => s + b.weight, 0) || 1;
  return list.map((b) => ({ ...b, share: Math.round((1000 * b.weight) / total) / 10 }));
}

function routesFor(store: Store, d: Destination, labels: Record<string, string>): RouteView[] {
  const out: RouteView[] = [];
  for (const kind of ["MeshHTTPRoute", "MeshTCPRoute"] as const) {
    for (const r of store.list(kind)) {
      if (r.metadata.mesh !== d.mesh) continue;
      const entries = (r.spec?.to ?? []).filter((t: any) => selects(t.targetRef, { name: d.name, labels }));
      if (!entries.length) continue;
      const tcp = kind === "MeshTCPRoute";
      // Kuma's rule: a MeshHTTPRoute for the same destination wins over a
      // MeshTCPRoute on an HTTP service; on a TCP service only MeshTCPRoute applies.
      const httpRouteWins =
        tcp &&
        d.protocol !== "tcp" &&
        store
          .list("MeshHTTPRoute")
          .some((h) => h.metadata.mesh === d.mesh && (h.spec?.to ?? []).some((t: any) => selects(t.targetRef, { name: d.name, labels })));
      const notApplied = httpRouteWins
        ? "stored; ignored: a MeshHTTPRoute for this destination wins"
        : !tcp && d.protocol === "tcp"
          ? `stored; not applied: ${d.name} is served as TCP (MeshHTTPRoutes apply to HTTP services)`
          : "";
      const rules = entries.flatMap((t: any) =>
        (tcp ? (t.rules ?? []).slice(0, 1) : (t.rules ?? [])).map((rule: any) => ({
          matches: tcp ? (d.protocol === "tcp" ? "every connection" : "every request") : (rule.matches ?? []).map(matchText).join(" or "),
          backends: backendsOf(rule.default?.backendRefs, d.name),
          filters: (rule.default?.filters ?? []).map((f: any) => f.type),
        })),
      );
      out.push({
        kind,
        name: r.metadata.name,
        callers: describeRef(r.spec?.targetRef),
        shadow: r.metadata.labels?.["kuma.io/effect"] === "shadow",
        applied: !notApplied,
        notApplied,
        rules,
      });
    }
  }
  return out.sort((a, b) => a.name.localeCompare(b.name));
}

/** JSON merge patch (RFC 7386), recording who set each leaf. */
function patch(into: any, from: any, who: string, src: Record<string, string>, path = "") {
  for (const [k, v] of Object.entries(from ?? {})) {
    const p = path ? `${path}.${k}` : k;
    if (v && typeof v === "object" && !Array.isArray(v)) {
      if (typeof into[k] !== "object" || into[k] === null) into[k] = {};
      patch(into[k], v, who, src, p);
    } else if (v === null) delete into[k];
    else {
      into[k] = v;
      src[p] = who;
    }
  }
}

const get = (o: any, path: string) => path.split(".").reduce((x, k) => x?.[k], o);
const show = (v: any) =>
  Array.isArray(v) ? v.join(", ") : typeof v === "object" ? `${v.baseInterval ?? "25ms"}–${v.maxInterval ?? "…"}` : String(v);

/** Folds the `to[]` defaults of `kind` that apply to every caller of `d`. */
function fold(store: Store, kind: "MeshTimeout" | "MeshRetry", d: Destination, labels: Record<string, string>) {
  const entries: { rank: number; name: string; def: any }[] = [];
  const partial: string[] = [];
  for (const r of store.list(kind)) {
    if (r.metadata.mesh !== d.mesh || r.metadata.labels?.["kuma.io/effect"] === "shadow") continue;
    const everyone = !r.spec?.targetRef?.kind || r.spec.targetRef.kind === "Mesh";
    for (const t of r.spec?.to ?? []) {
      const ref = t.targetRef ?? {};
      const rank = ref.kind === "Mesh" ? 0 : selects(ref, { name: d.name, labels }) ? (ref.sectionName ? 2 : 1) : -1;
      if (rank < 0) continue;
      if (everyone) entries.push({ rank, name: r.metadata.labels?.["kuma.io/display-name"] ?? r.metadata.name, def: t.default });
      else partial.push(`${kind} ${r.metadata.name} (for ${describeRef(r.spec.targetRef)})`);
    }
  }
  // Lowest priority first: Mesh before MeshService; names in inverted order.
  entries.sort((a, b) => a.rank - b.rank || b.name.localeCompare(a.name));
  const merged: any = {};
  const src: Record<string, string> = {};
  for (const e of entries) patch(merged, e.def, e.name, src);
  return { merged, src, partial };
}

function fields(defaults: [string, string][], merged: any, src: Record<string, string>, prefix = ""): Field[] {
  // Kuma's default policies stand in, except for TCP connect attempts,
  // where a sidecar without a MeshRetry makes its own 3.
  const unset = prefix === "tcp" ? "meshlink default" : "Kuma default";
  return defaults.map(([f, dflt]) => {
    const p = prefix ? `${prefix}.${f}` : f;
    const v = get(merged, p);
    return v === undefined ? { field: p, value: dflt, source: unset } : { field: p, value: show(v), source: src[p] ?? src[`${p}.baseInterval`] ?? "policy" };
  });
}

/** Every destination of every mesh, sorted by mesh and name. */
export function destinations(store: Store): Destination[] {
  const found = new Map<string, { mesh: string; name: string; declared: Map<string, string[]>; ms?: Resource }>();
  const at = (mesh: string, name: string) => {
    const k = `${mesh}/${name}`;
    if (!found.has(k)) found.set(k, { mesh, name, declared: new Map() });
    return found.get(k)!;
  };
  for (const dp of store.list("Dataplane")) {
    for (const i of dp.spec?.networking?.inbound ?? []) {
      const svc = i.tags?.["kuma.io/service"];
      if (!svc) continue;
      const p = family(i.tags?.["kuma.io/protocol"]);
      const e = at(dp.metadata.mesh ?? "default", svc);
      e.declared.set(p, [...(e.declared.get(p) ?? []), dp.metadata.name]);
    }
  }
  for (const ms of store.list("MeshService")) at(ms.metadata.mesh ?? "default", ms.metadata.name).ms = ms;
  const out: Destination[] = [];
  for (const e of found.values()) {
    let protocol: string;
    let mismatch: string | undefined;
    if (e.ms) {
      const ports = (e.ms.spec?.ports ?? []).map((p: any) => family(p.appProtocol));
      const c = condition(e.ms, "ProtocolAgreed");
      protocol = c && !c.ok ? "tcp" : [...new Set(ports)].join("/") || "tcp";
      if (c && !c.ok) mismatch = c.message;
    } else {
      const kinds = [...e.declared.keys()];
      protocol = kinds.length === 1 ? kinds[0] : "tcp";
      if (kinds.length > 1)
        mismatch = `its inbounds disagree (${kinds.map((k) => `${k}: ${e.declared.get(k)!.join(", ")}`).join("; ")}); set the same kuma.io/protocol on all`;
    }
    const labels = e.ms?.metadata.labels ?? {};
    const d: Destination = { mesh: e.mesh, name: e.name, protocol, mismatch, routes: [], timeouts: [], retries: [], partial: [] };
    d.routes = routesFor(store, d, labels);
    const t = fold(store, "MeshTimeout", d, labels);
    d.timeouts = fields(TIMEOUT_DEFAULTS, t.merged, t.src);
    const block = protocol === "grpc" ? "grpc" : protocol === "tcp" ? "tcp" : "http";
    const r = fold(store, "MeshRetry", d, labels);
    d.retries = fields(RETRY_DEFAULTS[block], r.merged, r.src, block);
    d.partial = [...t.partial, ...r.partial];
    out.push(d);
  }
  return out.sort((a, b) => a.mesh.localeCompare(b.mesh) || a.name.localeCompare(b.name));
}
