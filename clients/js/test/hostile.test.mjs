// Messages the real gateway never sends, served over real HTTP by a raw SSE server:
// each must fail with a clear error and leave the object as the earlier messages built it.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { streamSlots } from "../dist/index.js";
import { rawServer, sse } from "./support.mjs";

const servers = [];
after(() => Promise.all(servers.map((s) => s.close())));

const START = [
  ["slot-start", { type: "slot-start", slot: "title", path: "/title", slot_id: 1, index: null, attempt: 1, patch: [{ op: "add", path: "/title", value: "" }] }, 1],
  ["slot-delta", { type: "slot-delta", slot: "title", path: "/title", slot_id: 1, index: null, attempt: 1, delta: "Hello" }, 2],
];

/** Serve `text` (SSE) on every request, then keep the connection open. */
async function serving(text) {
  const server = await rawServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", location: "/v1/slot-streams/x/events" });
    res.write(text);
  });
  servers.push(server);
  return server.url;
}

async function failure(messages, options = {}) {
  const stream = streamSlots(await serving(sse([...START, ...messages])), {}, { idleTimeoutMs: 5000, ...options });
  const error = await stream.result.then(
    () => assert.fail("the stream should fail"),
    (e) => e,
  );
  return { error, stream };
}

const patch = (ops, id = 3) => ["slot-start", { type: "slot-start", slot: "x", path: "/x", slot_id: 2, index: null, attempt: 1, patch: ops }, id];

for (const [name, ops, code] of [
  ["a path into __proto__", [{ op: "add", path: "/__proto__/polluted", value: "yes" }], "unsafe_pointer"],
  ["a path through constructor.prototype", [{ op: "add", path: "/constructor/prototype/polluted", value: "yes" }], "patch_failed"],
  ["a __proto__ key below the root", [{ op: "add", path: "/title2", value: {} }, { op: "add", path: "/title2/__proto__", value: { polluted: "yes" } }], "unsafe_pointer"],
  ["a replace of nothing, after an add that did apply", [{ op: "add", path: "/x", value: "new" }, { op: "replace", path: "/missing", value: 1 }], "patch_failed"],
  ["an index past the end of an array", [{ op: "add", path: "/list", value: [] }, { op: "add", path: "/list/5", value: 1 }], "patch_failed"],
  ["an unknown operation", [{ op: "move", from: "/title", path: "/x" }], "patch_failed"],
  ["a bad ~ escape", [{ op: "add", path: "/a~2b", value: 1 }], "invalid_message"],
]) {
  test(`hostile patch: ${name} -> ${code}, state untouched`, async () => {
    const { error, stream } = await failure([patch(ops)]);
    assert.equal(error.code, code, String(error));
    assert.deepEqual(stream.object, { title: "Hello" });
    assert.equal({}.polluted, undefined);
    assert.equal(Object.prototype.polluted, undefined);
    assert.equal(Object.getPrototypeOf(stream.object), Object.prototype);
    assert.deepEqual(Object.keys(stream.fields), ["/title"]);
  });
}

test("a value holding a __proto__ key (as JSON text) is refused", async () => {
  const data = '{"type":"slot-complete","slot":"t","path":"/t","slot_id":3,"index":null,"attempt":1,"patch":[{"op":"add","path":"/t","value":{"__proto__":{"polluted":"yes"}}}]}';
  const { error, stream } = await failure([["slot-complete", data, 3]]);
  assert.equal(error.code, "unsafe_pointer");
  assert.deepEqual(stream.object, { title: "Hello" });
  assert.equal({}.polluted, undefined);
});

test("a snapshot holding a __proto__ key is refused", async () => {
  const data = '{"type":"done","attempt":1,"state":{"title":"Hello","__proto__":{"polluted":"yes"}}}';
  const { error, stream } = await failure([["done", data, 3]]);
  assert.equal(error.code, "unsafe_pointer");
  assert.deepEqual(stream.object, { title: "Hello" });
});

test("a delta onto a number, and text that is not JSON: clear errors", async () => {
  const delta = { type: "slot-delta", slot: "n", path: "/n", slot_id: 3, index: null, attempt: 1, delta: "9" };
  const first = await failure([patch([{ op: "add", path: "/n", value: 1 }]), ["slot-delta", delta, 4]]);
  assert.equal(first.error.code, "patch_failed");
  assert.deepEqual(first.stream.object, { title: "Hello", n: 1 });
  const second = await failure([["slot-delta", "{not json", 3]]);
  assert.equal(second.error.code, "invalid_message");
  assert.deepEqual(second.stream.object, { title: "Hello" });
});

