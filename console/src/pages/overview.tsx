// Overview: counts, and everything that needs attention (stalled CA
// rotation, offline proxies, links down, NACKed configuration, ports the
// router cannot bind, connector targets it cannot reach).
import { condition, type Store } from "../store";
import { networkModel } from "../network-model";

export function attention(store: Store): { what: string; href: string }[] {
  const out: { what: string; href: string }[] = [];
  for (const m of store.list("Mesh")) {
    const c = condition(m, "CertificateRotationStalled");
    if (c?.ok) out.push({ what: `Mesh ${m.metadata.name}: CA rotation stalled: ${c.message}`, href: "#/meshes" });
  }
  for (const d of store.list("Dataplane")) {
    const href = `#/dataplanes/${encodeURIComponent(d.metadata.mesh ?? "")}/${encodeURIComponent(d.metadata.name)}`;
    const id = `${d.metadata.mesh}/${d.metadata.name}`;
    if (d.status?.online !== true) out.push({ what: `Dataplane ${id} is offline`, href });
    const ready = condition(d, "Ready");
    if (ready && !ready.ok && ready.reason === "ConfigRejected") out.push({ what: `Dataplane ${id} rejected its configuration (NACK): ${ready.message}`, href });
  }
  const net = networkModel(store);
  const name = (id: string) => net.nodes.find((n) => n.id === id)?.name ?? id;
  for (const e of net.edges) {
    if (e.up) continue;
    const op = condition(store.get("Link", e.name), "Operational");
    out.push({ what: `Link ${e.name} (${name(e.from)} → ${e.toName}) is down${op && !op.ok ? `: ${op.message}` : ""}`, href: "#/network" });
  }
  for (const n of net.nodes) if (!n.reachable) out.push({ what: `Site ${n.name} is not reachable from this site`, href: "#/network" });
  const site = store.list("Site")[0];
  if (site) {
    // The site itself: its router not reporting, a port it cannot bind.
    const ready = condition(site, "Ready");
    if (ready && !ready.ok) out.push({ what: `Site ${site.metadata.name} is not Ready: ${ready.message}`, href: "#/network" });
    // Links other sites dialled into this one.
    for (const l of site.status?.incomingLinks ?? []) {
      if (l.status !== "Operational") out.push({ what: `Incoming link from ${l.remoteSiteName} is down: ${l.message}`, href: "#/network" });
    }
  }
  for (const kind of ["Listener", "MultiKeyListener"] as const) {
    for (const l of store.list(kind)) {
      const c = condition(l, "Ready");
      if (c && !c.ok && c.reason === "BindFailed") out.push({ what: `${kind} ${l.metadata.name}: ${c.message}`, href: "#/services" });
    }
  }
  // A Connector whose target the router cannot connect to (or has none).
  for (const c of store.list("Connector")) {
    const r = condition(c, "Ready");
    if (r && !r.ok && r.reason !== "RouterNotConnected") out.push({ what: `Connector ${c.metadata.name}: ${r.message}`, href: "#/services" });
  }
  return out;
}

export function Overview({ store }: { store: Store }) {
  const dps = store.list("Dataplane");
  const online = dps.filter((d) => d.status?.online === true).length;
  const links = networkModel(store).edges;
  const up = links.filter((l) => l.up).length;
  const site = store.list("Site")[0];
  const items = attention(store);
  const cards: [string, string, string][] = [
    ["Meshes", String(store.list("Mesh").length), "#/meshes"],
    ["Dataplanes online", `${online} / ${dps.length}`, "#/dataplanes"],
    ["Traffic permissions", String(store.list("MeshTrafficPermission").length), "#/policies"],
    ["Sites in network", String(site?.status?.network?.length ?? 0), "#/network"],
    ["Links up", `${up} / ${links.length}`, "#/network"],
    ["Listeners / connectors", `${store.list("Listener").length} / ${store.list("Connector").length}`, "#/services"],
  ];
  return (
    <section>
      <h1>Overview{site ? ` — site ${site.metadata.name}` : ""}</h1>
      <div class="cards">
        {cards.map(([label, value, href]) => (
          <a class="card" href={href}>
            <span class="value">{value}</span>
            <span class="label">{label}</span>
          </a>
        ))}
      </div>
      <h2>Needs attention</h2>
      {items.length === 0 ? (
        <p class="ok" id="attention-none">
          Nothing: every proxy is online, every link (dialled or incoming) is up, the site's router reports, no rotation is stalled and no configuration was rejected.
        </p>
      ) : (
        <ul class="attention" id="attention">
          {items.map((i) => (
            <li>
              <a href={i.href}>{i.what}</a>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
