// Fields, abort and message handling at the edges: listeners that abort, lists asked
// again whole, values and reasons from hostile messages, relative Locations.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { SlotState, streamSlots } from "../dist/index.js";
import { rawServer, sse } from "./support.mjs";

const servers = [];
after(() => Promise.all(servers.map((s) => s.close())));

async function serve(text, headers = {}) {
  const server = await rawServer((_req, res) => {
    res.writeHead(200, { "content-type": "text/event-stream", ...headers });
    res.end(text); // one write: every message in one read
  });
  servers.push(server);
  return server.url;
}

const slot = { slot: "s", path: "/s", slot_id: 1, index: null, attempt: 1 };

test("abort() from a listener stops the read: nothing more applied, result rejects", async () => {
  const url = await serve(
    sse([
      ["slot-start", { type: "slot-start", ...slot, patch: [{ op: "add", path: "/s", value: "" }] }, 1],
      ["slot-delta", { type: "slot-delta", ...slot, delta: "hello" }, 2],
      ["slot-complete", { type: "slot-complete", ...slot }, 3],
      ["done", { type: "done", attempt: 1, state: { s: "hello" } }, 4],
    ]),
  );
  const reason = new Error("user abort");
  const stream = streamSlots(url, {}, { maxReconnects: 0 });
  const seen = [];
  let ended;
  stream.on("message", (m) => {
    seen.push(m.type);
    if (m.type === "slot-start") stream.abort(reason);
  });
  stream.on("field-complete", (p) => seen.push(`complete ${p}`));
  stream.on("end", (end) => (ended = end));
  await assert.rejects(stream.result, (e) => e === reason);
  assert.deepEqual(seen, ["slot-start"]);
  assert.deepEqual(stream.object, { s: "" });
  assert.equal(ended.ok, false);
  assert.equal(ended.error, reason);
});

test("abort() from a listener of `done` rejects the result", async () => {
  const url = await serve(sse([["done", { type: "done", attempt: 1, state: { a: 1 } }, 1]]));
  const stream = streamSlots(url, {});
  stream.on("message", () => stream.abort(new Error("stop")));
  await assert.rejects(stream.result, { message: "stop" });
});

test("a message without `type` takes its event name, in the state and for the stream's end", async () => {
  const url = await serve('id: 1\nevent: done\ndata: {"attempt":1,"state":{"a":"x"}}\n\n');
  const stream = streamSlots(url, {}, { maxReconnects: 0 });
  const types = [];
  stream.on("message", (m) => types.push(m.type));
  const result = await stream.result;
  assert.deepEqual(result.object, { a: "x" });
  assert.deepEqual(types, ["done"]);
});

test("a relative Location with a Response that has no url still reads the stream", async () => {
  const url = await serve(sse([["done", { type: "done", attempt: 1, state: { a: 1 } }, 1]]), {
    location: "/v1/slot-streams/abc/events",
  });
  const origin = new URL(url).origin;
  const wrapped = async (u, init) => {
    const r = await fetch(new URL(String(u), origin), init);
    return new Response(r.body, { status: r.status, headers: r.headers }); // url: ""
  };
  const stream = streamSlots("/v1/slot-streams", {}, { fetch: wrapped });
  assert.deepEqual((await stream.result).object, { a: 1 });
});

test("a __proto__ key in slot-complete's value is refused; retry reasons take strings only", () => {
  const state = new SlotState();
  assert.throws(
    () => state.apply("slot-complete", '{"type":"slot-complete","slot":"x","path":"/x","attempt":1,"value":{"__proto__":{"isAdmin":true}}}'),
    { code: "unsafe_pointer" },
  );
  assert.equal(state.fields["/x"], undefined);
  state.apply(
    "retry",
    JSON.stringify({ type: "retry", attempt: 2, slots: [], reasons: [{ location: "/y", code: { a: 1 }, message: 5, slot: ["s"] }] }),
  );
  const field = state.fields["/y"];
  assert.equal(field.status, "retrying");
  assert.equal(field.code, undefined);
  assert.equal(field.reason, undefined);
  assert.equal(field.slot, "");
  state.apply("retry", JSON.stringify({ type: "retry", attempt: 3, slots: [], reasons: [{ location: "/y", code: "c", message: ["m"] }] }));
  assert.equal(state.fields["/y"].code, "c");
  assert.equal(state.fields["/y"].reason, undefined);
});

