// Drives the meshlink console in headless Chromium (Debian's
// /usr/bin/chromium through playwright-core), as a user would.
// Started by tests/e2e/tests/console.rs against a running site:
//
//   CONSOLE_URL     the control plane's API URL (the console is at /)
//   CONSOLE_TOKEN   the admin token
//   SCREENSHOT_DIR  where screenshots go (docs/img)
//   CONSOLE_DATAPLANES  the dataplanes that must be online (comma-separated)
//   CONSOLE_DELETE  the dataplane the driver deletes
//   CONSOLE_LINK    the Link that goes down and up
//   CONSOLE_SITES   "<this site>,<the site it links to>" (graph edge ends)
//
// Actions it cannot do from the browser (delete with the CLI, stop and
// start the router) it asks for on stdout, one line `ACTION <name>`, and
// waits for `DONE <name>` on stdin. Every wait is for a DOM condition with
// a deadline; nothing sleeps. Exits 0 when every step passed, 1 otherwise
// (the failing step is on stderr).
import { chromium } from "playwright-core";
import { createInterface } from "node:readline";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const url = process.env.CONSOLE_URL;
const token = process.env.CONSOLE_TOKEN;
const shots = process.env.SCREENSHOT_DIR;
const dataplanes = (process.env.CONSOLE_DATAPLANES ?? "").split(",").filter(Boolean);
const toDelete = process.env.CONSOLE_DELETE;
const link = process.env.CONSOLE_LINK;
const [siteB, siteA] = (process.env.CONSOLE_SITES ?? "").split(",");
const DEADLINE = Number(process.env.CONSOLE_DEADLINE_MS ?? 60_000);
if (!url || !token || !shots) {
  console.error("set CONSOLE_URL, CONSOLE_TOKEN and SCREENSHOT_DIR");
  process.exit(2);
}
mkdirSync(shots, { recursive: true });

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function action(name) {
  process.stdout.write(`ACTION ${name}\n`);
  const { value, done } = await lines.next();
  if (done || value.trim() !== `DONE ${name}`) throw new Error(`driver answered ${JSON.stringify(value)} to ACTION ${name}`);
}

