// The client against the real gateway (`create_app` on uvicorn, 127.0.0.1) with a
// scripted model server: every stream here is real HTTP, real SSE, real resume.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { SlotStreamError, streamSlots } from "../dist/index.js";
import { LONG_VALUE, TRIAGE_VALUE, body, cuttingProxy, leaves, startGateway } from "./support.mjs";

/** The gateway's retry hint in this file (ms): short, so reconnecting tests stay short. */
const RETRY_MS = 300;
let gateway;

before(async () => {
  gateway = await startGateway(["--resume-grace-s", "2", "--retry-ms", String(RETRY_MS)]);
});
after(() => gateway.close());

/** Run a stream to its end, recording its messages, field events and summary lengths. */
async function record(stream) {
  const seen = { types: [], complete: [], retry: [], rejected: [], summaries: new Set(), ends: [] };
  stream.on("message", (message, s) => {
    seen.types.push(message.type);
    if (typeof s.object.summary === "string") seen.summaries.add(s.object.summary.length);
  });
  stream.on("field-complete", (pointer, field) => seen.complete.push([pointer, field.value]));
  stream.on("field-retry", (pointer) => seen.retry.push(pointer));
  stream.on("field-rejected", (pointer, field) => seen.rejected.push([pointer, field.code]));
  stream.on("end", (end) => seen.ends.push(end));
  try {
    seen.result = await stream.result;
  } catch (error) {
    seen.error = error;
  }
  return seen;
}

function assertBuiltFromMessages(seen, value) {
  assert.equal(seen.error, undefined, String(seen.error?.stack));
  assert.deepEqual(seen.result.object, value);
  assert.equal(seen.result.last.type, "done");
  assert.equal(seen.result.mismatches, 0, "every snapshot equals what the messages built");
  const expected = leaves(value);
  assert.deepEqual(Object.fromEntries(seen.complete), expected);
  for (const [pointer, field] of Object.entries(seen.result.fields)) {
    assert.equal(field.status, "complete", pointer);
    assert.equal(field.value, expected[pointer], pointer);
    assert.equal(field.attempts, 1);
  }
  assert.deepEqual(Object.keys(seen.result.fields).sort(), Object.keys(expected).sort());
  assert.equal(seen.ends.length, 1);
  assert.equal(seen.ends[0].ok, true);
}

test("default options (patch mode, 50 ms coalescing): deltas and patches build the object", async () => {
  await gateway.add({ value: LONG_VALUE, chunks: 4, chunk_delay: 0.002 });
  const seen = await record(streamSlots(gateway.streams, body()));
  assertBuiltFromMessages(seen, LONG_VALUE);
  assert.ok(seen.types.filter((t) => t === "slot-delta").length > 3, "the summary streamed as deltas");
  assert.ok(seen.summaries.size > 3, "the summary was read while it grew");
});

test("every delta on its own (coalesce_ms 0)", async () => {
  await gateway.add({ value: LONG_VALUE, chunks: 4 });
  const seen = await record(streamSlots(gateway.streams, body({ coalesce_ms: 0 })));
  assertBuiltFromMessages(seen, LONG_VALUE);
  const deltas = seen.types.filter((t) => t === "slot-delta").length;
  assert.ok(deltas > LONG_VALUE.summary.length / 8, `${deltas} deltas`);
});

test("full state mode: every message a snapshot", async () => {
  await gateway.add({ value: TRIAGE_VALUE, chunks: 6 });
  const seen = await record(streamSlots(gateway.streams, body({ state_mode: "full", coalesce_ms: 0 })));
  assertBuiltFromMessages(seen, TRIAGE_VALUE);
});

test("a rejected field is re-asked and completes on the second attempt", async () => {
  const fixed = { ...TRIAGE_VALUE, priority: 3 };
  await gateway.add({ text: "priority: 9\n" }, { value: fixed });
  // The first reply writes only an out-of-range priority; the rest comes in the second.
  const stream = streamSlots(gateway.streams, body({ coalesce_ms: 0 }));
  const statuses = [];
  stream.on("message", (_m, s) => {
    const field = s.fields["/priority"];
    if (field && statuses.at(-1) !== field.status) statuses.push(field.status);
  });
  const seen = await record(stream);
  assert.equal(seen.error, undefined, String(seen.error));
  assert.deepEqual(seen.result.object, fixed);
  assert.deepEqual(seen.rejected[0], ["/priority", "less_than_equal"]);
  assert.ok(seen.retry.includes("/priority"));
  assert.deepEqual(statuses.slice(0, 3), ["streaming", "rejected", "retrying"]);
  assert.equal(statuses.at(-1), "complete");
  assert.equal(seen.result.fields["/priority"].attempts, 2);
  assert.equal(seen.result.fields["/priority"].value, 3);
});

