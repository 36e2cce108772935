// How streamSlots handles its connections, over real HTTP from a raw SSE server: a signal
// aborted before the start, the caller's signal after the end, reconnections answered
// 503, the wait before reconnecting, the code of a connection cut after its answer,
// servers that ignore Last-Event-ID, ids that are not message ids, answers that are not
// event streams, redirects, and timeouts past what a timer holds.
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

// A store briefly away, an instance that stops, or a proxy in front of instances being
// replaced (its own 502, 503 or 504 page).
for (const [status, code] of [
  [503, "store_unavailable"],
  [503, "shutting_down"],
  [502, null],
  [503, null],
  [504, null],
]) {
  test(`a reconnection answered ${status} ${code ?? "from a proxy"} is one failed reconnection: the next one resumes`, async () => {
    const { url, heads } = await server((req, res, index) => {
      if (req.method === "POST") {
        res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
        res.write("retry: 20\n\n");
        res.write(sse([START]) + notice(code ?? "shutting_down")); // the connection stays open
      } else if (index === 1) {
        if (code) jsonError(res, status, code);
        else {
          res.writeHead(status, { "content-type": "text/html" });
          res.end(`<html><body><h1>${status}</h1></body></html>`);
        }
      } else {
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

test("a reconnection answered 404 or 500, and a first request answered 503, still end with http_error", async () => {
  for (const [status, code] of [[404, "stream_not_found"], [500, "internal_error"]]) {
    const gone = await server((req, res) => {
      if (req.method === "GET") return jsonError(res, status, code);
      res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
      res.write("retry: 10\n\n");
      res.end(sse([START]));
    });
    const error = await streamSlots(gone.url, {}).result.catch((e) => e);
    assert.equal(error.code, "http_error", String(error));
    assert.equal(error.status, status);
    assert.equal(error.detail.code, code);
    assert.equal(gone.heads.length, 2);
  }
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

// Servers that ignore Last-Event-ID, or answer with something other than an event stream.

const WORLD = ["slot-delta", { type: "slot-delta", ...slot, delta: " world" }, 3];
const DONE_PLAIN = ["done", { type: "done", attempt: 1 }, 4];

test("a server that ignores Last-Event-ID and replays what was applied: connection_lost after maxReconnects, nothing applied twice", async () => {
  const { url, heads } = await server((req, res, index) => {
    // A backstop so that a client that never gives up still ends (with a 404).
    if (index > 20) return jsonError(res, 404, "stream_not_found");
    res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
    res.end(`retry: 1\n\n${sse([START, HELLO])}`);
  });
  const stream = streamSlots(url, {}, { maxReconnects: 2 });
  let applied = 0;
  stream.on("message", () => applied++);
  const error = await stream.result.catch((e) => e);
  assert.equal(error.code, "connection_lost", `${error.code}: ${error.message} after ${heads.length} requests`);
  assert.deepEqual(heads, [
    ["POST", "/v1/slot-streams", undefined],
    ["GET", EVENTS, "2"],
    ["GET", EVENTS, "2"],
  ]);
  assert.equal(applied, 2, "each message applied once");
  assert.deepEqual(stream.object, { title: "Hello" });
});

test("a server that answers every reconnection 200 and closes at once: connection_lost after maxReconnects", async () => {
  const { url, heads } = await server((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
    if (req.method === "POST") res.end(`retry: 1\n\n${sse([START, HELLO])}`);
    else res.end();
  });
  const stream = streamSlots(url, {});
  const error = await stream.result.catch((e) => e);
  assert.equal(error.code, "connection_lost", String(error));
  assert.deepEqual(heads.slice(1), Array(3).fill(["GET", EVENTS, "2"]), "maxReconnects (3) reconnections, each from the last id");
  assert.deepEqual(stream.object, { title: "Hello" });
});

test("a server that replays from an earlier message and goes on: replayed ids are skipped, the rest applied once", async () => {
  const { url, heads } = await server((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
    if (req.method === "POST") res.end(`retry: 1\n\n${sse([START, HELLO])}`);
    else res.end(sse([START, HELLO, WORLD, DONE_PLAIN]));
  });
  const stream = streamSlots(url, {});
  const seen = [];
  stream.on("message", (m) => seen.push(m.type));
  const result = await stream.result;
  assert.deepEqual(result.object, { title: "Hello world" });
  assert.deepEqual(seen, ["slot-start", "slot-delta", "slot-delta", "done"]);
  assert.equal(heads.length, 2);
});

test("a connection that only repeats messages already applied is idle: idle_timeout", async () => {
  let timer;
  const { url } = await server((req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
    res.write(sse([START, HELLO]));
    timer = setInterval(() => res.write(sse([HELLO])), 5);
    res.on("close", () => clearInterval(timer));
  });
  const stream = streamSlots(url, {}, { idleTimeoutMs: 200 });
  const backstop = setTimeout(() => stream.abort(new Error("still running after 10 s")), 10_000);
  const error = await stream.result.catch((e) => e);
  clearTimeout(backstop);
  clearInterval(timer);
  assert.equal(error.code, "idle_timeout", String(error));
  assert.deepEqual(stream.object, { title: "Hello" });
});

for (const [name, id] of [["letters", "b"], ["a NUL", "2\u0000"], ["nothing", ""]]) {
  test(`an id that is not a message id (${name}) is refused: a replay of it could not be told apart`, async () => {
    const odd = [HELLO[0], HELLO[1], id];
    const { url } = await server((req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
      // The reconnection repeats the message with the odd id, as a server that resumes
      // from the last id it can read (1) does.
      if (req.method === "POST") res.end(`retry: 1\n\n${sse([START, odd])}`);
      else res.end(sse([odd, WORLD, DONE_PLAIN]));
    });
    const stream = streamSlots(url, {});
    const error = await stream.result.then((r) => r.object, (e) => e);
    assert.equal(error.code, "invalid_message", `resolved or failed with ${JSON.stringify(error)}`);
    assert.deepEqual(stream.object, { title: "" }, "the message with that id was not applied");
    assert.equal(stream.lastEventId, "1");
  });
}

for (const [name, answer] of [
  ["an HTML page (200)", (res) => res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html>\n<title>Sign in</title>\ndata: <p>hi</p>\n\n")],
  ["JSON (200)", (res) => res.writeHead(200, { "content-type": "application/json" }).end('{"id": "chatcmpl-1", "choices": []}')],
  ["no content-type (200)", (res) => res.writeHead(200).end("\n")],
  ["204 No Content", (res) => res.writeHead(204).end()],
]) {
  test(`a reconnection answered with ${name} ends the stream at once: http_error with the status`, async () => {
    const { url, heads } = await server((req, res) => {
      if (req.method === "GET") return answer(res);
      res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
      res.end(`retry: 1\n\n${sse([START, HELLO])}`);
    });
    const stream = streamSlots(url, {});
    const error = await stream.result.catch((e) => e);
    assert.equal(error.code, "http_error", String(error));
    assert.equal(error.status, name.startsWith("204") ? 204 : 200);
    assert.equal(heads.length, 2, "not tried again");
    assert.deepEqual(stream.object, { title: "Hello" });
  });
}

test("a first request answered 200 with an HTML page (a login page, an app's fallback route) is http_error, not connection_lost", async () => {
  const { url } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end("<!doctype html><html><body>Please sign in</body></html>");
  });
  const error = await streamSlots(url, {}).result.catch((e) => e);
  assert.equal(error.code, "http_error", String(error));
  assert.equal(error.status, 200);
  assert.match(error.message, /text\/html/);
});

test("an event stream's content-type is matched without its case or parameters", async () => {
  const { url } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "Text/Event-Stream; charset=utf-8" });
    res.end(sse([START, HELLO, DONE]));
  });
  assert.deepEqual((await streamSlots(url, {}).result).object, { title: "Hello" });
});

test("a redirected request and a redirected reconnection are followed", async () => {
  const { url, heads } = await server((req, res) => {
    if (req.url === "/v1/slot-streams") return res.writeHead(307, { location: "/moved" }).end();
    if (req.url === EVENTS) return res.writeHead(302, { location: "/moved-events" }).end();
    res.writeHead(200, { "content-type": "text/event-stream", location: EVENTS });
    if (req.url === "/moved") res.end(`retry: 1\n\n${sse([START])}`);
    else res.end(sse([START, HELLO, DONE]));
  });
  const result = await streamSlots(url, {}).result;
  assert.deepEqual(result.object, { title: "Hello" });
  assert.deepEqual(heads.map(([method, path, id]) => `${method} ${path} ${id}`), [
    "POST /v1/slot-streams undefined",
    "POST /moved undefined",
    `GET ${EVENTS} 1`,
    "GET /moved-events 1",
  ]);
});

test("idleTimeoutMs past what a timer can hold (Infinity) does not fire at once", async () => {
  const { url } = await server((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(sse([START]));
    setTimeout(() => res.end(sse([HELLO, DONE])), 50);
  });
  for (const idleTimeoutMs of [Infinity, 2 ** 32]) {
    const result = await streamSlots(url, {}, { idleTimeoutMs }).result.catch((e) => e);
    assert.deepEqual(result.object, { title: "Hello" }, `${idleTimeoutMs}: ${result.code}: ${result.message}`);
  }
});
