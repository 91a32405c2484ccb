// Policies: MeshTrafficPermissions as a who-may-talk-to-whom table, one
// row per rule (source -> destination: action), grouped by mesh.
import { condition, type Store } from "../store";

function target(t: any): string {
  if (!t || t.kind === "Mesh" || !t.kind) return "any service in the mesh";
  if (t.kind === "MeshService") return t.name;
  if (t.kind === "MeshSubset")
    return Object.entries(t.tags ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(", ");
  return JSON.stringify(t);
}

export function Policies({ store }: { store: Store }) {
  const rows = store
    .list("MeshTrafficPermission")
    .flatMap((p) =>
      (p.spec?.from ?? []).map((f: any) => ({
        mesh: p.metadata.mesh ?? "",
        policy: p.metadata.name,
        from: target(f.targetRef),
        to: target(p.spec?.targetRef),
        action: f.default?.action ?? "?",
        valid: condition(p, "Valid"),
      })),
    )
    .sort((a, b) => a.mesh.localeCompare(b.mesh) || a.to.localeCompare(b.to) || a.from.localeCompare(b.from));
  return (
    <section>
      <h1>Traffic permissions</h1>
      <p class="muted">Who may talk to whom: each row is one rule of a MeshTrafficPermission.</p>
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
    </section>
  );
}