test("resume: a cut connection reconnects to Location with Last-Event-ID, after the retry hint", async () => {
  await gateway.add({ value: LONG_VALUE, chunks: 4, chunk_delay: 0.003 });
  const proxy = await cuttingProxy(gateway.url, 1500);
  try {
    const stream = streamSlots(`${proxy.url}/v1/slot-streams`, body({ coalesce_ms: 0 }));
    const ids = [];
    stream.on("message", () => ids.push(Number(stream.lastEventId)));
    const seen = await record(stream);
    assertBuiltFromMessages(seen, LONG_VALUE);
    assert.equal(proxy.state.connections, 2);
    const waited = proxy.state.opened[1] - proxy.state.cutAt;
    assert.ok(waited >= RETRY_MS - 20, `reconnected ${waited} ms after the cut`);
    const [first, second] = proxy.state.requests;
    assert.match(first, /^POST \/v1\/slot-streams /);
    const resumedAfter = /last-event-id: (\d+)/i.exec(second)?.[1];
    assert.match(second, /^GET \/v1\/slot-streams\/[0-9a-f]+\/events /);
    assert.ok(resumedAfter !== undefined, second);
    const cut = ids.indexOf(Number(resumedAfter));
    assert.ok(cut > 0 && cut < ids.length - 1, "the cut came mid-stream");
    assert.deepEqual(ids, ids.map((_, i) => ids[0] + i), "no message lost or applied twice");
  } finally {
    await proxy.close();
  }
});

test("reconnections that bring nothing end with connection_lost after maxReconnects", async () => {
  await gateway.add({ value: LONG_VALUE, chunks: 4, chunk_delay: 0.003 });
  const proxy = await cuttingProxy(gateway.url, 1500, { refuseLater: true });
  try {
    const stream = streamSlots(`${proxy.url}/v1/slot-streams`, body({ coalesce_ms: 0 }), { maxReconnects: 2 });
    const seen = await record(stream);
    assert.equal(seen.error?.code, "connection_lost", String(seen.error));
    assert.equal(proxy.state.connections, 3, "the POST and two reconnections");
    assert.ok(stream.object.summary.length > 0, "what arrived stays");
  } finally {
    await proxy.close();
  }
});

test("abort: the result rejects with the reason and the gateway closes the model request", async () => {
  const { count } = await gateway.command({ op: "requests" });
  await gateway.add({ value: LONG_VALUE, chunks: 4, stall_after_bytes: 40 });
  const controller = new AbortController();
  const stream = streamSlots(gateway.streams, body({ coalesce_ms: 0 }), { signal: controller.signal });
  stream.on("message", () => controller.abort(new Error("enough")));
  const seen = await record(stream);
  assert.equal(seen.error.message, "enough");
  assert.equal(seen.ends[0].ok, false);
  assert.ok(seen.types.length >= 1);
  const closed = await gateway.command({ op: "wait_disconnect", index: count, timeout: 8 });
  assert.equal(closed.ok, true, "the model request was closed after the client left");
});

test("an error message ends the stream with the gateway's code; the object stays as built", async () => {
  await gateway.add({ text: "", status: 401 });
  const seen = await record(streamSlots(gateway.streams, body({ max_attempts: 1 })));
  assert.ok(seen.error instanceof SlotStreamError);
  assert.equal(seen.error.code, "upstream_status");
  assert.equal(seen.error.detail.status, 401);
  assert.equal(seen.types.at(-1), "error");
  assert.equal(seen.ends[0].ok, false);
  assert.equal(seen.ends[0].last.type, "error");
});

test("an HTTP error rejects with http_error, its status and the gateway's error", async () => {
  const seen = await record(streamSlots(gateway.streams, { model: "m", messages: [] }));
  assert.equal(seen.error.code, "http_error");
  assert.equal(seen.error.status, 422);
  assert.equal(seen.error.detail.code, "invalid_request");
});

test("idle timeout: a stream that stops sending fails with idle_timeout", async () => {
  await gateway.add({ value: LONG_VALUE, chunks: 4, stall_after_bytes: 30 });
  const started = Date.now();
  const seen = await record(streamSlots(gateway.streams, body({ coalesce_ms: 0 }), { idleTimeoutMs: 400 }));
  assert.equal(seen.error?.code, "idle_timeout", String(seen.error));
  assert.ok(seen.types.length > 0 && !seen.types.includes("done"));
  assert.ok(Date.now() - started < 10_000);
});

test("state-size bound: a state growing past maxStateChars fails, the object as it was", async () => {
  await gateway.add({ value: LONG_VALUE, chunks: 4 });
  const stream = streamSlots(gateway.streams, body({ coalesce_ms: 0 }), { maxStateChars: 400 });
  let before;
  stream.on("message", (_m, s) => {
    before = JSON.stringify(s.object);
  });
  const seen = await record(stream);
  assert.equal(seen.error?.code, "state_too_large");
  assert.equal(JSON.stringify(stream.object), before, "the refused message changed nothing");
  assert.ok(stream.object.summary.length > 100 && stream.object.summary.length < 400);
});

test("a schema property named __proto__: refused with unsafe_pointer, nothing polluted", async () => {
  // Written as JSON text: in an object literal, __proto__ would set the prototype instead.
  const hostile = JSON.parse(
    '{"type":"object","properties":{"title":{"type":"string"},"__proto__":{"type":"object",' +
      '"properties":{"polluted":{"type":"string"}},"required":["polluted"]}},"required":["title","__proto__"]}',
  );
  assert.ok(Object.hasOwn(hostile.properties, "__proto__"));
  await gateway.command({
    op: "add",
    replies: [{ text: "title: Hello\npolluted: yes\nend\n", chunks: 4 }],
  });
  const stream = streamSlots(gateway.streams, body({ coalesce_ms: 0 }, hostile));
  const seen = await record(stream);
  assert.equal(seen.error?.code, "unsafe_pointer", String(seen.error));
  assert.equal({}.polluted, undefined);
  assert.equal(Object.prototype.polluted, undefined);
  assert.deepEqual(stream.object, { title: "Hello" });
  assert.equal(Object.getPrototypeOf(stream.object), Object.prototype);
});
