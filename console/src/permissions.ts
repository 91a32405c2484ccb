// Who may talk to whom in a mesh, from its MeshTrafficPermissions, with the
// rules the translator applies (crates/xds/src/translate/rbac.rs, Kuma's
// merge order): with mTLS on, the permissions whose targetRef selects a
// destination inbound are ordered by target specificity (Mesh < Dataplane <
// labels < labels+sectionName < name < name+sectionName < MeshSubset <
// MeshService), then by name (the one sorting first wins); their from[]
// lists are concatenated and each client gets the verdict of its last
// matching entry; a client no entry matches is denied. Once a selecting
// permission has Kuma's `rules` (SPIFFE ID matches), the rules of all of
// them decide instead: a deny match refuses, then an allow match lets in,
// else denied. A top-level `proxyTypes` without Sidecar selects no
// inbound. Gateway Dataplanes are sources only (they have no inbounds).
// With mTLS off nothing is enforced.
import type { Resource, Store } from "./store";

export type Verdict = "Allow" | "Deny" | "ShadowDeny" | "DefaultDeny" | "Open" | "Mixed";

type Tags = Record<string, string>;
/** One inbound of a Dataplane, as a targetRef sees it. */
type Inbound = { dataplane: string; labels: Tags; port: number; name?: string; tags: Tags };
const service = (t: Tags) => t["kuma.io/service"] ?? t["meshlink.dev/service"];
const NAMESPACE_LABEL = "k8s.kuma.io/namespace";

function matches(target: any, tags: Tags): boolean {
  if (!target || !target.kind || target.kind === "Mesh") return true;
  if (target.kind === "MeshService") return service(tags) === target.name;
  if (target.kind === "MeshSubset") return Object.entries(target.tags ?? {}).every(([k, v]) => tags[k] === v);
  return false;
}

/** Whether a top-level targetRef selects the inbound. */
function selects(target: any, ib: Inbound): boolean {
  if (Array.isArray(target?.proxyTypes) && !target.proxyTypes.includes("Sidecar")) return false;
  if (target?.kind !== "Dataplane") return matches(target, ib.tags);
  if (target.name && target.name !== ib.dataplane) return false;
  if (target.namespace && ib.labels[NAMESPACE_LABEL] !== target.namespace) return false;
  if (!Object.entries(target.labels ?? {}).every(([k, v]) => ib.labels[k] === v)) return false;
  // sectionName names an inbound by its name, else by its port.
  return !target.sectionName || target.sectionName === ib.name || target.sectionName === String(ib.port);
}

/** Kuma's priority of a top-level target (higher wins). */
function rank(target: any): number {
  switch (target?.kind) {
    case "Dataplane": {
      const section = target.sectionName ? 1 : 0;
      return target.name ? 4 + section : target.labels ? 2 + section : 1 + section;
    }
    case "MeshSubset":
      return 6;
    case "MeshService":
      return 7;
    default:
      return 0;
  }
}

/** The services of a mesh's gateway Dataplanes and their tags: sources only. */
function gateways(store: Store, mesh: string): Map<string, Tags[]> {
  const out = new Map<string, Tags[]>();
  for (const d of store.list("Dataplane")) {
    const tags = d.spec?.networking?.gateway?.tags;
    const s = d.metadata.mesh === mesh && tags ? service(tags) : undefined;
    if (!s) continue;
    if (!out.has(s)) out.set(s, []);
    out.get(s)!.push(tags);
  }
  return out;
}

/** Whether a `rules` match (`{spiffeID: {type, value}}`) names `id`. */
function ruleMatches(m: any, id: string): boolean {
  const want = m?.spiffeID;
  if (!want?.value) return false;
  return want.type === "Prefix" ? id.startsWith(want.value) : id === want.value;
}

