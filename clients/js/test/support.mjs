// Shared parts of the JS tests: the real gateway with a scripted model server (started
// through test/gateway.py), the triage schema and values, a TCP proxy that cuts a
// connection, a raw SSE server for hostile messages, and headless Chromium with the gateway.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { connect, createServer as createTcpServer } from "node:net";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";

import * as esbuild from "esbuild";
import { chromium } from "playwright-core";

export const PACKAGE = dirname(dirname(fileURLToPath(import.meta.url)));
export const REPO = dirname(dirname(PACKAGE));

/** The Python that has slotflight installed: $SLOTFLIGHT_PYTHON, the repo's venv, python3. */
export function python() {
  if (process.env.SLOTFLIGHT_PYTHON) return process.env.SLOTFLIGHT_PYTHON;
  const venv = join(REPO, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

export const TRIAGE_SCHEMA = JSON.parse(
  readFileSync(join(REPO, "slotflight", "web", "static", "triage.schema.json"), "utf8"),
);

export const TRIAGE_VALUE = {
  summary: "Export job fails with a timeout for large workspaces",
  sentiment: "negative",
  priority: 2,
  tags: ["export", "timeout"],
  action_items: [
    { task: "Raise the export timeout", owner: "platform", due: "2025-07-01" },
    { task: "Reply to the customer", owner: "support", due: "2025-06-20" },
  ],
};

/** A summary long enough to stream as many deltas. */
export const LONG_VALUE = {
  ...TRIAGE_VALUE,
  summary: Array.from({ length: 40 }, (_, i) => `Export step ${i} times out after ten minutes;`).join(" ") + " ünïcödé ✓ end.",
};

/** Every leaf of a triage value, by JSON Pointer. */
export function leaves(value, prefix = "", out = {}) {
  if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) leaves(item, `${prefix}/${key}`, out);
  } else out[prefix] = value;
  return out;
}

/** The request body for the gateway. */
export function body(options = {}, schema = TRIAGE_SCHEMA) {
  return {
    model: "m",
    messages: [{ role: "user", content: "Our export keeps timing out." }],
    schema,
    options,
  };
}

/**
 * Start the gateway and its scripted model server; `command(obj)` sends a command to
 * the harness and resolves with its answer; `close()` stops both.
 */
export async function startGateway(args = []) {
  const child = spawn(python(), [join(PACKAGE, "test", "gateway.py"), ...args], {
    stdio: ["pipe", "pipe", "pipe"],
  });
  // The servers' logs (disconnects the tests cause on purpose) are shown only if the
  // harness fails.
  let log = "";
  child.stderr.on("data", (data) => {
    log = (log + data.toString()).slice(-20_000);
  });
  child.once("exit", (code) => {
    if (code) process.stderr.write(`gateway harness exited with ${code}:\n${log}\n`);
  });
  const lines = createInterface({ input: child.stdout });
  const waiting = [];
  const queued = [];
  let exited;
  lines.on("line", (line) => {
    const next = waiting.shift();
    if (next) next.resolve(JSON.parse(line));
    else queued.push(JSON.parse(line));
  });
  // One listener for every read (not one per command).
  child.once("exit", (code) => {
    exited = new Error(`the gateway harness exited (${code})`);
    for (const next of waiting.splice(0)) next.reject(exited);
  });
  const read = () =>
    new Promise((resolve, reject) => {
      if (queued.length) return resolve(queued.shift());
      if (exited) return reject(exited);
      waiting.push({ resolve, reject });
    });
  const urls = await read();
  let chain = Promise.resolve();
  const command = (message) => {
    const result = chain.then(() => {
      child.stdin.write(`${JSON.stringify(message)}\n`);
      return read();
    });
    chain = result.catch(() => {});
    return result.then((answer) => {
      if (answer.error) throw new Error(answer.error);
      return answer;
    });
  };
  return {
    url: urls.gateway,
    streams: `${urls.gateway}/v1/slot-streams`,
    command,
    /** Queue model replies: objects with `value` (and `schema`) or `text`, plus Reply fields. */
    add: (...replies) =>
      command({ op: "add", replies: replies.map((r) => ("value" in r ? { schema: TRIAGE_SCHEMA, ...r } : r)) }),
    close: () =>
      new Promise((resolve) => {
        child.once("exit", resolve);
        child.stdin.end();
      }),
  };
}

