// The Services page's mesh half: per destination, its protocol, the
// MeshHTTPRoutes and MeshTCPRoutes that select it (rules: matches →
// weighted backends, filters) and the MeshTimeout / MeshRetry values every
// caller gets, from the model in ../l7.ts.
import type { Store } from "../store";
import { destinations, type Destination, type Field } from "../l7";

function Values({ title, list }: { title: string; list: Field[] }) {
  return (
    <div>
      <h3>{title}</h3>
      <table class="kv">
        <tbody>
          {list.map((f) => (
            <tr data-field={f.field}>
              <th class="mono">{f.field}</th>
              <td>{f.value}</td>
              <td class={f.source === "Kuma default" ? "muted" : ""}>{f.source}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function One({ d }: { d: Destination }) {
  const tcp = d.protocol === "tcp";
  return (
    <div class="destination" data-service={d.name} data-mesh={d.mesh}>
      <h2>
        {d.mesh}/{d.name} <span class={`pill ${tcp ? "muted" : "ok"}`} data-protocol={d.protocol}>{d.protocol}</span>
      </h2>
      {d.mismatch && (
        <p class="warn" data-mismatch>
          Served as TCP: {d.mismatch}
        </p>
      )}
      {d.routes.length === 0 ? (
        <p class="muted">No MeshHTTPRoute or MeshTCPRoute selects it: callers reach {d.name} itself.</p>
      ) : (
        <table class="routes">
          <thead>
            <tr>
              <th>Route</th>
              <th>Callers</th>
              <th>Matches</th>
              <th>Backends</th>
              <th>Filters</th>
            </tr>
          </thead>
          <tbody>
            {d.routes.flatMap((r) =>
              r.rules.map((rule, i) => (
                <tr data-route={r.name} data-applied={String(r.applied)}>
                  <td>
                    {i === 0 && (
                      <>
                        {r.kind} <b>{r.name}</b>
                        {r.shadow && <span class="pill warn">shadow</span>}
                        {!r.applied && <div class="warn">{r.notApplied}</div>}
                      </>
                    )}
                  </td>
                  <td>{i === 0 ? r.callers : ""}</td>
                  <td class="mono">{rule.matches}</td>
                  <td>
                    {rule.backends.map((b) => (
                      <div data-backend={b.name} data-weight={b.weight}>
                        {b.name} <span class="pill">{b.share}%</span> <span class="muted">weight {b.weight}</span>
                      </div>
                    ))}
                  </td>
                  <td>{rule.filters.join(", ") || "–"}</td>
                </tr>
              )),
            )}
          </tbody>
        </table>
      )}
      <div class="columns">
        <Values
          title={tcp ? "MeshTimeout (TCP: idleTimeout and connectionTimeout apply)" : "MeshTimeout"}
          list={tcp ? d.timeouts.filter((f) => f.field === "idleTimeout" || f.field === "connectionTimeout") : d.timeouts}
        />
        <Values title={tcp ? "MeshRetry (TCP: connect attempts)" : "MeshRetry"} list={d.retries} />
      </div>
      {d.partial.length > 0 && (
        <p class="muted">
          Also selecting only some callers (see <code>meshlink inspect dataplane NAME --rules</code>): {d.partial.join("; ")}.
        </p>
      )}
    </div>
  );
}

export function ServiceRoutes({ store }: { store: Store }) {
  const list = destinations(store);
  return (
    <section id="service-routes">
      <h1>Mesh services: routes, timeouts and retries</h1>
      <p class="muted">
        Each destination of a mesh (a <code>kuma.io/service</code> or a MeshService): its protocol, the routes that select it and the timeout and retry values every caller gets (policies targeting the whole Mesh, in Kuma's merge order, over Kuma's defaults). Routes, retries and HTTP timeouts apply only to HTTP services.
      </p>
      {list.map((d) => (
        <One d={d} />
      ))}
      {list.length === 0 && <p class="muted">No mesh services yet.</p>}
    </section>
  );
}
