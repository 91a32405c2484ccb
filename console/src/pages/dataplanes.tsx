// Dataplanes: a sortable table (online, control-plane instance, SPIFFE ID,
// certificate expiry as a live countdown, last NACK); a row opens its
// detail. Countdowns tick from the clock; the rows change only from the
// watch feed.
import { useState } from "preact/hooks";
import { condition, type Resource, type Store } from "../store";
import { countdown, useNow } from "../hooks";

type Col = "name" | "mesh" | "online" | "instance" | "spiffe" | "expiry" | "nack";

function nack(d: Resource): string {
  const r = condition(d, "Ready");
  return r && !r.ok && r.reason === "ConfigRejected" ? r.message : "";
}

function value(d: Resource, col: Col): string | number {
  switch (col) {
    case "name":
      return d.metadata.name;
    case "mesh":
      return d.metadata.mesh ?? "";
    case "online":
      return d.status?.online ? 0 : 1;
    case "instance":
      return d.status?.controlPlaneInstance ?? "";
    case "spiffe":
      return d.status?.mtls?.spiffeId ?? "";
    case "expiry":
      return Date.parse(d.status?.mtls?.certificateExpirationTime ?? "") || Infinity;
    case "nack":
      return nack(d);
  }
}

const COLS: [Col, string][] = [
  ["name", "Name"],
  ["mesh", "Mesh"],
  ["online", "State"],
  ["instance", "Control plane"],
  ["spiffe", "SPIFFE ID"],
  ["expiry", "Certificate expires in"],
  ["nack", "Last NACK"],
];

export function Dataplanes({ store }: { store: Store }) {
  const now = useNow();
  const [sort, setSort] = useState<[Col, number]>(["name", 1]);
  const [filter, setFilter] = useState("");
  const [col, dir] = sort;
  const rows = store
    .list("Dataplane")
    .filter((d) => !filter || `${d.metadata.mesh}/${d.metadata.name}`.includes(filter))
    .sort((a, b) => {
      const x = value(a, col);
      const y = value(b, col);
      const c = x < y ? -1 : x > y ? 1 : 0;
      return c * dir || a.metadata.name.localeCompare(b.metadata.name);
    });
  const shown = rows.slice(0, 500);
  return (
    <section>
      <h1>Dataplanes</h1>
      <input class="filter" placeholder="filter by mesh/name" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
      <table id="dataplanes" class="sortable">
        <thead>
          <tr>
            {COLS.map(([c, label]) => (
              <th onClick={() => setSort([c, c === col ? -dir : 1])} class={c === col ? (dir > 0 ? "asc" : "desc") : ""}>
                {label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {shown.map((d) => {
            const href = `#/dataplanes/${encodeURIComponent(d.metadata.mesh ?? "")}/${encodeURIComponent(d.metadata.name)}`;
            const exp = Date.parse(d.status?.mtls?.certificateExpirationTime ?? "");
            const n = nack(d);
            return (
              <tr key={`${d.metadata.mesh}/${d.metadata.name}`} data-dataplane={d.metadata.name} class="clickable" onClick={() => (location.hash = href)}>
                <td>
                  <a href={href}>{d.metadata.name}</a>
                </td>
                <td>{d.metadata.mesh}</td>
                <td>
                  <span class={`pill ${d.status?.online ? "ok" : "bad"}`} data-state={d.status?.online ? "online" : "offline"}>
                    {d.status?.online ? "online" : "offline"}
                  </span>
                </td>
                <td>{d.status?.controlPlaneInstance ?? "–"}</td>
                <td class="mono">{d.status?.mtls?.spiffeId ?? "–"}</td>
                <td class="countdown" data-expires={isNaN(exp) ? "" : String(exp)}>
                  {isNaN(exp) ? "–" : countdown(exp - now)}
                </td>
                <td class={n ? "error" : "muted"}>{n || "none"}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
      {rows.length > shown.length && <p class="muted">Showing 500 of {rows.length}; filter to narrow down.</p>}
      {rows.length === 0 && <p class="muted">No dataplanes.</p>}
    </section>
  );
}
