// The package as an application installs it: `import` and `require` of both entries
// through its `exports` map, in Node with no window, document or EventSource (a server
// render, a Next.js server importing a client module), and its types under each
// moduleResolution a TypeScript project may use.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import { PACKAGE } from "./support.mjs";

/** An application folder whose node_modules holds this package (and React). */
let app;
before(() => {
  app = mkdtempSync(join(tmpdir(), "slotflight-app-"));
  mkdirSync(join(app, "node_modules", "@types"), { recursive: true });
  symlinkSync(PACKAGE, join(app, "node_modules", "slotflight"), "dir");
  for (const name of ["react", "react-dom", "scheduler", "@types/react"]) {
    symlinkSync(join(PACKAGE, "node_modules", name), join(app, "node_modules", name), "dir");
  }
});
after(() => rmSync(app, { recursive: true, force: true }));

const SOURCE = `
import { SlotStreamError, streamSlots, type FromSchema } from "slotflight";
import { useSlotStream, type UseSlotStreamResult } from "slotflight/react";
const schema = { type: "object", properties: { a: { type: "string" } }, required: ["a"] } as const;
const stream = streamSlots<FromSchema<typeof schema>>("/v1/slot-streams", {});
const a: string | undefined = stream.object.a;
const hook: (o: { api: string }) => UseSlotStreamResult<{ a: string }> = useSlotStream;
export const used = [a, hook, new SlotStreamError("http_error", "x").code];
`;

test("import and require resolve both entries, without window, document or EventSource", async () => {
  for (const name of ["window", "document", "EventSource"]) assert.equal(typeof globalThis[name], "undefined", name);
  const require = createRequire(join(app, "main.cjs"));
  const core = require("slotflight");
  const react = require("slotflight/react");
  assert.equal(typeof core.streamSlots, "function");
  assert.equal(typeof react.useSlotStream, "function");
  assert.match(require.resolve("slotflight/react"), /react\.cjs$/);
  // One SlotStreamError whichever entry an error comes through.
  assert.ok(Object.keys(require.cache).some((file) => file.endsWith("index.cjs")), "react.cjs uses index.cjs");
  const esm = await import(pathToFileURL(join(app, "node_modules", "slotflight", "dist", "index.js")).href);
  assert.deepEqual(Object.keys(esm).sort(), Object.keys(core).sort());
  const ReactDOMServer = require("react-dom/server");
  const React = require("react");
  for (const hookModule of [react, await import("slotflight/react")]) {
    let fetches = 0;
    function App() {
      const { isLoading, object } = hookModule.useSlotStream({ api: "/v1/slot-streams", fetch: () => (fetches += 1) });
      return React.createElement("p", null, `${isLoading} ${JSON.stringify(object)}`);
    }
    assert.equal(ReactDOMServer.renderToString(React.createElement(App)), "<p>false {}</p>");
    assert.equal(fetches, 0);
  }
});

for (const [name, options, files] of [
  ["bundler", ["--module", "ESNext", "--moduleResolution", "Bundler"], ["app.ts"]],
  ["node16 (ESM and CommonJS files)", ["--module", "Node16", "--moduleResolution", "Node16"], ["app.mts", "app.cts"]],
  ["nodenext", ["--module", "NodeNext", "--moduleResolution", "NodeNext"], ["app.mts", "app.cts"]],
  ["node10", ["--module", "CommonJS", "--moduleResolution", "Node10"], ["app.ts"]],
]) {
  test(`the types resolve with moduleResolution ${name}`, () => {
    const dir = mkdtempSync(join(app, "types-"));
    for (const file of files) writeFileSync(join(dir, file), SOURCE);
    const tsc = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");
    const args = ["--noEmit", "--strict", "--target", "ES2022", "--lib", "ES2022,DOM", "--types", "react", ...options];
    try {
      execFileSync(process.execPath, [tsc, ...args, ...files], { cwd: dir, encoding: "utf8" });
    } catch (error) {
      assert.fail(String(error.stdout));
    }
  });
}
