// The connection options against the real gateway: a headers function called once per
// connection (a fresh token on the resume, a failing one ending the stream with a typed
// error, an abort while it is pending), `credentials` passed to fetch on every
// connection, and, in headless Chromium, the hook's headers function of the last
// committed render and its clear().
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { SlotStreamError, streamSlots } from "../dist/index.js";
import { LONG_VALUE, appPage as openApp, body, browserAndGateway, chromiumMissing, cuttingProxy, startGateway } from "./support.mjs";

/** The gateway's retry hint in this file (ms): short, so resuming tests stay short. */
const RETRY_MS = 200;
let gateway;

before(async () => {
  gateway = await startGateway(["--resume-grace-s", "5", "--retry-ms", String(RETRY_MS)]);
});
after(() => gateway.close());

/** The requests to /v1/* the gateway received after the first `from`: [method, path, header]. */
async function received(on, header, from = 0) {
  const { requests } = await on.command({ op: "gateway_requests", header });
  return requests.filter(([, path]) => path.startsWith("/v1/")).slice(from);
}

/** A stream through a proxy that cuts its first connection mid-stream; runs it to its end. */
async function cutStream(options) {
  await gateway.add({ value: LONG_VALUE, chunks: 4, chunk_delay: 0.003 });
  const proxy = await cuttingProxy(gateway.url, 1500);
  try {
    const stream = streamSlots(`${proxy.url}/v1/slot-streams`, body({ coalesce_ms: 0 }), options);
    const outcome = await stream.result.then((result) => ({ result }), (error) => ({ error }));
    return { ...outcome, stream, proxy: proxy.state };
  } finally {
    await proxy.close();
  }
}

for (const kind of ["sync", "async"]) {
  test(`a headers function (${kind}) is called once per connection: the resume sends its fresh value`, async () => {
    const from = (await received(gateway, "authorization")).length;
    let calls = 0;
    const token = () => `Bearer token-${++calls}`;
    const headers = kind === "sync" ? () => ({ authorization: token() }) : async () => ({ authorization: token() });
    const { result, error, proxy } = await cutStream({ headers });
    assert.equal(error, undefined, String(error?.stack));
    assert.deepEqual(result.object, LONG_VALUE);
    assert.equal(proxy.connections, 2, "the POST and one resume");
    assert.equal(calls, 2, "one call per connection");
    const seen = await received(gateway, "authorization", from);
    assert.deepEqual(seen.map(([method, , value]) => [method, value]), [
      ["POST", "Bearer token-1"],
      ["GET", "Bearer token-2"],
    ]);
    assert.match(seen[1][1], /^\/v1\/slot-streams\/[0-9a-f]+\/events$/);
    assert.match(proxy.requests[1], /\r\nlast-event-id: \d+\r\n/i, "the resume still sends Last-Event-ID");
  });
}

test("a headers function that throws, rejects or gives no object: network_error, no request sent", async () => {
  const from = (await received(gateway, "authorization")).length;
  const expired = new Error("the token could not be refreshed");
  for (const [name, headers, cause] of [
    ["throws", () => {
      throw expired;
    }, expired],
    ["rejects", () => Promise.reject(expired), expired],
    ["gives null", () => null, undefined],
    ["gives a string", async () => "Bearer x", undefined],
  ]) {
    const stream = streamSlots(gateway.streams, body(), { headers });
    const ends = [];
    stream.on("end", (end) => ends.push(end));
    const error = await stream.result.then(() => "resolved", (e) => e);
    assert.ok(error instanceof SlotStreamError, `${name}: ${error}`);
    assert.equal(error.code, "network_error", name);
    assert.equal(error.cause, cause, name);
    assert.deepEqual(ends.map((end) => [end.ok, end.error]), [[false, error]], name);
  }
  assert.deepEqual(await received(gateway, "authorization", from), [], "the gateway got no request");
});

