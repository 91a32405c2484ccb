// Measures the console in headless Chromium (docs/BENCHMARKS.md, "Console"):
// time to first paint, and time to interactive (every list loaded and the
// shell painted: the `console-interactive` mark) then to a re-sorted
// Dataplanes table, against a running control plane. Not a test: prints
// the runs and their medians.
//
//   CONSOLE_URL=http://127.0.0.1:5681 CONSOLE_TOKEN=... [RUNS=5] node measure.mjs
import { chromium } from "playwright-core";

const url = process.env.CONSOLE_URL;
const token = process.env.CONSOLE_TOKEN;
const runs = Number(process.env.RUNS ?? 5);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: ["--no-sandbox", "--disable-gpu"] });
const rows = [];
for (let i = 0; i < runs; i++) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } }); // cold cache
  await ctx.addInitScript((t) => sessionStorage.setItem("meshlink.adminToken", t), token);
  const page = await ctx.newPage();
  await page.goto(`${url}/#/dataplanes`);
  await page.waitForSelector("#dataplanes tbody tr", { timeout: 60_000 });
  const t = await page.evaluate(() => ({
    fp: performance.getEntriesByName("first-paint")[0]?.startTime,
    fcp: performance.getEntriesByName("first-contentful-paint")[0]?.startTime,
    interactive: performance.getEntriesByName("console-interactive")[0]?.startTime,
    rows: document.querySelectorAll("#dataplanes tbody tr").length,
  }));
  const before = await page.textContent("#dataplanes tbody tr td");
  const s0 = await page.evaluate(() => performance.now());
  await page.click("#dataplanes th"); // Name: descending
  await page.waitForFunction((b) => document.querySelector("#dataplanes tbody tr td")?.textContent !== b, before);
  t.sort = (await page.evaluate(() => performance.now())) - s0;
  rows.push(t);
  console.log(`run ${i + 1}: first paint ${t.fp?.toFixed(0)} ms, first contentful paint ${t.fcp?.toFixed(0)} ms, interactive ${t.interactive?.toFixed(0)} ms, ${t.rows} rows shown, re-sort ${t.sort.toFixed(0)} ms`);
  await ctx.close();
}
const median = (k) => rows.map((r) => r[k]).sort((a, b) => a - b)[Math.floor(rows.length / 2)];
console.log(`median: first paint ${median("fp").toFixed(0)} ms, first contentful paint ${median("fcp").toFixed(0)} ms, interactive ${median("interactive").toFixed(0)} ms, re-sort ${median("sort").toFixed(0)} ms`);
await browser.close();
