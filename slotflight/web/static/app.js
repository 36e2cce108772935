// The triage page: stream a triage object with the slotflight client (slotflight.js, the
// browser build of clients/js) and render it as it fills.
"use strict";

const $ = (id) => document.getElementById(id);
const SYSTEM = "You triage customer support tickets for a software company.";

let schemaPromise = null;
function triageSchema() {
  schemaPromise = schemaPromise || fetch("static/triage.schema.json").then((r) => r.json());
  return schemaPromise;
}

// -- rendering ------------------------------------------------------------------------

// The object, each field's state by JSON Pointer (from the client), and when each field
// completed (ms from the start).
const view = { state: {}, fields: {}, complete: new Map(), started: 0 };
// What the last run produced, for scripts and tests: the object, the final message and
// how many snapshots differed from the object the lean messages built (0 when correct).
window.triagePage = { object: null, last: null, mismatches: 0, messages: 0 };

let drawing = false;
function scheduleRedraw() {
  if (drawing) return;
  drawing = true;
  requestAnimationFrame(() => {
    drawing = false;
    redraw();
  });
}

function label(key) {
  return String(key).replace(/_/g, " ");
}

function leaf(pointer, key, value) {
  const row = document.createElement("div");
  row.className = "field";
  row.dataset.path = pointer;
  const field = view.fields[pointer];
  if (field) row.classList.add(field.status === "rejected" ? "failed" : field.status);
  const k = document.createElement("span");
  k.className = "key";
  k.textContent = label(key);
  const v = document.createElement("span");
  v.className = "value";
  v.textContent = value === null || value === undefined ? "" : String(value);
  const ms = document.createElement("span");
  ms.className = "ms";
  if (view.complete.has(pointer)) ms.textContent = `${view.complete.get(pointer)} ms`;
  row.append(k, v, ms);
  return row;
}

function render(node, pointer, key) {
  if (node !== null && typeof node === "object") {
    const group = document.createElement("div");
    group.className = "group";
    group.dataset.path = pointer;
    if (key !== null) {
      const title = document.createElement("div");
      title.className = "group-title";
      title.textContent = label(key);
      group.append(title);
    }
    const entries = Array.isArray(node) ? node.map((v, i) => [i, v]) : Object.entries(node);
    for (const [k, v] of entries) {
      const child = `${pointer}/${String(k).replace(/~/g, "~0").replace(/\//g, "~1")}`;
      group.append(render(v, child, Array.isArray(node) ? `${label(key)} ${Number(k) + 1}` : k));
    }
    return group;
  }
  return leaf(pointer, key, node);
}

function redraw() {
  $("object").replaceChildren(render(view.state, "", null));
}

function elapsed() {
  return Math.round(performance.now() - view.started);
}

function setStatus(text, isError) {
  $("status").textContent = text;
  $("status").classList.toggle("error", Boolean(isError));
}

// After each message: the object so far, the message, and the stream's per-field state.
function handle(data, stream) {
  const kind = data.type;
  view.state = stream.object;
  view.fields = stream.fields;
  window.triagePage.messages += 1;
  if (kind === "slot-rejected") setStatus(`${data.slot} ${data.reason} (${data.action})`);
  if (kind === "pass-failed") setStatus(`attempt ${data.attempt} stopped: ${data.error.message}`);
  if (kind === "retry") setStatus(`retrying ${data.slots.join(", ")} (attempt ${data.attempt})`);
  if (kind === "done") {
    $("t-all").textContent = `${elapsed()} ms`;
    setStatus(`done in ${elapsed()} ms`);
  }
  if (kind === "error") setStatus(`error: ${data.error.code}: ${data.error.message}`, true);
  scheduleRedraw();
}

function completed(pointer) {
  view.complete.set(pointer, elapsed());
  if (view.complete.size === 1) $("t-first").textContent = `${view.complete.get(pointer)} ms`;
}

async function run() {
  const button = $("run");
  button.disabled = true;
  Object.assign(view, { state: {}, fields: {}, complete: new Map() });
  window.triagePage = { object: null, last: null, mismatches: 0, messages: 0 };
  $("t-first").textContent = "–";
  $("t-all").textContent = "–";
  redraw();
  setStatus("starting…");
  try {
    const headers = {};
    const token = $("token").value.trim();
    if (token) headers.authorization = `Bearer ${token}`;
    const body = {
      model: $("model").value.trim() || "default",
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: $("ticket").value },
      ],
      schema: await triageSchema(),
    };
    view.started = performance.now();
    setStatus("streaming…");
    const stream = Slotflight.streamSlots("v1/slot-streams", body, { headers });
    stream.on("message", handle);
    stream.on("field-complete", completed);
    stream.on("end", (end) => {
      Object.assign(window.triagePage, { object: end.object, last: end.last || null, mismatches: stream.mismatches });
    });
    await stream.result;
    redraw();
  } catch (error) {
    // An error message already shows itself (handle); other failures show here.
    if (window.triagePage.last?.type !== "error") {
      setStatus(error.status ? `error ${error.status}: ${error.message}` : `error: ${error.message}`, true);
    }
  } finally {
    button.disabled = false;
  }
}

$("run").addEventListener("click", run);
redraw();
