// slotstream.js: a small browser client for slotflight slot streams (no build step).
//
//   <script src="/static/slotstream.js"></script>
//   const result = await SlotStream.stream("/v1/slot-streams", body, {
//     headers: { authorization: "Bearer TOKEN" },
//     onMessage(kind, data, object) { ... },   // after each message is applied
//   });
//   result.object   // the final object; result.last: the done or error message
//
// It POSTs the request with fetch (an EventSource cannot POST), reads the SSE body,
// and applies each message to the object (SlotState): a slot-delta appends its delta to
// the string at its path; any other message applies its patch (RFC 6902 add, replace,
// remove). A message with state (full mode on every message; patch mode on done, error
// and some slot-complete) is checked against the object built so far and then taken
// as it is, so a client resynchronises there. When the connection drops before done
// or error (or an instance that stops sends an id-less shutting_down notice), it
// reconnects to the stream's Location with the last id it saw (maxReconnects times,
// waiting the server's retry hint).
(function (global) {
  "use strict";

  // JSON Pointer ("/a/b~1c/0") to its reference tokens.
  function tokens(pointer) {
    if (pointer === "") return [];
    if (pointer[0] !== "/") throw new Error(`bad JSON Pointer ${pointer}`);
    return pointer.slice(1).split("/").map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
  }

  function child(container, token) {
    return Array.isArray(container) ? (token === "-" ? container.length : Number(token)) : token;
  }

  function deepEqual(a, b) {
    if (a === b) return true;
    if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
    if (Array.isArray(a) !== Array.isArray(b)) return false;
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    return keys.every((k) => Object.prototype.hasOwnProperty.call(b, k) && deepEqual(a[k], b[k]));
  }

  // The object as messages build it. O(size of the message) per message: appended text
  // is concatenated (engines keep such strings as ropes until read).
  class SlotState {
    constructor() {
      this.object = {};
      this.mismatches = 0; // snapshots that differed from the object built so far
    }

    apply(kind, data) {
      if (kind === "slot-delta") {
        const path = tokens(data.path);
        const parent = this.locate(path);
        parent[child(parent, path[path.length - 1])] += data.delta;
      } else if (Array.isArray(data.patch)) {
        for (const op of data.patch) this.operate(op);
      }
      if (data.state !== undefined) {
        if (!deepEqual(this.object, data.state)) this.mismatches += 1;
        this.object = data.state;
      }
    }

    locate(path) {
      let node = this.object;
      for (const token of path.slice(0, -1)) node = node[child(node, token)];
      return node;
    }

    operate(op) {
      const path = tokens(op.path);
      if (path.length === 0) {
        if (op.op !== "remove") this.object = op.value;
        return;
      }
      const parent = this.locate(path);
      const key = child(parent, path[path.length - 1]);
      if (op.op === "add" && Array.isArray(parent)) parent.splice(key, 0, op.value);
      else if (op.op === "add" || op.op === "replace") parent[key] = op.value;
      else if (op.op === "remove" && Array.isArray(parent)) parent.splice(key, 1);
      else if (op.op === "remove") delete parent[key];
      else throw new Error(`unsupported patch operation ${op.op}`);
    }
  }

  // Parse an SSE byte stream into {event, data, id, retry} messages (text/event-stream).
  async function* messages(body) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let message = { event: "message", data: [], id: null, retry: null };
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
          message = { event: "message", data: [], id: null, retry: null };
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
        else if (field === "retry" && /^\d+$/.test(text)) message.retry = Number(text);
      }
    }
  }

  class HttpError extends Error {
    constructor(status, body) {
      super(`HTTP ${status}: ${body && body.error ? body.error.message : ""}`);
      this.status = status;
      this.body = body;
    }
  }

  async function stream(url, body, options = {}) {
    const { headers = {}, onMessage = () => {}, signal, maxReconnects = 3 } = options;
    const state = new SlotState();
    let response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify(body),
      signal,
    });
    const location = response.headers.get("location");
    let lastId = null;
    let retryMs = 1000;
    for (let attempt = 0; ; attempt += 1) {
      if (!response.ok) {
        const problem = await response.json().catch(() => null);
        throw new HttpError(response.status, problem);
      }
      try {
        for await (const message of messages(response.body)) {
          if (message.id !== null) lastId = message.id;
          if (message.retry !== null) retryMs = message.retry;
          const data = JSON.parse(message.data);
          // An id-less shutting_down notice: this instance stops, the stream goes on
          // elsewhere; reconnect (behind a load balancer, to another instance).
          if (message.event === "error" && message.id === null && data.error.code === "shutting_down") break;
          state.apply(message.event, data);
          onMessage(message.event, data, state.object);
          if (message.event === "done" || message.event === "error") {
            return { object: state.object, last: data, mismatches: state.mismatches };
          }
        }
      } catch (error) {
        if (signal && signal.aborted) throw error;
      }
      if (!location || attempt >= maxReconnects) {
        throw new Error("the connection closed before the stream ended");
      }
      await new Promise((resolve) => setTimeout(resolve, retryMs));
      const after = lastId === null ? "0" : encodeURIComponent(lastId);
      response = await fetch(`${location}?last_event_id=${after}`, { headers, signal });
    }
  }

  global.SlotStream = { SlotState, messages, stream, HttpError };
})(globalThis);
