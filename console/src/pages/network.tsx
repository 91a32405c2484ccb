// Network: a Cytoscape.js graph of the sites and links this site's router
// reports (green: up, red: down; unreachable sites grey), re-coloured live
// from the watch feed, and the same links as a table. Cytoscape is loaded
// on first use (its own chunk).
import { useEffect, useRef, useState } from "preact/hooks";
import type { Core } from "cytoscape";
import type { Store } from "../store";
import { networkModel, type LinkEdge } from "../network-model";
import { bytes, useTraffic } from "../traffic";

// Cytoscape adds a <style> element unless one with this id exists; the CSP
// forbids inline styles, so the rule lives in style.css and a placeholder
// takes the id.
function cytoscapeStylePlaceholder() {
  const id = "__________cytoscape_stylesheet";
  if (!document.getElementById(id)) {
    const m = document.createElement("meta");
    m.id = id;
    document.head.appendChild(m);
  }
}

const STYLE: any[] = [
  // Site labels sit beside the node, on a white box drawn above the edges,
  // so an arrow that arrives from below or above ends at the node, visible,
  // and never runs through a site's name.
  { selector: "node", style: { label: "data(label)", "background-color": "#2f855a", color: "#1a202c", "text-valign": "center", "text-halign": "right", "text-margin-x": 8, "font-size": 13, width: 34, height: 34, "text-background-color": "#fff", "text-background-opacity": 1, "text-background-padding": "3px", "z-index": 10 } },
  { selector: "node[?local]", style: { "border-width": 4, "border-color": "#2b6cb0" } },
  { selector: "node[!reachable]", style: { "background-color": "#a0aec0" } },
  { selector: "edge", style: { "z-index": 1, label: "data(label)", width: 4, "line-color": "#38a169", "target-arrow-shape": "triangle", "target-arrow-color": "#38a169", "curve-style": "bezier", "font-size": 11, "text-background-color": "#fff", "text-background-opacity": 1 } },
  { selector: "edge[!up]", style: { "line-color": "#e53e3e", "target-arrow-color": "#e53e3e", "line-style": "dashed" } },
];

export function Network({ store }: { store: Store }) {
  const box = useRef<HTMLDivElement>(null);
  const cy = useRef<Core | null>(null);
  const [err, setErr] = useState("");
  const model = networkModel(store);
  const traffic = useTraffic();
  const local = model.nodes.find((n) => n.local)?.id;
  // Bytes this site's router moved on its links to the edge's other end
  // (every connection to that site, dialled or accepted).
  const linkBytes = (e: LinkEdge) => {
    const other = e.from === local ? e.to : e.to === local ? e.from : undefined;
    const links = (traffic?.links ?? []).filter((l) => other !== undefined && l.remoteSiteId === other);
    if (links.length === 0) return "–";
    const sent = links.reduce((n, l) => n + l.bytesSent, 0);
    const received = links.reduce((n, l) => n + l.bytesReceived, 0);
    return `${bytes(sent)} / ${bytes(received)}`;
  };

  useEffect(() => {
    let dead = false;
    cytoscapeStylePlaceholder();
    import("cytoscape")
      .then(({ default: cytoscape }) => {
        if (dead || !box.current) return;
        cy.current = cytoscape({ container: box.current, style: STYLE, userZoomingEnabled: true, maxZoom: 2, minZoom: 0.3 });
        update(cy.current, networkModel(store));
      })
      .catch((e) => setErr(`could not load the graph: ${e.message}`));
    return () => {
      dead = true;
      cy.current?.destroy();
      cy.current = null;
    };
  }, []);

  useEffect(() => {
    if (cy.current) update(cy.current, model);
  }, [store.version]);

  return (
    <section>
      <h1>Network</h1>
      <p class="muted">Sites and links as this site's router sees them. Green: link up; red dashed: link down; grey: site not reachable now.</p>
      {err && <p class="error">{err}</p>}
      <div ref={box} class="graph" id="graph" />
      <h2>Links</h2>
      <table id="links">
        <thead>
          <tr>
            <th>Link</th>
            <th>From</th>
            <th>To</th>
            <th>State</th>
            <th>Cost</th>
            <th>Bytes sent / received (this site)</th>
          </tr>
        </thead>
        <tbody>
          {model.edges.map((e) => (
            <tr data-link={e.name} data-state={e.up ? "up" : "down"}>
              <td>{e.name}</td>
              <td>{model.nodes.find((n) => n.id === e.from)?.name ?? e.from}</td>
              <td>{e.toName}</td>
              <td>
                <span class={`pill ${e.up ? "ok" : "bad"}`}>{e.up ? "up" : "down"}</span>
              </td>
              <td>{e.cost}</td>
              <td data-link-bytes>{linkBytes(e)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {model.edges.length === 0 && <p class="muted">No links. Link another site with <code>meshlink token issue</code> there and <code>meshlink token redeem</code> here.</p>}
    </section>
  );
}

function update(cy: Core, model: ReturnType<typeof networkModel>) {
  let added = false;
  const want = new Set<string>();
  cy.batch(() => {
    for (const n of model.nodes) {
      want.add(n.id);
      const data = { id: n.id, label: n.name, local: n.local, reachable: n.reachable };
      const el = cy.getElementById(n.id);
      if (el.nonempty()) el.data(data);
      else {
        cy.add({ group: "nodes", data });
        added = true;
      }
    }
    for (const e of model.edges) {
      const id = `edge:${e.id}`;
      want.add(id);
      const data = { id, source: e.from, target: e.to, label: e.cost === "–" ? e.name : `${e.name} (cost ${e.cost})`, up: e.up };
      const el = cy.getElementById(id);
      if (el.nonempty() && el.data("target") === e.to) el.data(data);
      else {
        el.remove();
        cy.add({ group: "edges", data });
        added = true;
      }
    }
    cy.elements()
      .filter((el) => !want.has(el.id()))
      .remove();
  });
  if (added) cy.layout({ name: "circle", padding: 40, animate: false }).run();
  // What the graph draws, for tests: "<site>-<site>:up|down" per edge.
  const name = (id: string) => cy.getElementById(id).data("label");
  cy.container()!.dataset.edges = cy
    .edges()
    .map((e) => `${name(e.data("source"))}-${name(e.data("target"))}:${e.data("up") ? "up" : "down"}`)
    .sort()
    .join(" ");
}
