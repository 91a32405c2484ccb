// The signed-in layout: navigation, the watch feed's state and the page of
// the current `#/route`.
import { useEffect } from "preact/hooks";
import type { Store } from "./store";
import { useRoute, useStore } from "./hooks";
import { Overview } from "./pages/overview";
import { Meshes } from "./pages/meshes";
import { Dataplanes } from "./pages/dataplanes";
import { DataplaneDetail } from "./pages/dataplane-detail";
import { Policies } from "./pages/policies";
import { Network } from "./pages/network";
import { Services } from "./pages/services";
import { ControlPlanes } from "./pages/controlplanes";

const PAGES: [string, string][] = [
  ["", "Overview"],
  ["meshes", "Meshes"],
  ["dataplanes", "Dataplanes"],
  ["policies", "Policies"],
  ["network", "Network"],
  ["services", "Services"],
  ["controlplanes", "Control planes"],
];

export function Shell({ store, onLogout }: { store: Store; onLogout: () => void }) {
  useStore(store);
  // For tests/console/measure.mjs (docs/BENCHMARKS.md, "Console"): the
  // first render with every list loaded has been painted.
  useEffect(() => void performance.mark("console-interactive"), []);
  const route = useRoute();
  const page = route[0] ?? "";
  let body;
  switch (page) {
    case "meshes":
      body = <Meshes store={store} />;
      break;
    case "dataplanes":
      body = route.length >= 3 ? <DataplaneDetail store={store} mesh={route[1]} name={route[2]} /> : <Dataplanes store={store} />;
      break;
    case "policies":
      body = <Policies store={store} />;
      break;
    case "network":
      body = <Network store={store} />;
      break;
    case "services":
      body = <Services store={store} />;
      break;
    case "controlplanes":
      body = <ControlPlanes />;
      break;
    default:
      body = <Overview store={store} />;
  }
  return (
    <div class="shell">
      <nav>
        <span class="brand">meshlink</span>
        {PAGES.map(([path, label]) => (
          <a href={`#/${path}`} class={page === path ? "active" : ""} id={`nav-${path || "overview"}`}>
            {label}
          </a>
        ))}
        <span class={`feed feed-${store.feed}`} id="feed" title={store.feedError || `watching from revision ${store.revision}`}>
          {store.feed === "live" ? "● live" : store.feed === "retrying" ? `● reconnecting: ${store.feedError}` : "● connecting"}
        </span>
        <button class="logout" onClick={onLogout}>
          Sign out
        </button>
      </nav>
      <main>{body}</main>
    </div>
  );
}