// What the gateway sends when a list is asked again whole (minItems: 2, one item came).
const LIST_RETRY = [
  { type: "slot-start", slot: "tags[0]", path: "/tags/0", slot_id: 2, index: 0, attempt: 1, patch: [{ op: "add", path: "/tags", value: [""] }, { op: "add", path: "/tags/0", value: "" }] },
  { type: "slot-delta", slot: "tags[0]", path: "/tags/0", slot_id: 2, index: 0, attempt: 1, delta: "a" },
  { type: "slot-complete", slot: "tags[0]", path: "/tags/0", slot_id: 2, index: 0, attempt: 1, state: { tags: ["a"] } },
  { type: "slot-failed", slot: "tags", path: "/tags", slot_id: 2, index: null, attempt: 1, error: { code: "missing", message: "no frame arrived for this slot", location: "/tags", slot: "tags" } },
  { type: "retry", attempt: 2, slots: ["tags[]"], reasons: [{ code: "missing", message: "no frame arrived for this slot", location: "/tags", slot: "tags" }], patch: [{ op: "replace", path: "/tags", value: [] }] },
  { type: "slot-start", slot: "tags[0]", path: "/tags/0", slot_id: 2, index: 0, attempt: 2, patch: [{ op: "add", path: "/tags/0", value: "" }] },
  { type: "slot-delta", slot: "tags[0]", path: "/tags/0", slot_id: 2, index: 0, attempt: 2, delta: "x" },
  { type: "slot-complete", slot: "tags[0]", path: "/tags/0", slot_id: 2, index: 0, attempt: 2, state: { tags: ["x"] } },
  { type: "slot-start", slot: "tags[1]", path: "/tags/1", slot_id: 2, index: 1, attempt: 2, patch: [{ op: "add", path: "/tags/1", value: "" }] },
  { type: "slot-delta", slot: "tags[1]", path: "/tags/1", slot_id: 2, index: 1, attempt: 2, delta: "y" },
  { type: "slot-complete", slot: "tags[1]", path: "/tags/1", slot_id: 2, index: 1, attempt: 2, state: { tags: ["x", "y"] } },
  { type: "done", attempt: 2, state: { tags: ["x", "y"] } },
];

test("a list asked again whole: its old items' fields leave, the list's field settles on done", () => {
  for (const immutable of [false, true]) {
    const state = new SlotState({ immutable });
    const completes = [];
    for (const m of LIST_RETRY) {
      for (const c of state.apply(m.type, JSON.stringify(m)).changes) {
        if (c.kind === "complete") completes.push([c.pointer, c.field.value]);
      }
      if (m.type === "retry") {
        assert.equal(state.fields["/tags/0"], undefined, "the replaced list's item is no longer complete");
        assert.equal(state.fields["/tags"].status, "retrying");
        assert.deepEqual(state.fields["/tags"].value, []);
      }
      if (state.fields["/tags"]) assert.equal(state.fields["/tags"].value, state.object.tags, "the list's field holds the list");
    }
    const fields = state.fields;
    assert.deepEqual(
      Object.fromEntries(Object.entries(fields).map(([p, f]) => [p, [f.status, f.value]])),
      { "/tags": ["complete", ["x", "y"]], "/tags/0": ["complete", "x"], "/tags/1": ["complete", "y"] },
    );
    assert.deepEqual(completes.at(-1), ["/tags", ["x", "y"]]);
  }
});

test("immutable mode: a container field follows changes inside it", () => {
  const state = new SlotState({ immutable: true });
  const feed = (m) => state.apply(m.type, JSON.stringify(m));
  feed({ type: "slot-start", slot: "tags", path: "/tags/0", attempt: 1, patch: [{ op: "add", path: "/tags", value: [""] }] });
  feed({ type: "retry", attempt: 2, slots: ["tags"], reasons: [{ code: "too_short", message: "short", location: "/tags" }] });
  feed({ type: "slot-start", slot: "tags[1]", path: "/tags/1", attempt: 2, patch: [{ op: "add", path: "/tags/1", value: "" }] });
  feed({ type: "slot-delta", slot: "tags[1]", path: "/tags/1", attempt: 2, delta: "b" });
  assert.deepEqual(state.object.tags, ["", "b"]);
  assert.equal(state.fields["/tags"].value, state.object.tags);
});

