// Mesh services with health, as the Kuma GUI's Services list shows them:
// each service (the `kuma.io/service` tag of Dataplane inbounds, and every
// MeshService) with its Dataplanes, how many are healthy, and why the
// others are not. A Dataplane inbound is healthy when the Dataplane is
// Ready (connected, certificate valid, configuration ACKed), its app is
// reachable (`AppReachable` not False) and the inbound is not marked
// `health.ready: false`.
import { condition, type Resource, type Store } from "./store";

export type Health = "online" | "partially degraded" | "offline";

export interface Member {
  dataplane: string;
  healthy: boolean;
  /** Why not healthy (empty when healthy). */
  why: string;
}

export interface MeshServiceHealth {
  mesh: string;
  name: string;
  members: Member[];
  healthy: number;
  health: Health;
  /** A MeshService of this name, if one exists. */
  meshService?: Resource;
}

function member(dp: Resource, inbound: any): Member {
  const ready = condition(dp, "Ready");
  const app = condition(dp, "AppReachable");
  let why = "";
  if (!dp.status?.online) why = ready?.message || "not connected";
  else if (ready && !ready.ok) why = `${ready.reason}: ${ready.message}`;
  else if (app && !app.ok) why = `${app.reason}: ${app.message}`;
  else if (inbound?.health?.ready === false) why = "inbound marked health.ready: false";
  return { dataplane: dp.metadata.name, healthy: why === "", why };
}

export function health(healthy: number, total: number): Health {
  if (total > 0 && healthy === total) return "online";
  return healthy > 0 ? "partially degraded" : "offline";
}

export function meshServices(store: Store): MeshServiceHealth[] {
  const byKey = new Map<string, MeshServiceHealth>();
  const entry = (mesh: string, name: string) => {
    const k = `${mesh}/${name}`;
    if (!byKey.has(k)) byKey.set(k, { mesh, name, members: [], healthy: 0, health: "offline" });
    return byKey.get(k)!;
  };
  for (const dp of store.list("Dataplane")) {
    const mesh = dp.metadata.mesh ?? "default";
    const seen = new Set<string>();
    for (const inbound of dp.spec?.networking?.inbound ?? []) {
      const service = inbound.tags?.["kuma.io/service"];
      if (!service || seen.has(service)) continue;
      seen.add(service);
      entry(mesh, service).members.push(member(dp, inbound));
    }
  }
  for (const ms of store.list("MeshService")) entry(ms.metadata.mesh ?? "default", ms.metadata.name).meshService = ms;
  const out = [...byKey.values()];
  for (const s of out) {
    s.members.sort((a, b) => a.dataplane.localeCompare(b.dataplane));
    s.healthy = s.members.filter((m) => m.healthy).length;
    s.health = health(s.healthy, s.members.length);
  }
  return out.sort((a, b) => a.mesh.localeCompare(b.mesh) || a.name.localeCompare(b.name));
}
