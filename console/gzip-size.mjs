// After `vite build`: writes a gzip (level 9) copy next to every built file,
// which meshlink-cp serves to browsers that accept gzip, and prints the
// sizes (docs/BENCHMARKS.md, "Console"). Fails when the compressed total
// reaches 300 KiB, the budget of issue 12.
import { gzipSync } from "node:zlib";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

const dist = new URL("../crates/cp/console/dist/", import.meta.url).pathname;
const files = [];
(function walk(dir) {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (!name.endsWith(".gz")) files.push(path);
  }
})(dist);
let raw = 0;
let gz = 0;
for (const path of files.sort()) {
  const body = readFileSync(path);
  const zipped = gzipSync(body, { level: 9 });
  writeFileSync(path + ".gz", zipped);
  raw += body.length;
  gz += zipped.length;
  console.log(`${relative(dist, path).padEnd(24)} ${String(body.length).padStart(8)} B  gzip ${String(zipped.length).padStart(7)} B`);
}
console.log(`${"total".padEnd(24)} ${String(raw).padStart(8)} B  gzip ${String(gz).padStart(7)} B (${(gz / 1024).toFixed(1)} KiB)`);
if (gz >= 300 * 1024) {
  console.error("compressed assets reach 300 KiB: over the budget");
  process.exit(1);
}