/**
 * A TCP proxy to `target` (host:port of a URL) that closes the first connection once
 * `cutAfter` bytes have come back from the target (`refuseLater`: and closes every later
 * connection at once). `requests` holds the request text each connection sent;
 * `connections` counts them.
 */
export async function cuttingProxy(target, cutAfter, { refuseLater = false } = {}) {
  const { hostname, port } = new URL(target);
  const state = { connections: 0, requests: [], opened: [], cutAt: undefined };
  const server = createTcpServer((client) => {
    const index = state.connections++;
    state.opened[index] = Date.now();
    if (refuseLater && index > 0) {
      client.destroy();
      return;
    }
    state.requests[index] = "";
    const upstream = connect(Number(port), hostname);
    let back = 0;
    client.on("data", (data) => {
      state.requests[index] += data.toString("latin1");
      upstream.write(data);
    });
    upstream.on("data", (data) => {
      if (index === 0 && back + data.length >= cutAfter) {
        client.write(data.subarray(0, Math.max(0, cutAfter - back)));
        state.cutAt = Date.now();
        client.destroy();
        upstream.destroy();
        return;
      }
      back += data.length;
      client.write(data);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    state,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * An HTTP server answering every POST with `respond(res)`: a hostile "gateway" for
 * messages the real one never sends.
 */
export async function rawServer(respond) {
  const server = createServer((req, res) => {
    req.resume();
    respond(req, res);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/v1/slot-streams`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

/** SSE text for messages given as [event, data, id] (id left out when undefined). */
export function sse(messages) {
  return messages
    .map(([event, data, id]) => `${id === undefined ? "" : `id: ${id}\n`}event: ${event}\ndata: ${typeof data === "string" ? data : JSON.stringify(data)}\n\n`)
    .join("");
}

/** Debian's Chromium, the flags the browser tests launch it with, and whether it is missing. */
export const CHROMIUM = "/usr/bin/chromium";
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];
export const chromiumMissing = !existsSync(CHROMIUM);

/**
 * The gateway and headless Chromium for the tests of one file: started before them and
 * closed after them (nothing when Chromium is missing, which CI does not allow). The
 * returned object holds `gateway` and `browser` once the tests run.
 */
export function browserAndGateway() {
  if (chromiumMissing && process.env.CI === "true") throw new Error(`Chromium is not installed at ${CHROMIUM}`);
  const env = { gateway: undefined, browser: undefined };
  before(async () => {
    if (chromiumMissing) return;
    env.gateway = await startGateway();
    env.browser = await chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
  });
  after(async () => {
    await env.browser?.close();
    await env.gateway?.close();
  });
  return env;
}

/**
 * A page at the gateway's origin (so the app's requests are same-origin) running a React
 * app bundled with esbuild: `source` names a file in test/fixtures, or is `{ contents }`,
 * the app's JSX; with React's production build (minified) or its development build. The
 * page holds `window.requestBody`, the triage request body.
 */
export async function appPage(env, source, mode = "production") {
  const entry =
    typeof source === "string"
      ? { entryPoints: [join("test", "fixtures", source)] }
      : { stdin: { contents: source.contents, loader: "jsx", resolveDir: join(PACKAGE, "test"), sourcefile: "app.jsx" } };
  const built = await esbuild.build({
    absWorkingDir: PACKAGE,
    ...entry,
    bundle: true,
    format: "iife",
    jsx: "automatic",
    define: { "process.env.NODE_ENV": JSON.stringify(mode) },
    minify: mode === "production",
    write: false,
  });
  const page = await env.browser.newPage();
  const html = `<!doctype html><meta charset="utf-8"><div id="root"></div>
<script>window.requestBody = ${JSON.stringify(body())};</script>
<script>${built.outputFiles[0].text.replace(/<\/script/g, "<\\/script")}</script>`;
  await page.route(`${env.gateway.url}/app`, (route) => route.fulfill({ contentType: "text/html", body: html }));
  await page.goto(`${env.gateway.url}/app`);
  return page;
}
