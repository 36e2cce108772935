// Which options useSlotStream's submit and callbacks use, in headless Chromium (Debian's
// /usr/bin/chromium) against the real gateway: those of the last render React committed,
// never those of a render it threw away (a transition that suspended), and the new ones
// as soon as a render commits (effects of that commit, children's included, see them).
import assert from "node:assert/strict";
import { test } from "node:test";

import { LONG_VALUE, appPage as openApp, browserAndGateway, chromiumMissing } from "./support.mjs";

const env = browserAndGateway();
const missing = chromiumMissing;

// The page: <App version> uses the hook with a body, headers and onFinish of its version.
//   window.startApp(strict)      mounts version 0 (under <StrictMode> when `strict`)
//   window.suspendTo(version)    renders `version` in a transition that suspends for good:
//                                React renders it, then throws the render away
//   window.renderTo(version)     renders `version` (it commits)
//   window.childSubmits(version) renders `version` with a child whose layout effect
//                                (or passive effect, when `passive`) submits
const APP = `
import { StrictMode, Suspense, startTransition, use, useEffect, useLayoutEffect } from "react";
import { createRoot } from "react-dom/client";

import { useSlotStream } from "../dist/react.js";

const seen = { fetches: 0, sent: [], finishedBy: [], errors: [], rendered: [] };
window.hookPage = seen;
const never = new Promise(() => {});

const question = (version) => \`question \${version}\`;

function Child({ submit, passive }) {
  (passive ? useEffect : useLayoutEffect)(() => submit(), [submit]);
  return null;
}

function App({ version, pending, child }) {
  const { fields, isLoading, error, submit } = useSlotStream({
    api: "/v1/slot-streams",
    body: { ...window.requestBody, messages: [{ role: "user", content: question(version) }] },
    headers: { "x-version": String(version) },
    onFinish: () => seen.finishedBy.push(version),
    onError: (error) => seen.errors.push(String(error)),
    fetch: (url, init) => {
      seen.fetches += 1;
      seen.sent.push([JSON.parse(init.body).messages[0].content, init.headers["x-version"]]);
      return fetch(url, init);
    },
  });
  seen.rendered.push(version);
  if (pending) use(pending);
  window.submitApp = submit;
  const state = error ? "error" : isLoading ? "loading" : Object.keys(fields).length ? "done" : "idle";
  return (
    <main data-state={state} data-version={version}>
      <button id="run" onClick={submit}>Run</button>
      {child ? <Child submit={submit} passive={child === "passive"} /> : null}
    </main>
  );
}

let root;
let strict = false;
const render = (props) => {
  const app = (
    <Suspense fallback={<p id="fallback">loading</p>}>
      <App {...props} />
    </Suspense>
  );
  root.render(strict ? <StrictMode>{app}</StrictMode> : app);
};
window.startApp = (isStrict, child) => {
  strict = isStrict;
  root = createRoot(document.getElementById("root"));
  render({ version: 0, child });
};
window.suspendTo = (version) => startTransition(() => render({ version, pending: never }));
window.renderTo = (version) => render({ version });
window.childSubmits = (version, passive) => render({ version, child: passive ? "passive" : "layout" });
`;


/** The page, with React's production build, or its development build under <StrictMode>. */
async function appPage(strict, child) {
  const page = await openApp(env, { contents: APP }, strict ? "development" : "production");
  await page.evaluate(([isStrict, c]) => window.startApp(isStrict, c), [strict, child]);
  return page;
}

const doneState = (page) => page.waitForSelector('main[data-state="done"]', { timeout: 30_000 });
const seenBy = (page) => page.evaluate(() => window.hookPage);

for (const strict of [false, true]) {
  const where = strict ? "StrictMode (development)" : "production";

  test(`${where}: submit after a discarded transition render uses the committed body, headers and onFinish`, { skip: missing && "no Chromium" }, async () => {
    await env.gateway.add({ value: LONG_VALUE, chunks: 4 });
    const page = await appPage(strict);
    await page.waitForSelector('main[data-version="0"]');
    await page.evaluate(() => window.suspendTo(1));
    // React rendered version 1, which suspended: the render is thrown away, 0 stays.
    await page.waitForFunction(() => window.hookPage.rendered.includes(1), undefined, { timeout: 10_000 });
    assert.equal(await page.getAttribute("main", "data-version"), "0");
    assert.equal(await page.$("#fallback"), null, "a transition keeps what was shown");
    await page.click("#run");
    await doneState(page);
    assert.equal(await page.getAttribute("main", "data-version"), "0", "version 1 never committed");
    const seen = await seenBy(page);
    assert.deepEqual(seen.sent, [["question 0", "0"]]);
    assert.deepEqual([seen.finishedBy, seen.errors], [[0], []]);
    await page.close();
  });

  test(`${where}: once a render commits, submit uses its options`, { skip: missing && "no Chromium" }, async () => {
    await env.gateway.add({ value: LONG_VALUE, chunks: 4 });
    const page = await appPage(strict);
    await page.evaluate(() => window.suspendTo(1));
    await page.waitForFunction(() => window.hookPage.rendered.includes(1), undefined, { timeout: 10_000 });
    await page.evaluate(() => window.renderTo(2));
    await page.waitForSelector('main[data-version="2"]');
    await page.click("#run");
    await doneState(page);
    const seen = await seenBy(page);
    assert.deepEqual(seen.sent, [["question 2", "2"]]);
    assert.deepEqual([seen.finishedBy, seen.errors], [[2], []]);
    await page.close();
  });

  for (const passive of [false, true]) {
    const effect = passive ? "passive" : "layout";

    test(`${where}: a child's ${effect} effect on the first mount submits with the options of that mount`, { skip: missing && "no Chromium" }, async () => {
      await env.gateway.add({ value: LONG_VALUE, chunks: 4 });
      const page = await appPage(strict, passive ? "passive" : "layout");
      await doneState(page);
      const seen = await seenBy(page);
      assert.deepEqual(seen.sent.at(-1), ["question 0", "0"]);
      assert.ok(seen.sent.every(([content]) => content === "question 0"), JSON.stringify(seen.sent));
      assert.deepEqual([seen.finishedBy, seen.errors], [[0], []]);
      await page.close();
    });

    test(`${where}: a child's ${effect} effect submits with the options of the render that mounted it`, { skip: missing && "no Chromium" }, async () => {
      await env.gateway.add({ value: LONG_VALUE, chunks: 4 });
      const page = await appPage(strict);
      await page.waitForSelector('main[data-version="0"]');
      await page.evaluate((p) => window.childSubmits(3, p), passive);
      await doneState(page);
      const seen = await seenBy(page);
      assert.ok(seen.sent.length >= 1, "a request");
      assert.ok(seen.sent.every(([content, version]) => content === "question 3" && version === "3"), JSON.stringify(seen.sent));
      assert.deepEqual([seen.finishedBy, seen.errors], [[3], []]);
      await page.close();
    });
  }
}
