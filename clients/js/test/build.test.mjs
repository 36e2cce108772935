// The browser build committed for the gateway's page is what the sources build today,
// and it stays within its size budget.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { BUDGET_BYTES, STATIC_FILE, browserBuild, sizes } from "../build.mjs";

test("slotflight/web/static/slotflight.js is the browser build of these sources, byte for byte", async () => {
  const committed = readFileSync(STATIC_FILE, "utf8");
  const built = await browserBuild();
  assert.ok(
    committed === built,
    "the committed browser build is stale: run `npm run build:static` in clients/js and commit it",
  );
});

test("the browser build is at most 6 KiB minified and gzipped", async () => {
  const size = sizes(await browserBuild());
  console.log(`browser build: ${size.bytes} bytes minified, ${size.gzip} bytes gzipped`);
  assert.ok(size.gzip <= BUDGET_BYTES, `${size.gzip} bytes gzipped`);
});