/** The verdict of Kuma's `rules` of every selected permission for `id`. */
function ruleVerdict(rules: any[], id: string): Verdict {
  const confs = rules.map((r) => r?.default ?? {});
  if (confs.some((c) => (c.deny ?? []).some((m: any) => ruleMatches(m, id)))) return "Deny";
  if (confs.some((c) => (c.allow ?? []).some((m: any) => ruleMatches(m, id)))) return "Allow";
  if (confs.some((c) => (c.allowWithShadowDeny ?? []).some((m: any) => ruleMatches(m, id)))) return "ShadowDeny";
  return "DefaultDeny";
}

/** The services of a mesh and their inbounds. */
function inbounds(store: Store, mesh: string): Map<string, Inbound[]> {
  const out = new Map<string, Inbound[]>();
  for (const d of store.list("Dataplane")) {
    if (d.metadata.mesh !== mesh) continue;
    for (const i of d.spec?.networking?.inbound ?? []) {
      // An inbound without a service tag (selected by a MeshService) is
      // served under its Dataplane's name, as the sidecars do.
      const s = service(i.tags ?? {}) ?? d.metadata.name;
      if (!out.has(s)) out.set(s, []);
      out.get(s)!.push({ dataplane: d.metadata.name, labels: d.metadata.labels ?? {}, port: i.port, name: i.name, tags: i.tags ?? {} });
    }
  }
  return out;
}

function verdict(policies: Resource[], src: string, srcId: string, srcTags: Tags[], dst: Inbound): Verdict {
  const selected = policies
    .map((p) => ({ name: p.metadata.name as string, spec: p.spec, target: p.spec?.targetRef ?? { kind: "Mesh" } }))
    .filter((p) => selects(p.target, dst));
  selected.sort((a, b) => rank(a.target) - rank(b.target) || (a.name < b.name ? 1 : a.name > b.name ? -1 : 0));
  const ruled = selected.flatMap((p) => p.spec?.rules ?? []);
  if (ruled.length > 0) return ruleVerdict(ruled, srcId);
  const rules = selected.flatMap((p) => p.spec?.from ?? []);
  for (const rule of rules.reverse()) {
    const t = rule.targetRef;
    const hit = t?.kind === "MeshService" ? t.name === src : srcTags.some((tags) => matches(t, tags));
    if (!hit) continue;
    const a = rule.default?.action;
    if (a === "Deny") return "Deny";
    if (a === "Allow") return "Allow";
    if (a === "AllowWithShadowDeny") return "ShadowDeny";
  }
  return "DefaultDeny";
}

/**
 * The matrix of `mesh`: sources (services with inbounds, then gateway
 * services), destinations (services with inbounds), and the verdict for each
 * source → destination.
 */
export function permissionMatrix(
  store: Store,
  mesh: string,
): { sources: string[]; services: string[]; cell: (src: string, dst: string) => Verdict } {
  const m = store.get("Mesh", mesh);
  const mtls = !!m?.spec?.mtls?.enabledBackend;
  const trustDomain = m?.spec?.trustDomain ?? mesh;
  const byService = inbounds(store, mesh);
  const policies = store.list("MeshTrafficPermission").filter((p) => p.metadata.mesh === mesh);
  for (const p of policies) {
    for (const t of [p.spec?.targetRef, ...(p.spec?.from ?? []).map((f: any) => f.targetRef)])
      if (t?.kind === "MeshService" && t.name && !byService.has(t.name))
        byService.set(t.name, [{ dataplane: "", labels: {}, port: 0, tags: { "kuma.io/service": t.name } }]);
  }
  const services = [...byService.keys()].sort();
  const gatewayTags = gateways(store, mesh);
  const sources = [...services, ...[...gatewayTags.keys()].filter((g) => !byService.has(g)).sort()];
  return {
    sources,
    services,
    cell(src, dst) {
      if (!mtls) return "Open";
      const srcTags = [...(byService.get(src) ?? []).map((i) => i.tags), ...(gatewayTags.get(src) ?? [])];
      const srcId = `spiffe://${trustDomain}/${src}`;
      const verdicts = new Set(byService.get(dst)!.map((ib) => verdict(policies, src, srcId, srcTags, ib)));
      return verdicts.size === 1 ? [...verdicts][0] : "Mixed";
    },
  };
}