test("a message that never ends is cut at maxStateChars (message_too_large)", async () => {
  const server = await rawServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.write(sse(START));
    res.write("event: slot-delta\ndata: ");
    const chunk = "x".repeat(16 * 1024);
    let sent = 0;
    const pump = () => {
      while (sent < 64 && res.write(chunk)) sent++;
      if (sent < 64) res.once("drain", pump);
    };
    pump();
  });
  servers.push(server);
  const stream = streamSlots(server.url, {}, { maxStateChars: 100_000 });
  const error = await stream.result.catch((e) => e);
  assert.equal(error.code, "message_too_large");
  assert.deepEqual(stream.object, { title: "Hello" });
});

test("unknown events are ignored; slot-rejected and flagged fields are accepted", async () => {
  const slot = { slot: "title", path: "/title", slot_id: 1, index: null, attempt: 1 };
  const url = await serving(
    sse([
      ...START,
      ["slot-sparkle", { type: "slot-sparkle", glitter: true }, 3],
      ["slot-complete", { type: "slot-complete", ...slot, status: "flagged", code: "repeated", reason: "repeats the ticket" }, 4],
      ["slot-rejected", { type: "slot-rejected", ...slot, code: "too_short", reason: "fewer than 3 words" }, 5],
      ["retry", { type: "retry", attempt: 2, slots: ["title"], reasons: [{ code: "too_short", message: "fewer than 3 words", location: "/title" }] }, 6],
      ["done", { type: "done", attempt: 2, state: { title: "Hello" } }, 7],
    ]),
  );
  const stream = streamSlots(url, {});
  const statuses = [];
  stream.on("message", (_m, s) => statuses.push(s.fields["/title"].status));
  const flagged = [];
  stream.on("field-flagged", (pointer, field) => flagged.push([pointer, field.code, field.reason]));
  const rejected = [];
  stream.on("field-rejected", (pointer, field) => rejected.push([pointer, field.code, field.reason]));
  const result = await stream.result;
  assert.deepEqual(result.object, { title: "Hello" });
  // `done` settles a field asked again that holds a value.
  assert.deepEqual(statuses, ["streaming", "streaming", "streaming", "flagged", "rejected", "retrying", "complete"]);
  assert.deepEqual(flagged, [["/title", "repeated", "repeats the ticket"]]);
  assert.deepEqual(rejected, [["/title", "too_short", "fewer than 3 words"]]);
  assert.equal(result.mismatches, 0);
});

test("messages already applied are skipped when a server repeats them", async () => {
  const url = await serving(sse([...START, START[1], ["done", { type: "done", attempt: 1, state: { title: "Hello" } }, 3]]));
  const result = await streamSlots(url, {}).result;
  assert.deepEqual(result.object, { title: "Hello" });
  assert.equal(result.mismatches, 0);
});

test("an id-less shutting_down notice reconnects with Last-Event-ID and goes on", async () => {
  const heads = [];
  const server = await rawServer((req, res) => {
    heads.push([req.method, req.url, req.headers["last-event-id"]]);
    res.writeHead(200, { "content-type": "text/event-stream", location: "/v1/slot-streams/s1/events" });
    if (req.method === "POST") {
      res.write("retry: 50\n\n");
      res.write(sse([...START, ["error", { type: "error", error: { code: "shutting_down", message: "stopping" } }]]));
    } else {
      const more = { type: "slot-delta", slot: "title", path: "/title", slot_id: 1, index: null, attempt: 1, delta: " world" };
      res.end(sse([["slot-delta", more, 3], ["done", { type: "done", attempt: 1, state: { title: "Hello world" } }, 4]]));
    }
  });
  servers.push(server);
  const result = await streamSlots(server.url, {}).result;
  assert.deepEqual(result.object, { title: "Hello world" });
  assert.equal(result.mismatches, 0);
  assert.deepEqual(heads, [
    ["POST", "/v1/slot-streams", undefined],
    ["GET", "/v1/slot-streams/s1/events", "2"],
  ]);
});
