// The `fetch` a stream is given, and the caller's signal, at their edges, over real HTTP
// from a raw SSE server: a `fetch` that drops the signal it is passed (a wrapper that
// rebuilds the request), one that throws or rejects with what is not an Error, an abort
// as soon as the stream was made or while it waits to reconnect, and a message that
// comes whole in one read past the bound.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { sseParser, streamSlots } from "../dist/index.js";
import { rawServer, sse } from "./support.mjs";

const servers = [];
after(() => Promise.all(servers.map((s) => s.close())));

const slot = { slot: "title", path: "/title", slot_id: 1, index: null, attempt: 1 };
const START = ["slot-start", { type: "slot-start", ...slot, patch: [{ op: "add", path: "/title", value: "" }] }, 1];

/** A raw server; `requests` counts the requests, `closed` the connections that closed. */
async function server(respond) {
  const seen = { requests: 0, closed: 0 };
  const raw = await rawServer((req, res) => {
    seen.requests += 1;
    res.on("close", () => (seen.closed += 1));
    respond(req, res, seen.requests - 1);
  });
  servers.push(raw);
  return { url: raw.url, seen };
}

/** A `fetch` that passes everything on but the signal. */
const deaf = (url, init) => fetch(url, { ...init, signal: undefined });

/** Wait until `check()` holds, polling (at most `rounds` times). */
async function until(check, rounds = 200) {
  for (let i = 0; i < rounds && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.ok(check());
}

test("a fetch that drops its signal: abort() before the answer rejects the result; the late answer is closed", { timeout: 20_000 }, async () => {
  let answer;
  const { url, seen } = await server((_req, res) => {
    answer = () => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse([START])); // and never ends
    };
  });
  const stream = streamSlots(url, {}, { fetch: deaf });
  await until(() => seen.requests === 1);
  const reason = new Error("stop");
  stream.abort(reason);
  assert.equal(await stream.result.then(() => "resolved", (e) => e), reason);
  answer();
  await until(() => seen.closed === 1);
});

test("a fetch that drops its signal: abort() while reading closes the body and rejects the result", { timeout: 20_000 }, async () => {
  const { url, seen } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(sse([START])); // and never ends
  });
  const stream = streamSlots(url, {}, { fetch: deaf });
  await new Promise((resolve) => stream.on("message", resolve));
  const reason = new Error("stop");
  stream.abort(reason);
  assert.equal(await stream.result.then(() => "resolved", (e) => e), reason);
  await until(() => seen.closed === 1);
});

test("a fetch that drops its signal: the idle timeout still ends a stalled stream and its error body", { timeout: 20_000 }, async () => {
  const { url, seen } = await server((req, res, index) => {
    if (index === 0) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse([START]));
    } else {
      res.writeHead(500, { "content-type": "application/json" });
      res.write('{"error": '); // and never ends
    }
  });
  const stalled = streamSlots(url, {}, { fetch: deaf, idleTimeoutMs: 200 });
  await assert.rejects(stalled.result, { code: "idle_timeout" });
  const erroring = streamSlots(url, {}, { fetch: deaf, idleTimeoutMs: 200 });
  await assert.rejects(erroring.result, { code: "idle_timeout" });
  await until(() => seen.closed === 2);
});

test("a fetch that throws instead of rejecting is network_error", { timeout: 20_000 }, async () => {
  const error = new TypeError("Failed to parse URL");
  const stream = streamSlots("http://127.0.0.1:9/v1/slot-streams", {}, {
    fetch: () => {
      throw error;
    },
  });
  await assert.rejects(stream.result, (e) => e.code === "network_error" && e.cause === error);
});

test("a fetch that rejects with what is not an Error: network_error, or the abort's reason", { timeout: 20_000 }, async () => {
  for (const value of ["aborted", undefined, 42, Object.create(null), { toString: null }, Symbol("s")]) {
    const failing = streamSlots("http://127.0.0.1:9/v1/slot-streams", {}, { fetch: () => Promise.reject(value) });
    await assert.rejects(failing.result, (e) => e.code === "network_error" && e.cause === value);
    const aborted = streamSlots("http://127.0.0.1:9/v1/slot-streams", {}, {
      fetch: (_url, init) => new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(value))),
    });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const reason = new Error("stop");
    aborted.abort(reason);
    assert.equal(await aborted.result.then(() => "resolved", (e) => e), reason);
  }
});

test("a stream aborted as soon as it was made sends no request", { timeout: 20_000 }, async () => {
  const { url, seen } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(sse([START]));
  });
  let fetches = 0;
  const counting = (...args) => {
    fetches += 1;
    return fetch(...args);
  };
  const page = new AbortController();
  const byCaller = streamSlots(url, {}, { signal: page.signal, fetch: counting });
  page.abort(new Error("left the page"));
  await assert.rejects(byCaller.result, { message: "left the page" });
  const byAbort = streamSlots(url, {}, { fetch: counting });
  byAbort.abort(new Error("replaced"));
  await assert.rejects(byAbort.result, { message: "replaced" });
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(fetches, 0, "fetch was not called");
  assert.equal(seen.requests, 0);
});

test("the request carries the body as it was when the stream was made", { timeout: 20_000 }, async () => {
  const { url } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(sse([["done", { type: "done", attempt: 1, state: { title: "x" } }, 1]]));
  });
  const sent = [];
  const messages = [{ role: "user", content: "first" }];
  const stream = streamSlots(url, { messages }, { fetch: (u, init) => (sent.push(init.body), fetch(u, init)) });
  messages.push({ role: "assistant", content: "" }); // the caller goes on with its list
  await stream.result;
  assert.deepEqual(sent.map((text) => JSON.parse(text)), [{ messages: [{ role: "user", content: "first" }] }]);
});

test("the caller's signal aborted while the stream waits to reconnect: no reconnection", { timeout: 20_000 }, async () => {
  const { url, seen } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", location: "/v1/slot-streams/s1/events" });
    res.end(`retry: 60000\n${sse([START])}`); // dropped before done
  });
  const page = new AbortController();
  const stream = streamSlots(url, {}, { signal: page.signal });
  await new Promise((resolve) => stream.on("message", resolve));
  await until(() => seen.closed === 1);
  page.abort(new Error("left the page"));
  await assert.rejects(stream.result, { message: "left the page" });
  assert.equal(seen.requests, 1);
});

test("a message that comes whole in one read is bounded too (message_too_large)", { timeout: 20_000 }, async () => {
  const messages = [];
  const feed = sseParser({ onMessage: (m) => messages.push(m) && false, onRetry: () => {} }, 1000);
  const junk = JSON.stringify({ type: "note", junk: "a".repeat(5000) });
  assert.throws(() => feed(`data: ${junk}\n\n`), { code: "message_too_large" });
  assert.deepEqual(messages, []);
  assert.throws(() => sseParser({ onMessage: () => false, onRetry: () => {} }, 1000)(`${"data: aaaa\n".repeat(300)}\n`), {
    code: "message_too_large",
  });
  // Through a stream: an unknown message adds nothing to the state, its text is still bounded.
  const { url } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(`id: 1\nevent: note\ndata: ${junk}\n\n`);
  });
  const stream = streamSlots(url, {}, { maxStateChars: 1000, maxReconnects: 0 });
  await assert.rejects(stream.result, { code: "message_too_large" });
});