const log = (m) => console.error(`console-test: ${m}`);
const problems = [];
let step = "start";

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  page.setDefaultTimeout(DEADLINE);
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error" && !/401/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });
  const shot = (name) => page.screenshot({ path: join(shots, `console-${name}.png`) });
  const nav = async (id) => {
    await page.click(`#nav-${id}`);
    await page.waitForSelector(`#nav-${id}.active`);
  };

  step = "a wrong token shows the error";
  await page.goto(url);
  await page.fill("#token", "not-the-admin-token");
  await page.click("button[type=submit]");
  await page.waitForSelector("#login-error");
  const text = await page.textContent("#login-error");
  if (!/Wrong admin token/.test(text) || !/401/.test(text)) throw new Error(`unexpected login error: ${text}`);
  await shot("login-error");

  step = "log in with the token";
  await page.fill("#token", token);
  await page.click("button[type=submit]");
  await page.waitForSelector("#nav-overview.active");
  if (await page.evaluate(() => sessionStorage.getItem("meshlink.adminToken")) !== token) throw new Error("token not kept in sessionStorage");
  if (page.url().includes(token)) throw new Error("the token is in the URL");
  // Gone if the page ever reloads.
  await page.evaluate(() => (window.__sameDocument = true));

  step = "dataplanes online, each with a certificate countdown";
  await nav("dataplanes");
  for (const dp of dataplanes) {
    await page.waitForSelector(`tr[data-dataplane="${dp}"] [data-state=online]`);
    await page.waitForFunction((dp) => /\d+s$/.test(document.querySelector(`tr[data-dataplane="${dp}"] .countdown`)?.textContent ?? ""), dp);
  }
  const first = await page.textContent(`tr[data-dataplane="${dataplanes[0]}"] .countdown`);
  await page.waitForFunction(
    ([dp, t]) => document.querySelector(`tr[data-dataplane="${dp}"] .countdown`)?.textContent !== t,
    [dataplanes[0], first],
  );
  await shot("dataplanes");

  step = "a dataplane's detail shows xDS versions and its certificate";
  await page.click(`tr[data-dataplane="${dataplanes[0]}"] a`);
  await page.waitForSelector("#xds-types tbody tr");
  step = "the dataplane's inbounds name their service, then where the app listens";
  const inbound = await page.textContent("#inbounds tbody tr");
  if (!/^\s*\d+\s*web\s*127\.0\.0\.1:\d+/.test(inbound)) throw new Error(`unexpected inbound row: ${inbound}`);
  step = "the dataplane's unhealthy endpoints (none: no health check fails here)";
  await page.waitForSelector("#unhealthy-endpoints-none");
  await shot("dataplane-detail");

  step = "overview, meshes, policies, services, control planes";
  await nav("overview");
  await page.waitForSelector(".cards .card");
  await shot("overview");
  await nav("meshes");
  await page.waitForFunction(() => [...document.querySelectorAll("td.mono")].some((td) => /[0-9a-f]{2}/i.test(td.textContent)));
  await shot("meshes");
  await nav("policies");
  await page.waitForSelector(`td[data-from=web][data-to=backend] .pill.ok`);
  step = "the Policies page lists the L7 policies with what they set";
  await page.waitForFunction(
    () => document.querySelector(`#l7-policies tr[data-kind=MeshRateLimit][data-policy=backend-limit] [data-sets]`)?.textContent === "1000 requests / 1s",
  );
  await shot("policies");
  step = "a permission with rules (SPIFFE ID matches) decides the matrix cell";
  await action("deny-web-by-rules");
  await page.waitForSelector(`td[data-from=web][data-to=backend] .pill.bad`);
  await page.waitForSelector(`td[data-from=backend][data-to=web] .pill.ok`);
  await nav("services");
  await page.waitForFunction(() => /console-b/.test(document.querySelector(`tr[data-routing-key=backend] [data-resolves]`)?.textContent ?? ""));
  step = "the Services page shows the traffic figures the router reported for the backend key";
  await page.waitForFunction(() => /^\d+ \/ [1-9]\d*$/.test(document.querySelector(`tr[data-routing-key=backend] [data-flows]`)?.textContent ?? ""));
  step = "the Services page shows the mesh service traffic backend's sidecar reported";
  await page.waitForFunction(() => /^\d+ \/ [1-9]\d*$/.test(document.querySelector(`#mesh-services tr[data-service=backend] [data-connections]`)?.textContent ?? ""));
  const serviceBytes = await page.textContent(`#mesh-services tr[data-service=backend] [data-service-bytes]`);
  if (!/^[1-9][\d.]* k?B \/ [1-9][\d.]* k?B$/.test(serviceBytes.trim())) throw new Error(`unexpected backend bytes: ${serviceBytes}`);
  step = "the Services page shows mesh services with health, naming the unhealthy Dataplane";
  await page.waitForSelector(`#mesh-services tr[data-service=web][data-health=online]`);
  const backendRow = `#mesh-services tr[data-service=backend][data-health="partially degraded"]`;
  await page.waitForSelector(backendRow);
  const healthy = (await page.textContent(`${backendRow} [data-healthy]`)).trim();
  if (healthy !== "1/2") throw new Error(`backend healthy ${healthy}, expected 1/2`);
  const why = await page.textContent(`${backendRow} [data-unhealthy=backend-2]`);
  if (!/never connected/.test(why)) throw new Error(`unexpected reason for backend-2: ${why}`);
  await shot("services");
  step = "the Services page shows backend's MeshHTTPRoute with its 90/10 split and the Kuma defaults";
  const split = `#service-routes [data-service=backend] tr[data-route=backend-split]`;
  await page.waitForSelector(`${split} [data-backend=backend][data-weight="90"]`);
  const row = await page.textContent(split);
  if (!/PathPrefix \/api/.test(row) || !/backend\s*90%/.test(row) || !/backend-v2\s*10%/.test(row)) throw new Error(`unexpected route row: ${row}`);
  const timeout = await page.textContent(`#service-routes [data-service=backend] tr[data-field=idleTimeout]`);
  if (!/1h\s*Kuma default/.test(timeout)) throw new Error(`unexpected idleTimeout row: ${timeout}`);
  await page.locator(`#service-routes [data-service=backend]`).screenshot({ path: join(shots, "console-service-routes.png") });
  await nav("controlplanes");
  await page.waitForSelector("main table tbody tr");
  await shot("controlplanes");

  step = "two sites linked in the network graph";
  await nav("network");
  await page.waitForSelector("#graph canvas");
  await page.waitForSelector(`#graph[data-edges="${siteB}-${siteA}:up"]`);
  await page.waitForSelector(`#links tr[data-link="${link}"][data-state=up]`);
  step = "the Links table shows the bytes this site's router moved on the link";
  await page.waitForFunction(
    (link) => /^[1-9][\d.]* [kMG]?B \/ [1-9][\d.]* [kMG]?B$/.test(document.querySelector(`#links tr[data-link="${link}"] [data-link-bytes]`)?.textContent?.trim() ?? ""),
    link,
  );
  await shot("network");

  step = "the router stops: the link turns down";
  await action("stop-router");
  await page.waitForSelector(`#links tr[data-link="${link}"][data-state=down]`);
  await page.waitForSelector(`#graph[data-edges="${siteB}-${siteA}:down"]`);
  await shot("network-link-down");
  await nav("overview");
  await page.waitForSelector("#attention");
  step = "needs attention names the cause: this site's router is not reporting";
  await page.waitForFunction(() => /is not Ready: this site's router is not reporting/.test(document.querySelector("#attention")?.textContent ?? ""));
  await shot("overview-attention");
  await nav("network");

  step = "the router starts again: the link turns up";
  await action("start-router");
  await page.waitForSelector(`#links tr[data-link="${link}"][data-state=up]`);
  await page.waitForSelector(`#graph[data-edges="${siteB}-${siteA}:up"]`);

  step = "a Connector whose target refuses connections needs attention";
  await action("unreachable-connector");
  await nav("overview");
  await page.waitForFunction(() => /Connector ghost: the site's router cannot connect to \S+: Connection refused/.test(document.querySelector("#attention")?.textContent ?? ""));

  step = "a dataplane deleted with the CLI disappears without a reload";
  await nav("dataplanes");
  await page.waitForSelector(`tr[data-dataplane="${toDelete}"]`);
  await action("delete-dataplane");
  await page.waitForSelector(`tr[data-dataplane="${toDelete}"]`, { state: "detached" });
  if (!(await page.evaluate(() => window.__sameDocument === true))) throw new Error("the page reloaded");

  step = "no page errors or CSP violations";
  if (problems.length) throw new Error(problems.join("\n"));
  log("every step passed");
  process.stdout.write("PASS\n");
} catch (e) {
  log(`FAILED at "${step}": ${e.message}`);
  if (problems.length) log(`also: ${problems.join("; ")}`);
  process.exitCode = 1;
} finally {
  await browser.close();
  process.exit(process.exitCode ?? 0);
}
