// Control planes: the replicas sharing this store (GET /api/v1/controlplanes),
// read when the page opens or on request; not part of the watch feed.
import { useEffect, useState } from "preact/hooks";
import { apiGet } from "../api";
import { when } from "../hooks";

export function ControlPlanes() {
  const [data, setData] = useState<any>(null);
  const [err, setErr] = useState("");
  const [n, setN] = useState(0);
  useEffect(() => {
    const ac = new AbortController();
    apiGet("/api/v1/controlplanes", ac.signal)
      .then((d) => {
        setData(d);
        setErr("");
      })
      .catch((e) => e.name !== "AbortError" && setErr(e.message));
    return () => ac.abort();
  }, [n]);
  return (
    <section>
      <h1>
        Control planes <button onClick={() => setN(n + 1)}>Refresh</button>
      </h1>
      {err && <p class="error">{err}</p>}
      {data && (
        <table>
          <thead>
            <tr>
              <th>Instance</th>
              <th>State</th>
              <th>Leader</th>
              <th>Version</th>
              <th>API</th>
              <th>xDS</th>
              <th>Proxies</th>
              <th>Started</th>
              <th>Heartbeat</th>
            </tr>
          </thead>
          <tbody>
            {(data.items ?? []).map((c: any) => (
              <tr>
                <td>{c.instance}</td>
                <td>
                  <span class={`pill ${c.state === "Live" ? "ok" : "bad"}`}>{c.state}</span>
                </td>
                <td>{c.leader ? "yes" : ""}</td>
                <td>{c.version}</td>
                <td>{c.apiAddr}</td>
                <td>{c.xdsAddr}</td>
                <td>{c.connectedProxies}</td>
                <td>{when(c.started)}</td>
                <td>{when(c.heartbeat)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
