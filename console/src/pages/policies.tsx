// Policies: MeshTrafficPermissions as a who-may-talk-to-whom matrix per
// mesh (source row, destination column), then one row per rule.
import { condition, POLICY_KINDS, type Kind, type Store } from "../store";
import { permissionMatrix, type Verdict } from "../permissions";

const LABEL: Record<Verdict, [string, string]> = {
  Allow: ["allow", "ok"],
  ShadowDeny: ["allow (shadow deny)", "warn"],
  Deny: ["deny", "bad"],
  DefaultDeny: ["no rule: denied", "muted"],
  Open: ["open (mTLS off)", "warn"],
  Mixed: ["depends on the instance", "warn"],
};

function Matrix({ store, mesh }: { store: Store; mesh: string }) {
  const { sources, services, cell } = permissionMatrix(store, mesh);
  if (services.length === 0) return <p class="muted">Mesh {mesh}: no services yet.</p>;
  return (
    <>
      <h2>Mesh {mesh}: who may call whom</h2>
      <table class="matrix" data-mesh={mesh}>
        <thead>
          <tr>
            <th>from ↓ / to →</th>
            {services.map((s) => (
              <th>{s}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {sources.map((src) => (
            <tr>
              <th>{src}</th>
              {services.map((dst) => {
                const [text, cls] = LABEL[cell(src, dst)];
                return (
                  <td data-from={src} data-to={dst}>
                    <span class={`pill ${cls}`}>{text}</span>
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

/** A `rules` match as text, e.g. `SPIFFE ID spiffe://default/web`. */
function spiffeMatch(m: any): string {
  const v = m?.spiffeID;
  return v ? `SPIFFE ID ${v.type === "Prefix" ? "starting " : ""}${v.value}` : JSON.stringify(m);
}

function target(t: any): string {
  if (!t || t.kind === "Mesh" || !t.kind) return "any service in the mesh";
  if (t.kind === "MeshService") return t.name;
  if (t.kind === "MeshSubset")
    return Object.entries(t.tags ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(", ");
  return JSON.stringify(t);
}

/** What one entry's `default` sets, in a few words. */
function summary(kind: string, d: any): string {
  if (!d) return "";
  if (kind === "MeshRateLimit") {
    const http = d.local?.http?.requestRate;
    const tcp = d.local?.tcp?.connectionRate;
    return [http && `${http.num} requests / ${http.interval}`, tcp && `${tcp.num} connections / ${tcp.interval}`].filter(Boolean).join(", ");
  }
  if (kind === "MeshFaultInjection")
    return (d.http ?? [])
      .map((f: any) =>
        [f.abort && `abort ${f.abort.httpStatus} ${f.abort.percentage}%`, f.delay && `delay ${f.delay.value} ${f.delay.percentage}%`]
          .filter(Boolean)
          .join(", "),
      )
      .join("; ");
  if (kind === "MeshLoadBalancingStrategy") return d.loadBalancer?.type ?? "";
  if (kind === "MeshTrace") return (d.backends ?? []).map((b: any) => b.type).join(", ");
  if (kind === "MeshAccessLog")
    return (d.backends ?? []).map((b: any) => `${b.type} ${b.file?.path ?? b.tcp?.address ?? b.openTelemetry?.endpoint ?? ""}`.trim()).join(", ");
  return Object.keys(d).join(", ");
}

/** Every entry of the L7 policies (timeouts, retries, rate limits,
 * access logs): which proxies, which destinations or clients, what. */
function L7Policies({ store }: { store: Store }) {
  const rows = Object.keys(POLICY_KINDS).flatMap((kind) =>
    store.list(kind as Kind).flatMap((p) =>
      (["to", "from", "rules", "default"] as const).flatMap((section) =>
        (section === "default" ? (p.spec?.default ? [{ default: p.spec.default }] : []) : (p.spec?.[section] ?? [])).map((e: any) => ({
          kind,
          mesh: p.metadata.mesh ?? "",
          policy: p.metadata.name,
          proxies: target(p.spec?.targetRef),
          section,
          entry:
            section === "default"
              ? "every request"
              : section === "rules"
                ? e.matches
                  ? e.matches.map(spiffeMatch).join(", ")
                  : "any client"
                : target(e.targetRef),
          what: summary(kind, e.default),
          valid: condition(p, "Valid"),
        })),
      ),
    ),
  );
  return (
    <>
      <h2>Timeouts, retries and the resilience and observability policies</h2>
      <table id="l7-policies">
        <thead>
          <tr>
            <th>Mesh</th>
            <th>Kind</th>
            <th>Policy</th>
            <th>Proxies</th>
            <th>Section</th>
            <th>Destinations / clients</th>
            <th>Sets</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr data-kind={r.kind} data-policy={r.policy}>
              <td>{r.mesh}</td>
              <td title={POLICY_KINDS[r.kind]}>{r.kind}</td>
              <td>
                {r.policy}
                {r.valid && !r.valid.ok ? <span class="error"> (invalid: {r.valid.message})</span> : null}
              </td>
              <td>{r.proxies}</td>
              <td>{r.section}</td>
              <td>{r.entry}</td>
              <td data-sets>{r.what}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {rows.length === 0 && <p class="muted">None: Kuma's defaults apply (see the Routes page for each service's timeouts and retries).</p>}
    </>
  );
}

export function Policies({ store }: { store: Store }) {
  const rows = store
    .list("MeshTrafficPermission")
    .flatMap((p) => {
      const row = (from: string, action: string) => ({
        mesh: p.metadata.mesh ?? "",
        policy: p.metadata.name,
        from,
        to: target(p.spec?.targetRef),
        action,
        valid: condition(p, "Valid"),
      });
      const ruled = (p.spec?.rules ?? []).flatMap((r: any) =>
        (
          [
            ["deny", "Deny"],
            ["allow", "Allow"],
            ["allowWithShadowDeny", "AllowWithShadowDeny"],
          ] as const
        ).flatMap(([key, action]) => (r.default?.[key] ?? []).map((m: any) => row(spiffeMatch(m), action))),
      );
      return [...(p.spec?.from ?? []).map((f: any) => row(target(f.targetRef), f.default?.action ?? "?")), ...ruled];
    })
    .sort((a, b) => a.mesh.localeCompare(b.mesh) || a.to.localeCompare(b.to) || a.from.localeCompare(b.from));
  return (
    <section>
      <h1>Traffic permissions</h1>
      <p class="muted">
        Who may call whom, as the sidecars enforce it: with mTLS on, the policies selecting a destination count from the most general target to the most
        specific (then by name), the last matching rule for a source decides, and a source no rule names is denied; with mTLS off nothing is enforced.
      </p>
      {store
        .list("Mesh")
        .map((m) => m.metadata.name)
        .sort()
        .map((m) => (
          <Matrix store={store} mesh={m} />
        ))}
      <h2>Rules</h2>
      <table id="policies">
        <thead>
          <tr>
            <th>Mesh</th>
            <th>From (source)</th>
            <th></th>
            <th>To (destination)</th>
            <th>Action</th>
            <th>Policy</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr>
              <td>{r.mesh}</td>
              <td>{r.from}</td>
              <td>→</td>
              <td>{r.to}</td>
              <td>
                <span class={`pill ${r.action === "Deny" ? "bad" : r.action === "Allow" ? "ok" : "warn"}`}>{r.action}</span>
              </td>
              <td>
                {r.policy}
                {r.valid && !r.valid.ok ? <span class="error"> (invalid: {r.valid.message})</span> : null}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {rows.length === 0 && <p class="muted">No MeshTrafficPermissions: with mTLS on, no service may call another.</p>}
      <L7Policies store={store} />
    </section>
  );
}
