// The Services page's first table: mesh services with health (the Kuma
// GUI's Services list), from ../service-health.ts. Each unhealthy
// Dataplane is named with why, and links to its detail. Traffic is the
// sum of the sidecars' inbound figures (../traffic.ts).
import type { Store } from "../store";
import { meshServices, type Health } from "../service-health";
import { bytes, serviceTraffic, type Traffic } from "../traffic";

const PILL: Record<Health, string> = { online: "ok", "partially degraded": "warn", offline: "bad" };

export function MeshServices({ store, traffic }: { store: Store; traffic?: Traffic }) {
  const services = meshServices(store);
  const serviceOf = (mesh: string, dataplane: string, port: number) =>
    (store.get("Dataplane", dataplane, mesh)?.spec?.networking?.inbound ?? []).find((i: any) => i.port === port)?.tags?.["kuma.io/service"];
  const figures = serviceTraffic(traffic?.dataplanes ?? [], serviceOf);
  return (
    <div>
      <h2>Mesh services</h2>
      <p class="muted">
        Each service of the mesh: its Dataplanes (by their inbounds' <span class="mono">kuma.io/service</span> tag) and how many are healthy: connected, certificate valid, configuration accepted, app reachable.
      </p>
      <table id="mesh-services">
        <thead>
          <tr>
            <th>Mesh</th>
            <th>Service</th>
            <th>Status</th>
            <th>Healthy Dataplanes</th>
            <th>Not healthy</th>
            <th>Connections (open / accepted)</th>
            <th>Bytes in / out</th>
          </tr>
        </thead>
        <tbody>
          {services.map((s) => (
            <tr data-service={s.name} data-mesh={s.mesh} data-health={s.health}>
              <td>{s.mesh}</td>
              <td class="mono">
                {s.name}
                {s.meshService && <span class="pill muted">MeshService</span>}
              </td>
              <td>
                <span class={`pill ${PILL[s.health]}`}>{s.health}</span>
              </td>
              <td data-healthy>
                {s.healthy}/{s.members.length}
              </td>
              <td>
                {s.members
                  .filter((m) => !m.healthy)
                  .map((m) => (
                    <div data-unhealthy={m.dataplane}>
                      <a href={`#/dataplanes/${encodeURIComponent(s.mesh)}/${encodeURIComponent(m.dataplane)}`}>{m.dataplane}</a>: {m.why}
                    </div>
                  ))}
              </td>
              {(() => {
                const t = figures.get(`${s.mesh}/${s.name}`);
                return (
                  <>
                    <td data-connections title={t ? `${t.reporting} sidecar(s) reporting` : undefined}>
                      {t ? `${t.connectionsActive} / ${t.connectionsOpened}` : "–"}
                    </td>
                    <td data-service-bytes>{t ? `${bytes(t.bytesReceived)} / ${bytes(t.bytesSent)}` : "–"}</td>
                  </>
                );
              })()}
            </tr>
          ))}
        </tbody>
      </table>
      {services.length === 0 && <p class="muted">No Dataplane inbounds or MeshServices.</p>}
      <p class="muted">Traffic: what the services' sidecars accepted on their inbounds since each started (bytes on the wire, TLS included), reported every 10 s.</p>
    </div>
  );
}
