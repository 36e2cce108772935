// How streamSlots handles its connections, over real HTTP from a raw SSE server: a signal
// aborted before the start, the caller's signal after the end, reconnections answered
// 503, the wait before reconnecting, and the code of a connection cut after its answer.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { after, test } from "node:test";

import { streamSlots } from "../dist/index.js";
import { rawServer, sse } from "./support.mjs";

const servers = [];
after(() => Promise.all(servers.map((s) => s.close())));

const slot = { slot: "title", path: "/title", slot_id: 1, index: null, attempt: 1 };
const START = ["slot-start", { type: "slot-start", ...slot, patch: [{ op: "add", path: "/title", value: "" }] }, 1];
const HELLO = ["slot-delta", { type: "slot-delta", ...slot, delta: "Hello" }, 2];
const DONE = ["done", { type: "done", attempt: 1, state: { title: "Hello" } }, 3];
const EVENTS = "/v1/slot-streams/s1/events";

/** A raw server; `heads` holds each request's method, path and Last-Event-ID. */
async function server(respond) {
  const heads = [];
  const raw = await rawServer((req, res) => {
    heads.push([req.method, req.url, req.headers["last-event-id"]]);
    respond(req, res, heads.length - 1);
  });
  servers.push(raw);
  return { url: raw.url, heads };
}

const notice = (code) => `event: error\ndata: ${JSON.stringify({ type: "error", error: { code, message: code } })}\n\n`;

function jsonError(res, status, code) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ error: { code, message: `${code} (test)` } }));
}

test("a signal aborted before the start: no request is sent, the result rejects with its reason", async () => {
  const { url, heads } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(sse([START, HELLO, DONE]));
  });
  const reason = new Error("cancelled before the start");
  const stream = streamSlots(url, {}, { signal: AbortSignal.abort(reason) });
  const ends = [];
  stream.on("end", (end) => ends.push(end));
  assert.equal(await stream.result.then(() => "resolved", (e) => e), reason);
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(heads, [], "the gateway got no request");
  assert.deepEqual(ends.map((end) => [end.ok, end.error]), [[false, reason]]);
  assert.deepEqual(stream.object, {});
});

test("the caller's signal keeps no listener once a stream has ended, whichever way", async () => {
  const { url } = await server((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (req.headers["x-fail"]) res.end(sse([START, ["error", { type: "error", error: { code: "timeout", message: "t" } }, 2]]));
    else res.end(sse([START, HELLO, DONE]));
  });
  const page = new AbortController();
  for (let i = 0; i < 6; i++) {
    const stream = streamSlots(url, {}, { signal: page.signal, headers: i % 2 ? { "x-fail": "1" } : {} });
    await stream.result.catch(() => {});
  }
  assert.equal(getEventListeners(page.signal, "abort").length, 0, "listeners left on the caller's signal");
  const aborted = new AbortController();
  const running = streamSlots(url, {}, { signal: aborted.signal, headers: { "x-fail": "1" } });
  assert.equal(getEventListeners(aborted.signal, "abort").length, 1, "listening while the stream runs");
  aborted.abort(new Error("stop"));
  await running.result.catch(() => {});
  assert.equal(getEventListeners(aborted.signal, "abort").length, 0);
});

for (const code of ["store_unavailable", "shutting_down"]) {
  test(`a reconnection answered 503 ${code} is one failed reconnection: the next one resumes`, async () => {
    const { url, heads } = await server((req, res, index) => {
      if (req.method === "POST") {
        res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
        res.write("retry: 20\n\n");
        res.write(sse([START]) + notice(code)); // the connection stays open
      } else if (index === 1) jsonError(res, 503, code);
      else {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.end(sse([HELLO, DONE]));
      }
    });
    const result = await streamSlots(url, {}).result;
    assert.deepEqual(result.object, { title: "Hello" });
    assert.equal(result.mismatches, 0);
    assert.deepEqual(heads, [
      ["POST", "/v1/slot-streams", undefined],
      ["GET", EVENTS, "1"],
      ["GET", EVENTS, "1"],
    ]);
  });
}

test("reconnections answered 503 store_unavailable count against maxReconnects (connection_lost)", async () => {
  const { url, heads } = await server((req, res) => {
    if (req.method === "GET") return jsonError(res, 503, "store_unavailable");
    res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
    res.write("retry: 10\n\n");
    res.end(sse([START, HELLO]));
  });
  const stream = streamSlots(url, {}, { maxReconnects: 2 });
  const error = await stream.result.catch((e) => e);
  assert.equal(error.code, "connection_lost", String(error));
  assert.equal(heads.length, 3, "the POST and two reconnections");
  assert.deepEqual(stream.object, { title: "Hello" }, "what arrived stays");
});

test("a reconnection answered 404, and a first request answered 503, still end with http_error", async () => {
  const gone = await server((req, res) => {
    if (req.method === "GET") return jsonError(res, 404, "stream_not_found");
    res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
    res.write("retry: 10\n\n");
    res.end(sse([START]));
  });
  const error = await streamSlots(gone.url, {}).result.catch((e) => e);
  assert.equal(error.code, "http_error", String(error));
  assert.equal(error.status, 404);
  assert.equal(error.detail.code, "stream_not_found");
  assert.equal(gone.heads.length, 2);
  const busy = await server((_req, res) => jsonError(res, 503, "store_unavailable"));
  const first = await streamSlots(busy.url, {}).result.catch((e) => e);
  assert.equal(first.code, "http_error");
  assert.equal(first.status, 503);
  assert.equal(busy.heads.length, 1, "the first request is not retried");
});

test("maxRetryMs also bounds the wait when the server sent no retry: hint", async () => {
  let cutAt;
  let resumedAt;
  const { url } = await server((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
    if (req.method === "POST") {
      res.write(sse([START]));
      setTimeout(() => {
        cutAt = Date.now();
        res.socket.destroy();
      }, 30);
    } else {
      resumedAt = Date.now();
      res.end(sse([HELLO, DONE]));
    }
  });
  const result = await streamSlots(url, {}, { maxRetryMs: 20 }).result;
  assert.deepEqual(result.object, { title: "Hello" });
  assert.ok(resumedAt - cutAt < 500, `reconnected ${resumedAt - cutAt} ms after the cut (maxRetryMs: 20)`);
});

test("a first connection cut after its 200 answer, with no Location: connection_lost, not network_error", async () => {
  for (const cut of ["destroy", "end"]) {
    const { url } = await server((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(sse([START, HELLO]));
      setTimeout(() => (cut === "destroy" ? res.socket.destroy() : res.end()), 30);
    });
    const stream = streamSlots(url, {});
    const error = await stream.result.catch((e) => e);
    assert.deepEqual(stream.object, { title: "Hello" }, "messages did arrive");
    assert.equal(error.code, "connection_lost", `${cut}: ${error.code}: ${error.message}`);
  }
});

test("a first request that gets no answer is network_error", async () => {
  const { url } = await server((req) => req.socket.destroy());
  const error = await streamSlots(url, {}).result.catch((e) => e);
  assert.equal(error.code, "network_error", String(error));
});
