// The React hook in headless Chromium (Debian's /usr/bin/chromium) against the real
// gateway: the page is served at the gateway's origin, the stream is real HTTP.
import assert from "node:assert/strict";
import { test } from "node:test";

import { LONG_VALUE, appPage as openApp, browserAndGateway, chromiumMissing, leaves } from "./support.mjs";

const env = browserAndGateway();
const missing = chromiumMissing;

/**
 * A page at the gateway's origin rendering test/fixtures/hook-app.jsx, or another
 * fixture, with React's production or development build.
 */
const appPage = (fixture = "hook-app.jsx", mode = "production") => openApp(env, fixture, mode);

test("useSlotStream fills the DOM field by field in Chromium", { skip: missing && "no Chromium" }, async () => {
  await env.gateway.add({ value: LONG_VALUE, chunks: 4, chunk_delay: 0.002 });
  const page = await appPage();
  await page.click("#run");
  await page.waitForSelector('main[data-state="done"]', { timeout: 30_000 });
  const shown = await page.$$eval("li[data-path]", (items) =>
    Object.fromEntries(items.map((li) => [li.dataset.path, [li.querySelector(".value").textContent, li.dataset.status]])),
  );
  const expected = leaves(LONG_VALUE);
  assert.deepEqual(
    shown,
    Object.fromEntries(Object.entries(expected).map(([pointer, value]) => [pointer, [String(value), "complete"]])),
  );
  assert.equal(await page.textContent("#summary"), LONG_VALUE.summary);
  assert.equal(await page.textContent("#tags"), LONG_VALUE.tags.join(", "));
  const seen = await page.evaluate(() => window.hookPage);
  const lengths = new Set(seen.summaryLengths);
  assert.ok(lengths.size > 3, `the summary rendered as it grew (${[...lengths].join(", ")})`);
  await page.close();
});

test("unmounting during a stream stops it without calling onError", { skip: missing && "no Chromium" }, async () => {
  const { count } = await env.gateway.command({ op: "requests" });
  await env.gateway.add({ value: LONG_VALUE, chunks: 4, stall_after_bytes: 120 });
  const page = await appPage();
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#summary")?.textContent.length > 0, undefined, { timeout: 30_000 });
  assert.equal(await page.getAttribute("main", "data-state"), "loading");
  await page.evaluate(() => window.unmountApp());
  const closed = await env.gateway.command({ op: "wait_disconnect", index: count, timeout: 8 });
  assert.equal(closed.ok, true, "the stream was closed, and the model request with it");
  await page.waitForTimeout(100);
  assert.deepEqual(await page.evaluate(() => window.hookPage.errors), []);
  await page.close();
});

test("submit after unmounting starts no stream", { skip: missing && "no Chromium" }, async () => {
  const page = await appPage();
  const fetches = await page.evaluate(() => {
    window.unmountApp();
    window.submitApp(); // a timer or a callback that outlived the component
    return window.hookPage.fetches;
  });
  assert.equal(fetches, 0, "no request that nothing would stop");
  await page.close();
});

// StrictMode in development mounts each component, unmounts it and mounts it again.

/** A StrictMode page (React's development build) started in `mode` (see strict-app.jsx). */
async function strictPage(mode) {
  const page = await appPage("strict-app.jsx", "development");
  await page.evaluate((m) => window.startApp(m), mode);
  return page;
}

const doneState = (page) => page.waitForSelector('main[data-state="done"]', { timeout: 30_000 });

for (const [mode, name] of [
  ["once", "StrictMode: a stream started once by a guarded effect runs to done"],
  ["effect", "StrictMode: an effect that submits on every mount sends one request"],
]) {
  test(name, { skip: missing && "no Chromium" }, async () => {
    const before = await env.gateway.command({ op: "requests" });
    await env.gateway.add({ value: LONG_VALUE, chunks: 8 });
    const page = await strictPage(mode);
    await doneState(page);
    assert.equal(await page.textContent("#summary"), LONG_VALUE.summary);
    const seen = await page.evaluate(() => window.hookPage);
    assert.deepEqual([seen.fetches, seen.finishes, seen.errors], [1, 1, []]);
    assert.equal((await env.gateway.command({ op: "requests" })).count, before.count + 1, "one model request");
    await page.close();
  });
}

