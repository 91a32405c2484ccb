// Services: the mesh services with health (mesh-services.tsx); then
// Listeners and Connectors by routing key, and where each key resolves
// (the sites whose router reports a connector for it); then the mesh
// destinations with their routes and L7 policies (service-routes.tsx).
import { condition, type Resource, type Store } from "../store";
import { MeshServices } from "./mesh-services";
import { ServiceRoutes } from "./service-routes";
import { bytes, useTraffic } from "../traffic";

function names(list: any[] | undefined): string {
  return (list ?? []).map((x) => (typeof x === "string" ? x : (x.name ?? x.host ?? JSON.stringify(x)))).join(", ");
}

/** A Connector the router cannot connect to (or that has no target); not
 * while the router is not reporting (the Site says so). */
function unreachable(c: Resource): boolean {
  const r = condition(c, "Ready");
  return !!r && !r.ok && r.reason !== "RouterNotConnected";
}

export function Services({ store }: { store: Store }) {
  const site = store.list("Site")[0];
  const keys = new Map<string, { listeners: Resource[]; connectors: Resource[]; sites: string[] }>();
  const entry = (k: string) => {
    if (!keys.has(k)) keys.set(k, { listeners: [], connectors: [], sites: [] });
    return keys.get(k)!;
  };
  for (const l of store.list("Listener")) entry(l.spec?.routingKey ?? "?").listeners.push(l);
  for (const c of store.list("Connector")) entry(c.spec?.routingKey ?? "?").connectors.push(c);
  for (const rec of site?.status?.network ?? [])
    for (const s of rec.services ?? []) if ((s.connectors ?? []).length) entry(s.routingKey).sites.push(`${rec.name}${names(s.connectors) ? ` (${names(s.connectors)})` : ""}`);
  const traffic = useTraffic();
  const figures = new Map((traffic?.services ?? []).map((t) => [t.routingKey, t]));
  const sorted = [...keys.entries()].sort(([a], [b]) => a.localeCompare(b));
  return (
    <section>
      <h1>Services</h1>
      <MeshServices store={store} traffic={traffic} />
      <h2>Routing keys</h2>
      <p class="muted">Each routing key: the Listeners that accept connections for it in this site, the Connectors that serve it here, and the sites where it resolves.</p>
      <table id="services">
        <thead>
          <tr>
            <th>Routing key</th>
            <th>Listeners (this site)</th>
            <th>Connectors (this site)</th>
            <th>Resolves to</th>
            <th>Flows (open / opened)</th>
            <th>Bytes to connector / back</th>
          </tr>
        </thead>
        <tbody>
          {sorted.map(([k, e]) => (
            <tr data-routing-key={k}>
              <td class="mono">{k}</td>
              <td>
                {e.listeners.map((l) => (
                  <div>
                    {l.metadata.name} on {l.spec.host}:{l.spec.port}{" "}
                    <span class={`pill ${condition(l, "Matched")?.ok || l.status?.hasMatchingConnector ? "ok" : "warn"}`}>
                      {condition(l, "Matched")?.ok || l.status?.hasMatchingConnector ? "matched" : "no connector"}
                    </span>
                  </div>
                ))}
              </td>
              <td>
                {e.connectors.map((c) => (
                  <div>
                    {c.metadata.name} → {c.spec.host ? `${c.spec.host}:${c.spec.port}` : `selector ${c.spec.selector} port ${c.spec.port}`}
                    {(c.status?.selectedPods ?? []).length ? ` (${c.status.selectedPods.map((p: any) => p.name).join(", ")})` : ""}
                    {unreachable(c) && (
                      <span class="pill warn" title={condition(c, "Ready")?.message}>
                        {condition(c, "Ready")?.reason === "NoTargets" ? "no target" : "unreachable"}
                      </span>
                    )}
                  </div>
                ))}
              </td>
              <td data-resolves>{e.sites.length ? e.sites.join("; ") : <span class="warn">nowhere</span>}</td>
              <td data-flows>{figures.has(k) ? `${figures.get(k)!.flowsActive} / ${figures.get(k)!.flowsOpened}` : "–"}</td>
              <td data-bytes>{figures.has(k) ? `${bytes(figures.get(k)!.bytesToConnector)} / ${bytes(figures.get(k)!.bytesToListener)}` : "–"}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {sorted.length === 0 && <p class="muted">No Listeners or Connectors.</p>}
      <p class="muted" id="traffic-note">
        {traffic?.reportedAt
          ? `Traffic at this site's listeners since its router started, as the router reported it at ${new Date(traffic.reportedAt).toLocaleTimeString()} (every 10 s).`
          : (traffic?.message ?? "Traffic: waiting for the router's report.")}
      </p>
      <ServiceRoutes store={store} />
    </section>
  );
}
