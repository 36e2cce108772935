// A finished stream, reconnected to: the real gateway (`create_app` on uvicorn,
// 127.0.0.1) answers a resume at the stream's terminal message with 204 and no body,
// which ends an EventSource (it reconnects whenever the server closes the connection,
// so an empty 200 had it reconnect forever); streamSlots never reconnects once `done`
// or `error` was applied, and ends at once on a 204.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, test } from "node:test";

import { streamSlots } from "../dist/index.js";
import { TRIAGE_VALUE, body, cuttingProxy, rawServer, sse, startGateway } from "./support.mjs";

/** The gateway's retry hint in this file (ms): short, so an EventSource reconnects soon. */
const RETRY_MS = 50;
/** Connections an EventSource may open before it counts as reconnecting forever. */
const MAX_OPENS = 4;
const RESUMES = /GET \/v1\/slot-streams\/[0-9a-f]+\/events /g;
let gateway;

before(async () => {
  gateway = await startGateway(["--retry-ms", String(RETRY_MS)]);
});
after(() => gateway.close());

/** POST a stream and read it to its end: its Location and message ids. */
async function finishedStream() {
  await gateway.add({ value: TRIAGE_VALUE, chunks: 4 });
  const response = await fetch(gateway.streams, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body()),
  });
  const text = await response.text();
  assert.match(text, /event: done/);
  const ids = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
  return { location: new URL(response.headers.get("location"), gateway.url).href, ids };
}

test("a resume at a finished stream's last message is answered 204, an earlier one with the rest", async () => {
  const { location, ids } = await finishedStream();
  const last = ids.at(-1);
  const ended = await fetch(location, { headers: { "last-event-id": String(last) } });
  assert.equal(ended.status, 204);
  assert.equal(await ended.text(), "");
  const rest = await fetch(location, { headers: { "last-event-id": String(last - 2) } });
  assert.equal(rest.status, 200);
  const text = await rest.text();
  assert.deepEqual([...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1])), [last - 1, last]);
  assert.match(text, /event: done/);
});

test("streamSlots sends no request after a stream's done", async () => {
  await gateway.add({ value: TRIAGE_VALUE, chunks: 4 });
  const proxy = await cuttingProxy(gateway.url, Infinity);
  try {
    const result = await streamSlots(`${proxy.url}/v1/slot-streams`, body()).result;
    assert.deepEqual(result.object, TRIAGE_VALUE);
    await new Promise((resolve) => setTimeout(resolve, 3 * RETRY_MS));
    assert.equal(proxy.state.requests.join("").match(RESUMES), null, "no reconnection");
  } finally {
    await proxy.close();
  }
});

/**
 * Open Node's EventSource (behind --experimental-eventsource) on `url` in a child
 * process: the ids it got, how many connections it opened, and whether it closed
 * (readyState 2) before opening MAX_OPENS; `undefined` where Node has none.
 */
function eventSource(url) {
  const script = `
    if (typeof EventSource !== "function") { console.log(JSON.stringify({ missing: true })); process.exit(0); }
    const ids = [];
    let opens = 0;
    const source = new EventSource(${JSON.stringify(url)});
    const report = (closed) => { console.log(JSON.stringify({ ids, opens, closed })); source.close(); process.exit(0); };
    setTimeout(() => report(false), 20000);
    source.onopen = () => { if (++opens >= ${MAX_OPENS}) report(false); };
    source.addEventListener("done", (e) => ids.push(Number(e.lastEventId)));
    source.addEventListener("slot-start", (e) => ids.push(Number(e.lastEventId)));
    source.onerror = () => { if (source.readyState === 2) report(true); };
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--experimental-eventsource", "--no-warnings", "-e", script], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (data) => (out += data));
    child.stderr.on("data", (data) => (err += data));
    child.on("exit", (code) => {
      if (/bad option/.test(err)) return resolve(undefined);
      if (code !== 0) return reject(new Error(`EventSource child exited with ${code}: ${err}`));
      const answer = JSON.parse(out);
      resolve(answer.missing ? undefined : answer);
    });
  });
}

test("a plain EventSource stops once it read a finished stream: its reconnection gets 204", async (t) => {
  const { location, ids } = await finishedStream();
  const proxy = await cuttingProxy(gateway.url, Infinity);
  try {
    const seen = await eventSource(new URL(new URL(location).pathname, proxy.url).href);
    if (seen === undefined) return t.skip("this Node has no EventSource");
    assert.equal(seen.closed, true, `still reconnecting after ${seen.opens} connections`);
    assert.equal(seen.opens, 1);
    assert.equal(seen.ids.at(-1), ids.at(-1), "it read the stream to its done");
    const resumes = proxy.state.requests.join("").match(RESUMES);
    assert.equal(resumes.length, 2, "the read, then one reconnection");
    assert.match(proxy.state.requests.join(""), new RegExp(`last-event-id: ${ids.at(-1)}\\r\\n`, "i"));
  } finally {
    await proxy.close();
  }
});

test("a reconnection answered 204 ends streamSlots at once, naming the last id it had", async () => {
  const heads = [];
  const raw = await rawServer((req, res) => {
    heads.push([req.method, req.headers["last-event-id"]]);
    if (req.method === "GET") return res.writeHead(204).end();
    res.writeHead(200, { "content-type": "text/event-stream", location: "/v1/slot-streams/s1/events" });
    const slot = { slot: "title", path: "/title", slot_id: 1, index: null, attempt: 1 };
    res.end(
      `retry: 1\n\n${sse([
        ["slot-start", { type: "slot-start", ...slot, patch: [{ op: "add", path: "/title", value: "" }] }, 1],
        ["slot-delta", { type: "slot-delta", ...slot, delta: "Hello" }, 2],
      ])}`,
    );
  });
  try {
    const stream = streamSlots(raw.url, {});
    const error = await stream.result.then((r) => r, (e) => e);
    assert.equal(error.code, "http_error", String(error));
    assert.equal(error.status, 204);
    assert.match(error.message, /no message after 2: it ended/);
    assert.deepEqual(heads, [["POST", undefined], ["GET", "2"]], "not tried again");
    assert.deepEqual(stream.object, { title: "Hello" });
  } finally {
    await raw.close();
  }
});
