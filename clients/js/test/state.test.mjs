// The sans-I/O parts: SlotState applying messages, and the SSE parser across chunkings.
import assert from "node:assert/strict";
import { test } from "node:test";

import { SlotState, sseParser } from "../dist/index.js";
import { sse } from "./support.mjs";

const start = (path, slot, patch) => ({ type: "slot-start", slot, path, slot_id: 1, index: null, attempt: 1, patch });
const delta = (path, slot, text) => ({ type: "slot-delta", slot, path, slot_id: 1, index: null, attempt: 1, delta: text });

function feed(state, messages) {
  for (const m of messages) state.apply(m.type, JSON.stringify(m));
}

test("immutable mode: each change gives new objects along its path, the rest shared", () => {
  const state = new SlotState({ immutable: true });
  feed(state, [
    start("/a", "a", [{ op: "add", path: "/a", value: { x: "" } }]),
    start("/b", "b", [{ op: "add", path: "/b", value: { y: [1] } }]),
  ]);
  const before = state.object;
  const fieldsBefore = state.fields;
  feed(state, [delta("/a/x", "a.x", "hi")]);
  assert.notEqual(state.object, before);
  assert.notEqual(state.object.a, before.a);
  assert.equal(state.object.b, before.b, "an untouched subtree is shared");
  assert.equal(before.a.x, "", "the old object is left as it was");
  assert.notEqual(state.fields, fieldsBefore);
  assert.deepEqual(state.object, { a: { x: "hi" }, b: { y: [1] } });
});

test("in place (default): a delta changes only the string", () => {
  const state = new SlotState();
  feed(state, [start("/a", "a", [{ op: "add", path: "/a", value: "" }])]);
  const root = state.object;
  feed(state, [delta("/a", "a", "x"), delta("/a", "a", "y")]);
  assert.equal(state.object, root);
  assert.equal(state.object.a, "xy");
  assert.equal(state.fields["/a"].value, "xy");
});

test("a failed patch is undone whole, in either mode", () => {
  for (const immutable of [false, true]) {
    const state = new SlotState({ immutable });
    feed(state, [start("/l", "l", [{ op: "add", path: "/l", value: [1, 2] }])]);
    const text = JSON.stringify(
      start("/l/0", "l[0]", [
        { op: "add", path: "/l/0", value: 0 },
        { op: "remove", path: "/l/2" },
        { op: "replace", path: "/l/9", value: 1 },
      ]),
    );
    assert.throws(() => state.apply("slot-start", text), { code: "patch_failed" });
    assert.deepEqual(state.object, { l: [1, 2] });
  }
});

test("the SSE parser gives the same messages however the body is cut", () => {
  const messages = [
    ["slot-start", { a: 1 }, 1],
    ["slot-delta", { text: "é ✓ \u2028 end" }, 2],
  ];
  const text = `: ping\n\nretry: 250\n${sse(messages)}`;
  const runs = [];
  for (const eol of ["\n", "\r\n", "\r"]) {
    const bytes = new TextEncoder().encode(text.replace(/\n/g, eol));
    for (const size of [bytes.length, 1, 2, 3, 7]) {
      const seen = [];
      const retries = [];
      const feed = sseParser({ onMessage: (m) => (seen.push(m), false), onRetry: (ms) => retries.push(ms) }, 1000);
      const decoder = new TextDecoder();
      for (let i = 0; i < bytes.length; i += size) feed(decoder.decode(bytes.slice(i, i + size), { stream: true }));
      runs.push({ seen, retries });
    }
  }
  for (const run of runs) assert.deepEqual(run, runs[0]);
  assert.deepEqual(runs[0].retries, [250]);
  assert.deepEqual(
    runs[0].seen.map((m) => [m.event, JSON.parse(m.data), m.id]),
    messages.map(([event, data, id]) => [event, data, String(id)]),
  );
});

test("the SSE parser refuses a message longer than its bound", () => {
  const feed = sseParser({ onMessage: () => false, onRetry: () => {} }, 100);
  feed("data: ");
  assert.throws(() => feed("x".repeat(101)), { code: "message_too_large" });
});

test("confidence: a number in [0, 1] is kept on the completed field; anything else is no figure", () => {
  const complete = (path, confidence) => ({
    type: "slot-complete", slot: path.slice(1), path, slot_id: 1, index: null, attempt: 1, value: "v",
    ...(confidence === undefined ? {} : { confidence }),
  });
  const state = new SlotState();
  const paths = ["/a", "/b", "/c", "/d", "/e"];
  feed(state, paths.map((p) => start(p, p.slice(1), [{ op: "add", path: p, value: "v" }])));
  feed(state, [complete("/a", 0.25), complete("/b"), complete("/c", "0.5"), complete("/d", 7), complete("/e", 0)]);
  assert.equal(state.fields["/a"].confidence, 0.25);
  assert.equal(state.fields["/b"].confidence, undefined, "absent when the server sent no logprobs");
  assert.equal(state.fields["/c"].confidence, undefined);
  assert.equal(state.fields["/d"].confidence, undefined);
  assert.equal(state.fields["/e"].confidence, 0);
  feed(state, [start("/a", "a", [{ op: "replace", path: "/a", value: "" }])]);
  assert.equal(state.fields["/a"].confidence, undefined, "a value asked again has no figure yet");
});

test("the SSE parser ignores an empty chunk between a CR and its LF", () => {
  const seen = [];
  const feed = sseParser({ onMessage: (m) => (seen.push(m), false), onRetry: () => {} }, 1000);
  for (const chunk of ["id: 2\r", "", "\nevent: slot-delta\r", "", "\ndata: {}\r", "", "\n\r", "", "\n"]) feed(chunk);
  assert.deepEqual(seen, [{ event: "slot-delta", data: "{}", id: "2" }]);
});

test("immutable mode: the fields map is copied only when a field changes after it was read", () => {
  const state = new SlotState({ immutable: true });
  feed(state, [start("/a", "a", [{ op: "add", path: "/a", value: "" }]), start("/b", "b", [{ op: "add", path: "/b", value: "" }])]);
  const before = state.fields;
  assert.equal(state.fields, before, "read twice, unchanged: the same map");
  feed(state, [delta("/a", "a", "x"), delta("/a", "a", "y")]);
  const after = state.fields;
  assert.notEqual(after, before);
  assert.equal(before["/a"].value, "", "the map handed out is left as it was");
  assert.equal(after["/a"].value, "xy");
  assert.notEqual(after["/a"], before["/a"]);
  assert.equal(after["/b"], before["/b"], "an untouched field is shared");
  feed(state, [{ type: "note", patch: [{ op: "add", path: "/c", value: 1 }] }]);
  assert.equal(state.fields, after, "a message that changes no field keeps the map");
});
