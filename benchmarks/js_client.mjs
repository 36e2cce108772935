// The JS client's cost per message, side by side with re-parsing partial JSON per chunk.
//
//   cd clients/js && npm ci && npm run build && nice node ../../benchmarks/js_client.mjs
//
// One string of SIZE characters (1 MB by default: words, a few of them non-ASCII)
// arrives in 4-character chunks, both ways in this one process:
//
// - slotflight: each chunk is one `slot-delta` SSE message as the gateway sends it with
//   `coalesce_ms: 0`, fed to the client's SSE parser and applied by `SlotState`
//   (JSON.parse of the message, the delta appended, the field's state updated);
// - partial-json: the chunk is appended to the JSON text `{"summary": "..."}` and the
//   whole text so far is parsed again with `parse` from the `partial-json` package,
//   as a client of a plain JSON stream does to show the object as it grows.
//
// partial-json's cost grows with the text so far, so it runs to the end only on the
// smaller sizes (FULL_SIZES); on SIZE it is timed at sampled prefixes, and its total is
// the sum over all chunks interpolated between those samples. Last, the cost of one
// delta to a field at the root with 10 and with 5,000 other fields in the state, in
// place and in immutable mode (what the React hook uses, the fields read before each
// run of deltas, as the hook reads them once per network read). Writes
// benchmarks/results/js_client.json.
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const PACKAGE = join(HERE, "..", "clients", "js");
const { SlotState, sseParser } = await import(join(PACKAGE, "dist", "index.js"));
const { parse } = createRequire(join(PACKAGE, "package.json"))("partial-json");

const CHUNK = 4;
const SIZE = Number(process.argv[2] ?? 1_000_000);
const FULL_SIZES = [16_000, 64_000];
const SAMPLES = 12;
const RESULTS = join(HERE, "results", "js_client.json");

function text(size) {
  const words = ["export", "job", "fails", "after", "ten", "minutes", "ünïcödé", "timeout", "✓"];
  let out = "";
  for (let i = 0; out.length < size; i++) out += `${words[(i * 7) % words.length]} `;
  return out.slice(0, size);
}

function chunks(value) {
  const out = [];
  for (let i = 0; i < value.length; i += CHUNK) out.push(value.slice(i, i + CHUNK));
  return out;
}

/** The SSE text the gateway sends for the string's deltas, one message per chunk. */
function sseText(pieces) {
  const slot = '"slot":"summary","path":"/summary","slot_id":1,"index":null,"attempt":1';
  const start = `id: 1\nevent: slot-start\ndata: {"type":"slot-start",${slot},"patch":[{"op":"add","path":"/summary","value":""}]}\n\n`;
  return [
    start,
    ...pieces.map(
      (piece, i) =>
        `id: ${i + 2}\nevent: slot-delta\ndata: {"type":"slot-delta",${slot},"delta":${JSON.stringify(piece)}}\n\n`,
    ),
  ];
}

/** Seconds to apply every message (each SSE message arrives as one network chunk). */
function runSlotflight(value) {
  const wire = sseText(chunks(value));
  const state = new SlotState({ maxStateChars: 64 * 1024 * 1024 });
  const feed = sseParser(
    {
      onMessage(message) {
        state.apply(message.event, message.data);
        return false;
      },
      onRetry() {},
    },
    1024 * 1024,
  );
  const started = process.hrtime.bigint();
  for (const piece of wire) feed(piece);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (state.object.summary !== value) throw new Error("slotflight built another string");
  return { seconds, messages: wire.length };
}

