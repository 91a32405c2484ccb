// The network graph's model, from this site's `Site.status.network` (every
// reachable site and its links) and this site's Link resources (cost, and
// state while the router is not reporting). Sites seen earlier in the
// session but no longer reachable stay in the graph as unreachable.
import { condition, type Store } from "./store";

export interface SiteNode {
  id: string;
  name: string;
  local: boolean;
  reachable: boolean;
}
export interface LinkEdge {
  id: string;
  name: string;
  from: string;
  to: string;
  toName: string;
  up: boolean;
  cost: string;
}

export function networkModel(store: Store): { nodes: SiteNode[]; edges: LinkEdge[] } {
  const site = store.list("Site")[0];
  const localId: string = site?.status?.siteId ?? "local";
  const records: any[] = site?.status?.network ?? [];
  const nodes = new Map<string, SiteNode>();
  for (const [id, name] of store.knownSites) nodes.set(id, { id, name, local: id === localId, reachable: false });
  if (site) nodes.set(localId, { id: localId, name: site.metadata.name, local: true, reachable: true });
  for (const r of records) nodes.set(r.id, { id: r.id, name: r.name ?? r.id, local: r.id === localId, reachable: true });
  const edges = new Map<string, LinkEdge>();
  const addEdge = (from: string, name: string, remoteId: string | undefined, remoteName: string | undefined, up: boolean, cost: string) => {
    const peer = remoteId ? { id: remoteId, name: remoteName ?? "" } : store.linkPeers.get(`${from}/${name}`);
    const to = peer?.id ?? `?${from}/${name}`;
    // A link that never reached its peer has no peer name yet: name the link.
    if (!nodes.has(to)) nodes.set(to, { id: to, name: peer?.name || `peer of link ${name}`, local: false, reachable: false });
    edges.set(`${from}/${name}`, { id: `${from}/${name}`, name, from, to, toName: nodes.get(to)!.name, up, cost });
  };
  const localLinks = new Map(store.list("Link").map((l) => [l.metadata.name, l]));
  for (const r of records) {
    for (const l of r.links ?? []) {
      const res = r.id === localId ? localLinks.get(l.name) : undefined;
      addEdge(r.id, l.name, l.remoteSiteId || undefined, l.remoteSiteName, l.operational === true, res ? String(res.spec?.cost ?? 1) : "–");
    }
  }
  for (const [name, l] of localLinks) {
    if (edges.has(`${localId}/${name}`)) continue;
    addEdge(localId, name, l.status?.remoteSiteId, l.status?.remoteSiteName, condition(l, "Operational")?.ok === true, String(l.spec?.cost ?? 1));
  }
  // A link is reported by both routers (the dialing side names it after its
  // Link; the accepting side after its RouterAccess): draw one edge per pair
  // of sites, named after the Link when this site holds it, up only while
  // every report says so.
  const pairs = new Map<string, LinkEdge>();
  for (const e of edges.values()) {
    const pair = [e.from, e.to].sort().join(" ");
    const seen = pairs.get(pair);
    if (!seen) pairs.set(pair, e);
    else {
      // Prefer the dialing side: its edge carries a Link's name (names have
      // no "/"; the accepting side's are "<access>/<role>/<id>") and cost.
      const rank = (x: LinkEdge) => (x.cost !== "–" ? 2 : 0) + (x.name.includes("/") ? 0 : 1);
      const keep = rank(e) > rank(seen) ? e : seen;
      pairs.set(pair, { ...keep, up: seen.up && e.up });
    }
  }
  return { nodes: [...nodes.values()], edges: [...pairs.values()] };
}
