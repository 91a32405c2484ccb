// Who may talk to whom in a mesh, from its MeshTrafficPermissions, with the
// rules the translator applies (crates/xds/src/translate/rbac.rs): with mTLS
// on, a destination inbound admits the sources of every Allow rule of every
// policy whose targetRef matches its tags, Deny rules win, and anything else
// is denied; with mTLS off nothing is enforced.
import type { Resource, Store } from "./store";

export type Verdict = "Allow" | "Deny" | "ShadowDeny" | "DefaultDeny" | "Open" | "Mixed";

type Tags = Record<string, string>;
const service = (t: Tags) => t["kuma.io/service"] ?? t["meshlink.dev/service"];

function matches(target: any, tags: Tags): boolean {
  if (!target || !target.kind || target.kind === "Mesh") return true;
  if (target.kind === "MeshService") return service(tags) === target.name;
  if (target.kind === "MeshSubset") return Object.entries(target.tags ?? {}).every(([k, v]) => tags[k] === v);
  return false;
}

/** The services of a mesh and the tags of each of their inbounds. */
function inbounds(store: Store, mesh: string): Map<string, Tags[]> {
  const out = new Map<string, Tags[]>();
  for (const d of store.list("Dataplane")) {
    if (d.metadata.mesh !== mesh) continue;
    for (const i of d.spec?.networking?.inbound ?? []) {
      const s = service(i.tags ?? {});
      if (!s) continue;
      if (!out.has(s)) out.set(s, []);
      out.get(s)!.push(i.tags);
    }
  }
  return out;
}

function verdict(policies: Resource[], src: string, srcTags: Tags[], dst: Tags): Verdict {
  let allow = false;
  let shadow = false;
  let deny = false;
  for (const p of policies) {
    if (!matches(p.spec?.targetRef, dst)) continue;
    for (const rule of p.spec?.from ?? []) {
      const t = rule.targetRef;
      const hit = t?.kind === "MeshService" ? t.name === src : srcTags.some((tags) => matches(t, tags));
      if (!hit) continue;
      const a = rule.default?.action;
      if (a === "Deny") deny = true;
      else if (a === "Allow") allow = true;
      else if (a === "AllowWithShadowDeny") shadow = true;
    }
  }
  return deny ? "Deny" : allow ? "Allow" : shadow ? "ShadowDeny" : "DefaultDeny";
}

/** The matrix of `mesh`: services, and the verdict for each source → destination. */
export function permissionMatrix(store: Store, mesh: string): { services: string[]; cell: (src: string, dst: string) => Verdict } {
  const m = store.get("Mesh", mesh);
  const mtls = !!m?.spec?.mtls?.enabledBackend;
  const byService = inbounds(store, mesh);
  const policies = store.list("MeshTrafficPermission").filter((p) => p.metadata.mesh === mesh);
  for (const p of policies) {
    for (const t of [p.spec?.targetRef, ...(p.spec?.from ?? []).map((f: any) => f.targetRef)])
      if (t?.kind === "MeshService" && t.name && !byService.has(t.name)) byService.set(t.name, [{ "kuma.io/service": t.name }]);
  }
  const services = [...byService.keys()].sort();
  return {
    services,
    cell(src, dst) {
      if (!mtls) return "Open";
      const verdicts = new Set(byService.get(dst)!.map((tags) => verdict(policies, src, byService.get(src)!, tags)));
      return verdicts.size === 1 ? [...verdicts][0] : "Mixed";
    },
  };
}