test("a headers function that rejects on the resume ends the stream with network_error, not more reconnections", async () => {
  const from = (await received(gateway, "authorization")).length;
  const expired = new Error("signed out");
  let calls = 0;
  const { error, stream, proxy } = await cutStream({
    headers: async () => {
      calls += 1;
      if (calls > 1) throw expired;
      return { authorization: "Bearer first" };
    },
  });
  assert.ok(error instanceof SlotStreamError, String(error));
  assert.equal(error.code, "network_error");
  assert.equal(error.cause, expired);
  assert.equal(calls, 2);
  assert.equal(proxy.connections, 1, "no reconnection was made");
  assert.ok(stream.object.summary.length > 0, "what arrived stays");
  assert.deepEqual((await received(gateway, "authorization", from)).map(([method]) => method), ["POST"]);
});

test("an abort while a headers function is pending rejects at once; no request is sent after it", { timeout: 60_000 }, async () => {
  const from = (await received(gateway, "authorization")).length;
  let fetches = 0;
  const counting = (url, init) => {
    fetches += 1;
    return fetch(url, init);
  };
  let release;
  let called;
  const pending = new Promise((resolve) => (called = resolve));
  const controller = new AbortController();
  const stream = streamSlots(gateway.streams, body(), {
    signal: controller.signal,
    fetch: counting,
    idleTimeoutMs: 0, // only the abort can end it
    headers: () => {
      called();
      return new Promise((resolve) => (release = resolve));
    },
  });
  await pending;
  const reason = new Error("the user left");
  controller.abort(reason);
  // Still pending: only the abort can settle the result.
  assert.equal(await stream.result.then(() => "resolved", (e) => e), reason);
  release({ authorization: "Bearer late" });
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(fetches, 0, "no request after the abort");
  // Aborted as soon as it was made (a component mounted twice by StrictMode): not called.
  let calls = 0;
  const once = streamSlots(gateway.streams, body(), {
    headers: () => {
      calls += 1;
      return {};
    },
  });
  once.abort(new Error("unmounted"));
  await once.result.catch(() => {});
  assert.equal(calls, 0);
  assert.deepEqual(await received(gateway, "authorization", from), []);
});

test("credentials is passed to fetch on every connection (the POST and the resume), left out when not given", async () => {
  const seen = [];
  const recording = (url, init) => {
    seen.push([init.method, "credentials" in init ? init.credentials : "absent"]);
    return fetch(url, init);
  };
  const { result, error } = await cutStream({ credentials: "include", fetch: recording });
  assert.equal(error, undefined, String(error?.stack));
  assert.deepEqual(result.object, LONG_VALUE);
  assert.deepEqual(seen, [
    ["POST", "include"],
    ["GET", "include"],
  ]);
  seen.length = 0;
  await gateway.add({ value: LONG_VALUE, chunks: 2 });
  await streamSlots(gateway.streams, body(), { fetch: recording }).result;
  assert.deepEqual(seen, [["POST", "absent"]]);
});

// The hook in headless Chromium (Debian's /usr/bin/chromium) against the real gateway
// (its own, at the default retry hint), the page served at the gateway's origin.

const env = browserAndGateway();
const missing = chromiumMissing && "no Chromium";

/** A page rendering test/fixtures/options-app.jsx with `token`, production or StrictMode (development). */
async function appPage(strict, token = "a") {
  const page = await openApp(env, "options-app.jsx", strict ? "development" : "production");
  await page.evaluate(([s, t]) => window.startApp(s, t), [strict, token]);
  await page.waitForSelector(`main[data-token="${token}"]`);
  return page;
}

const inState = (page, state) => page.waitForSelector(`main[data-state="${state}"]`, { timeout: 30_000 });
const shown = (page) =>
  page.evaluate(() => ({
    summary: document.querySelector("#summary").textContent,
    keys: document.querySelector("#keys").textContent,
    fields: document.querySelector("#fields").textContent,
    error: document.querySelector("#error")?.textContent ?? null,
  }));
const EMPTY = { summary: "", keys: "0", fields: "0", error: null };