test("StrictMode: unmounting during a stream aborts its request, no callback", { skip: missing && "no Chromium" }, async () => {
  const { count } = await env.gateway.command({ op: "requests" });
  await env.gateway.add({ value: LONG_VALUE, chunks: 4, stall_after_bytes: 120 });
  const page = await strictPage("click");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#summary")?.textContent.length > 0, undefined, { timeout: 30_000 });
  await page.evaluate(() => window.unmountApp());
  const closed = await env.gateway.command({ op: "wait_disconnect", index: count, timeout: 8 });
  assert.equal(closed.ok, true, "the stream was closed, and the model request with it");
  await page.waitForTimeout(100);
  const seen = await page.evaluate(() => window.hookPage);
  assert.deepEqual([seen.fetches, seen.finishes, seen.errors], [1, 0, []]);
  await page.close();
});

test("StrictMode: submit during a stream, and stop() then submit(): the last stream alone fills the view", { skip: missing && "no Chromium" }, async () => {
  const { count } = await env.gateway.command({ op: "requests" });
  const other = { ...LONG_VALUE, summary: "The second answer", tags: ["second"] };
  await env.gateway.add(
    { value: LONG_VALUE, chunks: 4, stall_after_bytes: 120 },
    { value: LONG_VALUE, chunks: 4, stall_after_bytes: 120 },
    { value: other, chunks: 4 },
  );
  const page = await strictPage("click");
  const started = () => page.waitForFunction(() => document.querySelector("#summary")?.textContent.length > 0, undefined, { timeout: 30_000 });
  await page.click("#run");
  await started();
  await page.evaluate(() => window.submitApp()); // replaces the running stream
  assert.equal((await env.gateway.command({ op: "wait_disconnect", index: count, timeout: 8 })).ok, true);
  await started();
  await page.evaluate(() => window.stopApp());
  assert.equal((await env.gateway.command({ op: "wait_disconnect", index: count + 1, timeout: 8 })).ok, true);
  assert.equal(await page.getAttribute("main", "data-state"), "done", "stopped: not loading, what arrived kept");
  await page.evaluate(() => window.submitApp());
  await page.waitForFunction((s) => document.querySelector("#summary")?.textContent === s, other.summary, { timeout: 30_000 });
  await doneState(page);
  const seen = await page.evaluate(() => window.hookPage);
  assert.deepEqual([seen.fetches, seen.finishes, seen.errors], [3, 1, []]);
  await page.close();
});

test("StrictMode: submit uses the body and options of the last render, and its onFinish", { skip: missing && "no Chromium" }, async () => {
  await env.gateway.add({ value: LONG_VALUE, chunks: 4 });
  const page = await strictPage("click");
  await page.evaluate(() => window.renderApp("the second question", 1));
  await page.evaluate(() => window.renderApp("the third question", 2));
  await page.click("#run");
  await doneState(page);
  const seen = await page.evaluate(() => window.hookPage);
  assert.deepEqual(seen.sent, [["the third question", "2"]]);
  assert.deepEqual([seen.finishedBy, seen.errors], [[2], []]);
  await page.close();
});

test("StrictMode: an <Activity> hidden during a stream stops it; shown again, the view is not loading", { skip: missing && "no Chromium" }, async () => {
  const { count } = await env.gateway.command({ op: "requests" });
  await env.gateway.add({ value: LONG_VALUE, chunks: 4, stall_after_bytes: 120 });
  const page = await strictPage("click");
  await page.click("#run");
  await page.waitForFunction(() => document.querySelector("#summary")?.textContent.length > 0, undefined, { timeout: 30_000 });
  await page.evaluate(() => window.hideApp(true));
  assert.equal((await env.gateway.command({ op: "wait_disconnect", index: count, timeout: 8 })).ok, true);
  await page.evaluate(() => window.hideApp(false));
  await doneState(page);
  assert.ok((await page.textContent("#summary")).length > 0, "what arrived stays");
  const seen = await page.evaluate(() => window.hookPage);
  assert.deepEqual([seen.fetches, seen.finishes, seen.errors], [1, 0, []]);
  await page.close();
});
