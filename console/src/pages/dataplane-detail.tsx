// One Dataplane: inbounds, outbounds, the endpoints its sidecar keeps out
// of its balancers (status.unhealthyEndpoints), the xDS versions sent and
// ACKed per type and the certificate (GET
// /api/v1/dataplanes/{name}/xds?mesh=M, read again whenever the Dataplane
// changes in the watch feed).
import { useEffect, useState } from "preact/hooks";
import { apiGet } from "../api";
import type { Store } from "../store";
import { countdown, useNow, when } from "../hooks";

const WHY: Record<string, string> = {
  HealthCheck: "failing its health check",
  Outlier: "ejected by outlier detection",
};

/** How long ago `t` (RFC 3339) was, from `now`: `3m 5s ago`. */
function ago(t: string, now: number): string {
  const at = Date.parse(t);
  return isNaN(at) ? "" : `${countdown(Math.max(now - at, 1000))} ago`;
}

function tags(t: Record<string, string> | undefined) {
  return Object.entries(t ?? {})
    .map(([k, v]) => `${k}=${v}`)
    .join(", ");
}

export function DataplaneDetail({ store, mesh, name }: { store: Store; mesh: string; name: string }) {
  const now = useNow();
  const dp = store.get("Dataplane", name, mesh);
  const [xds, setXds] = useState<any>(null);
  const [err, setErr] = useState("");
  const version = dp?.metadata.resourceVersion;
  useEffect(() => {
    if (!dp) return;
    const ac = new AbortController();
    apiGet(`/api/v1/dataplanes/${encodeURIComponent(name)}/xds?mesh=${encodeURIComponent(mesh)}`, ac.signal)
      .then((x) => {
        setXds(x);
        setErr("");
      })
      .catch((e) => e.name !== "AbortError" && setErr(e.message));
    return () => ac.abort();
  }, [mesh, name, version]);
  if (!dp)
    return (
      <section>
        <h1>Dataplane {mesh}/{name}</h1>
        <p class="muted" id="dataplane-gone">
          This Dataplane does not exist (any more). <a href="#/dataplanes">All dataplanes</a>
        </p>
      </section>
    );
  const net = dp.spec?.networking ?? {};
  const cert = xds?.certificate;
  const exp = Date.parse(dp.status?.mtls?.certificateExpirationTime ?? cert?.notAfter ?? "");
  return (
    <section id="dataplane-detail">
      <p>
        <a href="#/dataplanes">← Dataplanes</a>
      </p>
      <h1>
        Dataplane {mesh}/{name}{" "}
        <span class={`pill ${dp.status?.online ? "ok" : "bad"}`}>{dp.status?.online ? "online" : "offline"}</span>
      </h1>
      <p>
        Address <code>{net.address}</code>, control plane <code>{dp.status?.controlPlaneInstance ?? "–"}</code>, connected {when(dp.status?.lastConnected)}
        {dp.status?.lastDisconnected ? `, last disconnected ${when(dp.status.lastDisconnected)}` : ""}.
      </p>
      <div class="columns">
        <div>
          <h2>Inbounds</h2>
          <table id="inbounds">
            <thead>
              <tr>
                <th>Port</th>
                <th>Service</th>
                <th>App at</th>
                <th>Tags</th>
              </tr>
            </thead>
            <tbody>
              {(net.inbound ?? []).map((i: any) => (
                <tr>
                  <td>{i.port}</td>
                  <td>{i.tags?.["kuma.io/service"] ?? "–"}</td>
                  <td>
                    {i.serviceAddress ?? "127.0.0.1"}:{i.servicePort ?? i.port}
                  </td>
                  <td>{tags(i.tags)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <div>
          <h2>Outbounds</h2>
          <table>
            <thead>
              <tr>
                <th>Listens on</th>
                <th>Goes to</th>
              </tr>
            </thead>
            <tbody>
              {(net.outbound ?? []).map((o: any) => (
                <tr>
                  <td>
                    {o.address ?? "127.0.0.1"}:{o.port}
                  </td>
                  <td>{o.routingKey ? `routing key ${o.routingKey}` : tags(o.tags)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {(net.outbound ?? []).length === 0 && <p class="muted">none</p>}
        </div>
      </div>
      <h2>Unhealthy endpoints</h2>
      <p class="muted">Endpoints of other services that this sidecar keeps out of its load balancers, as this sidecar (the caller) sees them.</p>
      {(dp.status?.unhealthyEndpoints ?? []).length === 0 ? (
        <p class="muted" id="unhealthy-endpoints-none">
          none
        </p>
      ) : (
        <table id="unhealthy-endpoints">
          <thead>
            <tr>
              <th>Cluster</th>
              <th>Endpoint</th>
              <th>Why</th>
              <th>Since</th>
            </tr>
          </thead>
          <tbody>
            {(dp.status?.unhealthyEndpoints ?? []).map((e: any) => (
              <tr>
                <td>{e.cluster}</td>
                <td class="mono">{e.address}</td>
                <td class="warn">{WHY[e.reason] ?? e.reason}</td>
                <td>
                  {when(e.since)} <span class="muted">({ago(e.since, now)})</span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>xDS</h2>
      {err && <p class="error">{err}</p>}
      {xds && !xds.types && <p class="muted">{xds.message ?? "no xDS stream on this control plane"}</p>}
      {xds?.types && (
        <>
          <p>
            Stream {xds.connected ? "connected" : "closed"} on {xds.controlPlane ?? "–"} ({xds.protocol ?? "?"}, client {xds.client ?? "?"})
            {xds.closeReason ? `, closed: ${xds.closeReason}` : ""}
          </p>
          <table id="xds-types">
            <thead>
              <tr>
                <th>Type</th>
                <th>Last sent</th>
                <th>Last ACKed</th>
                <th>Resources</th>
                <th>Last NACK</th>
              </tr>
            </thead>
            <tbody>
              {Object.entries(xds.types ?? {}).map(([t, v]: [string, any]) => (
                <tr>
                  <td>{t}</td>
                  <td class="mono">{v.lastSentVersion ?? "–"}</td>
                  <td class={`mono ${v.lastAckedVersion === v.lastSentVersion ? "" : "warn"}`}>{v.lastAckedVersion ?? "–"}</td>
                  <td>{Array.isArray(v.resources) ? v.resources.length : (v.resources ?? "–")}</td>
                  <td class={v.lastNack ? "error" : "muted"}>{v.lastNack ? (typeof v.lastNack === "string" ? v.lastNack : JSON.stringify(v.lastNack)) : "none"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <h2>Certificate</h2>
      <table class="kv">
        <tbody>
          <tr>
            <th>SPIFFE ID</th>
            <td class="mono">{cert?.spiffeId ?? dp.status?.mtls?.spiffeId ?? "–"}</td>
          </tr>
          <tr>
            <th>Serial</th>
            <td class="mono">{cert?.serial ?? dp.status?.mtls?.serial ?? "–"}</td>
          </tr>
          <tr>
            <th>Valid</th>
            <td>
              {when(cert?.notBefore ?? dp.status?.mtls?.lastCertificateRegeneration)} – {when(cert?.notAfter ?? dp.status?.mtls?.certificateExpirationTime)}
            </td>
          </tr>
          <tr>
            <th>Expires in</th>
            <td class="countdown">{isNaN(exp) ? "–" : countdown(exp - now)}</td>
          </tr>
          <tr>
            <th>Issued by</th>
            <td>
              {dp.status?.mtls?.issuedBackend ?? "–"} {cert?.caFingerprint ? <span class="mono">({cert.caFingerprint})</span> : null}
            </td>
          </tr>
          <tr>
            <th>Delivery, renewals</th>
            <td>
              {dp.status?.mtls?.delivery ?? "–"}, {dp.status?.mtls?.certificateRegenerations ?? 0} issued
            </td>
          </tr>
        </tbody>
      </table>
    </section>
  );
}