test("fields count towards maxStateChars: slot-starts without patches are bounded", () => {
  const state = new SlotState({ maxStateChars: 10_000 });
  assert.throws(() => {
    for (let i = 0; i < 10_000; i++) {
      state.apply("slot-start", JSON.stringify({ type: "slot-start", slot: "x", path: `/f${i}`, attempt: 1 }));
    }
  }, { code: "state_too_large" });
  assert.ok(Object.keys(state.fields).length < 200);
});

test("a retry visits the fields of the slots it asks for, not every field", () => {
  const state = new SlotState();
  const n = 2000;
  for (let i = 0; i < n; i++) state.apply("slot-start", JSON.stringify({ type: "slot-start", slot: `s${i}`, path: `/f${i}`, attempt: 1 }));
  const listed = keysListed(() => {
    const { changes } = state.apply("retry", JSON.stringify({ type: "retry", attempt: 2, slots: ["s7"], reasons: [] }));
    assert.deepEqual(changes.map((c) => c.pointer), ["/f7"]);
  });
  assert.ok(listed < 100, `${listed} keys listed for a retry of one slot among ${n}`);
  assert.equal(state.fields["/f7"].status, "retrying");
});

test("a failed patch that removed a key puts it back in its place", () => {
  const state = new SlotState();
  state.apply("x", JSON.stringify({ type: "x", patch: [{ op: "add", path: "/a", value: 1 }, { op: "add", path: "/b", value: 2 }, { op: "add", path: "/c", value: 3 }] }));
  assert.throws(
    () => state.apply("y", JSON.stringify({ type: "y", patch: [{ op: "remove", path: "/a" }, { op: "remove", path: "/b" }, { op: "add", path: "/nope/x", value: 0 }] })),
    { code: "patch_failed" },
  );
  assert.equal(JSON.stringify(state.object), '{"a":1,"b":2,"c":3}');
});

test("a snapshot that differs visits the fields it changes, not every field", () => {
  const state = new SlotState();
  const n = 2000;
  // Fields that point at nothing, and a few that hold values.
  for (let i = 0; i < n; i++) state.apply("slot-start", JSON.stringify({ type: "slot-start", slot: `s${i}`, path: `/f${i}`, attempt: 1 }));
  state.apply("slot-start", JSON.stringify({ type: "slot-start", slot: "a", path: "/a", attempt: 1, patch: [{ op: "add", path: "/a", value: "x" }] }));
  state.apply("slot-start", JSON.stringify({ type: "slot-start", slot: "t", path: "/t/1", attempt: 1, patch: [{ op: "add", path: "/t", value: ["p", "q"] }] }));
  state.apply("slot-complete", JSON.stringify({ type: "slot-complete", slot: "v", path: "/v", attempt: 1, value: "sent" }));
  assert.equal(state.fields["/v"].value, "sent");
  const snapshots = [{ a: "y", t: ["p"], f5: 5 }, { a: "z", t: ["p", "r"] }];
  const listed = keysListed(() => {
    for (let i = 0; i < 20; i++) state.apply("state", JSON.stringify({ type: "state", state: snapshots[i % 2] }));
  });
  assert.ok(listed < 20 * 30, `${listed} keys listed for 20 snapshots of a few keys among ${n} fields`);
  // Every field holds its value in the last snapshot, as before.
  const fields = state.fields;
  assert.equal(fields["/a"].value, "z");
  assert.equal(fields["/t/1"].value, "r");
  assert.equal(fields["/f5"].value, undefined);
  assert.equal(fields["/v"].value, undefined);
  assert.equal(Object.keys(fields).length, n + 3);
  state.apply("state", JSON.stringify({ type: "state", state: { a: "z", t: ["p", "r"], f7: [1], v: "w" } }));
  assert.deepEqual([state.fields["/f7"].value, state.fields["/f5"].value, state.fields["/v"].value], [[1], undefined, "w"]);
  assert.equal(state.fields["/f7"].value, state.object.f7);
});

/** The keys of every `Object.keys` listing taken while `run` runs: the work of a walk. */
function keysListed(run) {
  const keys = Object.keys;
  let listed = 0;
  Object.keys = (o) => {
    const k = keys(o);
    listed += k.length;
    return k;
  };
  try {
    run();
  } finally {
    Object.keys = keys;
  }
  return listed;
}