/** Seconds to re-parse the JSON text after every chunk, to the end. */
function runPartialJson(value) {
  const json = JSON.stringify({ summary: value });
  const pieces = chunks(json);
  let buffer = "";
  let last;
  const started = process.hrtime.bigint();
  for (const piece of pieces) {
    buffer += piece;
    last = parse(buffer);
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  if (last.summary !== value) throw new Error("partial-json built another string");
  return { seconds, messages: pieces.length };
}

/** partial-json's time for one parse of each sampled prefix, and the interpolated total. */
function samplePartialJson(value) {
  const json = JSON.stringify({ summary: value });
  const count = Math.ceil(json.length / CHUNK);
  const samples = [];
  for (let k = 1; k <= SAMPLES; k++) {
    const end = Math.round((k / SAMPLES) * count) * CHUNK;
    const prefix = json.slice(0, end);
    const repeats = 5;
    const started = process.hrtime.bigint();
    for (let r = 0; r < repeats; r++) parse(prefix);
    samples.push({ chars: prefix.length, seconds: Number(process.hrtime.bigint() - started) / 1e9 / repeats });
  }
  // The cost of parsing a prefix grows linearly with its length: sum the line through
  // the samples over every chunk's prefix (trapezoids between samples, from 0 at 0).
  let total = 0;
  let previous = { chars: 0, seconds: 0 };
  for (const sample of samples) {
    const chunksBetween = (sample.chars - previous.chars) / CHUNK;
    total += (chunksBetween * (previous.seconds + sample.seconds)) / 2;
    previous = sample;
  }
  return { samples, estimatedSeconds: total, messages: count };
}

const perMessageUs = (run) => (run.seconds / run.messages) * 1e6;
const rows = [];
for (const size of FULL_SIZES) {
  const value = text(size);
  runSlotflight(value); // warm-up
  const client = runSlotflight(value);
  const peer = runPartialJson(value);
  rows.push({
    chars: size,
    slotflight: { seconds: client.seconds, messages: client.messages, us_per_message: perMessageUs(client) },
    partial_json: { seconds: peer.seconds, messages: peer.messages, us_per_message: perMessageUs(peer) },
    ratio: perMessageUs(peer) / perMessageUs(client),
  });
}
const value = text(SIZE);
runSlotflight(text(64_000)); // warm-up
const client = runSlotflight(value);
const sampled = samplePartialJson(value);
const big = {
  chars: SIZE,
  slotflight: { seconds: client.seconds, messages: client.messages, us_per_message: perMessageUs(client) },
  partial_json_estimated: {
    seconds: sampled.estimatedSeconds,
    messages: sampled.messages,
    us_per_message: (sampled.estimatedSeconds / sampled.messages) * 1e6,
    us_last_parse: sampled.samples.at(-1).seconds * 1e6,
    samples: sampled.samples,
  },
};
big.ratio = big.partial_json_estimated.us_per_message / big.slotflight.us_per_message;

/** Microseconds per delta to a field at the root with `others` other fields. */
function microsPerDelta(others, immutable) {
  const state = new SlotState({ immutable });
  const many = Object.fromEntries(Array.from({ length: others }, (_, i) => [`f${i}`, "v"]));
  const slot = (name, id) => `"slot":"${name}","path":"/${name}","slot_id":${id},"index":null,"attempt":1`;
  state.apply("slot-start", `{"type":"slot-start",${slot("x", 1)},"patch":[{"op":"add","path":"/x","value":${JSON.stringify(many)}}]}`);
  for (let i = 0; i < others; i++) {
    const field = `"slot":"f${i}","path":"/x/f${i}","slot_id":${i + 2},"index":null,"attempt":1`;
    state.apply("slot-start", `{"type":"slot-start",${field}}`);
  }
  state.apply("slot-start", `{"type":"slot-start",${slot("y", others + 2)},"patch":[{"op":"add","path":"/y","value":""}]}`);
  const delta = `{"type":"slot-delta",${slot("y", others + 2)},"delta":"ab"}`;
  let best = Infinity;
  for (let run = 0; run < 5; run++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < 200; i++) {
      void state.fields; // read once per network read
      for (let k = 0; k < 10; k++) state.apply("slot-delta", delta);
    }
    best = Math.min(best, Number(process.hrtime.bigint() - started) / 1e3 / 2000);
  }
  return best;
}
const immutable = [10, 5000].map((others) => ({
  other_fields: others,
  in_place_us_per_delta: microsPerDelta(others, false),
  immutable_us_per_delta: microsPerDelta(others, true),
}));

const result = {
  machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, platform: `${os.platform()} ${os.release()}` },
  chunk_chars: CHUNK,
  full_runs: rows,
  large: big,
  immutable,
};
writeFileSync(RESULTS, `${JSON.stringify(result, null, 2)}\n`);
const fmt = (us) => `${us.toFixed(2)} µs`;
for (const row of rows) {
  console.log(
    `${row.chars} chars, ${row.slotflight.messages} messages: slotflight ${fmt(row.slotflight.us_per_message)}/message ` +
      `(${row.slotflight.seconds.toFixed(3)} s), partial-json ${fmt(row.partial_json.us_per_message)}/chunk ` +
      `(${row.partial_json.seconds.toFixed(2)} s): ${row.ratio.toFixed(0)}x`,
  );
}
console.log(
  `${SIZE} chars, ${big.slotflight.messages} messages: slotflight ${fmt(big.slotflight.us_per_message)}/message ` +
    `(${big.slotflight.seconds.toFixed(2)} s); partial-json estimated ${fmt(big.partial_json_estimated.us_per_message)}/chunk ` +
    `(${big.partial_json_estimated.seconds.toFixed(0)} s in all; the last parse ${fmt(big.partial_json_estimated.us_last_parse)}): ` +
    `${big.ratio.toFixed(0)}x`,
);
for (const row of immutable) {
  console.log(
    `a delta with ${row.other_fields} other fields: ${fmt(row.in_place_us_per_delta)} in place, ` +
      `${fmt(row.immutable_us_per_delta)} immutable (fields read every 10 deltas)`,
  );
}
console.log(`wrote ${RESULTS}`);
