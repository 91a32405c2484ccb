// Meshes: mTLS state, the enabled CA (fingerprint, expiry, trust domain from
// GET /api/v1/meshes/{name}/ca, read again when the Mesh changes) and
// whether a CA rotation is in progress or stalled.
import { useEffect, useState } from "preact/hooks";
import { apiGet } from "../api";
import { condition, type Resource, type Store } from "../store";
import { when } from "../hooks";

function phase(p: unknown): string {
  if (p === null || p === undefined) return "–";
  if (typeof p === "string") return p;
  if (typeof p === "object") {
    const o = p as Record<string, unknown>;
    if (typeof o.phase === "string") return Object.keys(o).length === 1 ? o.phase : `${o.phase} ${JSON.stringify({ ...o, phase: undefined })}`;
    const keys = Object.keys(p as object);
    return keys.length === 1 ? keys[0] : JSON.stringify(p);
  }
  return String(p);
}

function MeshRow({ mesh }: { mesh: Resource }) {
  const [ca, setCa] = useState<any>(null);
  const [err, setErr] = useState("");
  const mtls = mesh.spec?.mtls?.enabledBackend;
  useEffect(() => {
    if (!mtls) return;
    const ac = new AbortController();
    apiGet(`/api/v1/meshes/${encodeURIComponent(mesh.metadata.name)}/ca`, ac.signal)
      .then((c) => {
        setCa(c);
        setErr("");
      })
      .catch((e) => e.name !== "AbortError" && setErr(e.message));
    return () => ac.abort();
  }, [mesh.metadata.name, mesh.metadata.resourceVersion, mtls]);
  const backend = (mesh.spec?.mtls?.backends ?? []).find((b: any) => b.name === mtls);
  const stalled = condition(mesh, "CertificateRotationStalled");
  // CARotation is written into the Mesh as a rotation moves, so this cell
  // follows the watch feed; the CA endpoint is read again on each change.
  const rotating = condition(mesh, "CARotation");
  const rotation = rotating?.ok ? `rotating: ${rotating.message}` : phase(ca?.rotation);
  return (
    <tr data-mesh={mesh.metadata.name}>
      <td>{mesh.metadata.name}</td>
      <td>{mtls ? <span class="pill ok">on ({mtls}, {backend?.type ?? "?"})</span> : <span class="pill muted">off</span>}</td>
      <td>{backend?.dpCert?.rotation?.expiration ?? (mtls ? "24h" : "–")}</td>
      <td class="mono">{ca?.fingerprint ?? (err ? <span class="error">{err}</span> : mtls ? "…" : "–")}</td>
      <td>{ca ? when(ca.notAfter) : "–"}</td>
      <td>{ca?.trustDomain ?? mesh.spec?.trustDomain ?? mesh.metadata.name}</td>
      <td>
        {stalled?.ok ? (
          <span class="pill bad" title={stalled.message}>
            stalled: {stalled.message}
          </span>
        ) : (
          <span class={`pill ${/idle|none|stable|–/i.test(rotation) ? "muted" : "warn"}`}>{rotation}</span>
        )}
      </td>
    </tr>
  );
}

export function Meshes({ store }: { store: Store }) {
  const meshes = store.list("Mesh").sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  return (
    <section>
      <h1>Meshes</h1>
      <table>
        <thead>
          <tr>
            <th>Mesh</th>
            <th>mTLS</th>
            <th>Certificate lifetime</th>
            <th>CA fingerprint (SHA-256)</th>
            <th>CA expires</th>
            <th>Trust domain</th>
            <th>Rotation</th>
          </tr>
        </thead>
        <tbody>
          {meshes.map((m) => (
            <MeshRow key={m.metadata.name} mesh={m} />
          ))}
        </tbody>
      </table>
      {meshes.length === 0 && <p class="muted">No meshes yet: apply one with <code>meshlink apply</code>.</p>}
    </section>
  );
}
