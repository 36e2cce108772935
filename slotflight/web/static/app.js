// The triage page: POST a slot stream, read its SSE body with fetch, render the object.
"use strict";

const $ = (id) => document.getElementById(id);
const SYSTEM = "You triage customer support tickets for a software company.";

let schemaPromise = null;
function triageSchema() {
  schemaPromise = schemaPromise || fetch("static/triage.schema.json").then((r) => r.json());
  return schemaPromise;
}

// Parse an SSE byte stream into {event, data, id} messages (the text/event-stream rules).
async function* sseMessages(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let message = { event: "message", data: [], id: null };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let cut;
    while ((cut = buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = buffer.slice(0, cut);
      buffer = buffer.slice(cut + (buffer.startsWith("\r\n", cut) ? 2 : 1));
      if (line === "") {
        if (message.data.length) yield { ...message, data: message.data.join("\n") };
        message = { event: "message", data: [], id: null };
        continue;
      }
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let text = colon < 0 ? "" : line.slice(colon + 1);
      if (text.startsWith(" ")) text = text.slice(1);
      if (field === "data") message.data.push(text);
      else if (field === "event") message.event = text;
      else if (field === "id") message.id = text;
    }
  }
}

// -- rendering ------------------------------------------------------------------------

const view = { state: {}, complete: new Map(), streaming: new Set(), failed: new Set(), started: 0 };

function label(key) {
  return String(key).replace(/_/g, " ");
}

function leaf(pointer, key, value) {
  const row = document.createElement("div");
  row.className = "field";
  row.dataset.path = pointer;
  if (view.complete.has(pointer)) row.classList.add("complete");
  else if (view.failed.has(pointer)) row.classList.add("failed");
  else if (view.streaming.has(pointer)) row.classList.add("streaming");
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

function handle(kind, data) {
  if (data.state !== undefined) view.state = data.state;
  if (kind === "slot-start") view.streaming.add(data.path);
  if (kind === "slot-complete") {
    view.streaming.delete(data.path);
    view.failed.delete(data.path);
    view.complete.set(data.path, elapsed());
    if (view.complete.size === 1) $("t-first").textContent = `${view.complete.get(data.path)} ms`;
  }
  if (kind === "slot-failed") {
    view.streaming.delete(data.path);
    view.failed.add(data.path);
  }
  if (kind === "retry") setStatus(`retrying ${data.slots.join(", ")} (attempt ${data.attempt})`);
  if (kind === "done") {
    $("t-all").textContent = `${elapsed()} ms`;
    setStatus(`done in ${elapsed()} ms`);
  }
  if (kind === "error") setStatus(`error: ${data.error.code}: ${data.error.message}`, true);
  redraw();
}

async function run() {
  const button = $("run");
  button.disabled = true;
  Object.assign(view, { state: {}, complete: new Map(), streaming: new Set(), failed: new Set() });
  $("t-first").textContent = "–";
  $("t-all").textContent = "–";
  redraw();
  setStatus("starting…");
  try {
    const headers = { "content-type": "application/json" };
    const token = $("token").value.trim();
    if (token) headers.authorization = `Bearer ${token}`;
    const body = {
      model: $("model").value.trim() || "default",
      messages: [
        { role: "system", content: SYSTEM },
        { role: "user", content: $("ticket").value },
      ],
      schema: await triageSchema(),
      options: { state_mode: "full", coalesce_ms: 30 },
    };
    view.started = performance.now();
    const response = await fetch("v1/slot-streams", { method: "POST", headers, body: JSON.stringify(body) });
    if (!response.ok) {
      const problem = await response.json().catch(() => ({ error: { code: response.status, message: response.statusText } }));
      setStatus(`error ${response.status}: ${problem.error.message}`, true);
      return;
    }
    setStatus("streaming…");
    let ended = false;
    for await (const message of sseMessages(response.body)) {
      handle(message.event, JSON.parse(message.data));
      if (message.event === "done" || message.event === "error") ended = true;
    }
    if (!ended) setStatus("the connection closed before the stream ended", true);
  } catch (error) {
    setStatus(`error: ${error}`, true);
  } finally {
    button.disabled = false;
  }
}

$("run").addEventListener("click", run);
redraw();