for (const strict of [false, true]) {
  const where = strict ? "StrictMode (development)" : "production";

  test(`${where}: the hook's resume calls the headers function of the last committed render`, { skip: missing }, async () => {
    const from = (await received(env.gateway, "x-token")).length;
    await env.gateway.add({ value: LONG_VALUE, chunks: 4, chunk_delay: 0.003 });
    const page = await appPage(strict, "a");
    await page.evaluate(() => {
      window.holdPost();
      window.submitApp();
    });
    // The POST left with token a; a render with token b commits before its answer.
    await page.waitForFunction(() => window.hookPage.fetches === 1);
    await page.evaluate(() => window.renderApp("b"));
    await page.waitForSelector('main[data-token="b"]');
    await page.evaluate(() => window.releasePost());
    await inState(page, "done");
    const seen = await page.evaluate(() => window.hookPage);
    assert.deepEqual(seen.headerCalls, ["a", "b"]);
    assert.equal(seen.sent.length, 2, JSON.stringify(seen.sent));
    assert.deepEqual(seen.sent[0], ["POST", "a", null, "same-origin"]);
    const [method, token, lastId, credentials] = seen.sent[1];
    assert.deepEqual([method, token, credentials], ["GET", "b", "same-origin"]);
    assert.match(lastId, /^\d+$/, "the resume sends Last-Event-ID");
    assert.deepEqual((await received(env.gateway, "x-token", from)).map(([m, , t]) => [m, t]), [
      ["POST", "a"],
      ["GET", "b"],
    ]);
    assert.equal((await shown(page)).summary, LONG_VALUE.summary);
    assert.deepEqual([seen.finishes, seen.errors], [1, []]);
    await page.close();
  });

  test(`${where}: clear() during a stream stops its request and empties the view, no onError`, { skip: missing }, async () => {
    const { count } = await env.gateway.command({ op: "requests" });
    await env.gateway.add({ value: LONG_VALUE, chunks: 4, stall_after_bytes: 120 });
    const page = await appPage(strict);
    await page.evaluate(() => window.submitApp());
    await page.waitForFunction(() => document.querySelector("#summary")?.textContent.length > 0, undefined, { timeout: 30_000 });
    assert.equal(await page.getAttribute("main", "data-state"), "loading");
    await page.evaluate(() => window.clearApp());
    await inState(page, "idle");
    assert.deepEqual(await shown(page), EMPTY);
    const closed = await env.gateway.command({ op: "wait_disconnect", index: count, timeout: 8 });
    assert.equal(closed.ok, true, "the stream was closed, and the model request with it");
    await page.waitForTimeout(100);
    const seen = await page.evaluate(() => window.hookPage);
    assert.deepEqual([seen.fetches, seen.finishes, seen.errors], [1, 0, []]);
    assert.deepEqual(await shown(page), EMPTY, "nothing of the stopped stream shows up later");
    await page.close();
  });

  test(`${where}: clear() after done and after a failure empties the object, fields and error`, { skip: missing }, async () => {
    await env.gateway.add({ value: LONG_VALUE, chunks: 4 });
    const page = await appPage(strict);
    await page.evaluate(() => window.submitApp());
    await inState(page, "done");
    assert.notDeepEqual(await shown(page), EMPTY);
    await page.evaluate(() => window.clearApp());
    await inState(page, "idle");
    assert.deepEqual(await shown(page), EMPTY);
    await env.gateway.add({ text: "", status: 401 });
    await page.evaluate(() => window.submitApp({ ...window.requestBody, options: { max_attempts: 1 } }));
    await inState(page, "error");
    assert.equal((await shown(page)).error, "upstream_status");
    await page.evaluate(() => window.clearApp());
    await inState(page, "idle");
    assert.deepEqual(await shown(page), EMPTY);
    const seen = await page.evaluate(() => window.hookPage);
    assert.deepEqual([seen.fetches, seen.finishes, seen.errors.length], [2, 1, 1]);
    await page.close();
  });
}
