// Every js, ts and tsx code block of docs/js.md, clients/js/README.md and the
// repository's README.md type-checks against the package's own types (dist/*.d.ts),
// so an example that no longer matches the API fails here.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { PACKAGE, REPO } from "./support.mjs";

const SOURCES = [join(REPO, "docs", "js.md"), join(PACKAGE, "README.md"), join(REPO, "README.md")];
const EXTENSIONS = { js: "js", javascript: "js", mjs: "js", jsx: "jsx", ts: "ts", typescript: "ts", tsx: "tsx" };
const FENCE = /^```([A-Za-z]+)[^\n]*\n([\s\S]*?)^```\s*$/gm;

/** The checkable blocks of a Markdown file: [extension, code, line]. */
export function blocks(markdown) {
  const found = [];
  for (const match of markdown.matchAll(FENCE)) {
    const extension = EXTENSIONS[match[1].toLowerCase()];
    if (extension) found.push([extension, match[2], markdown.slice(0, match.index).split("\n").length]);
  }
  return found;
}

test("the code blocks of the docs type-check against the package", () => {
  const work = mkdtempSync(join(PACKAGE, ".doc-blocks-"));
  try {
    const files = [];
    const where = {};
    for (const source of SOURCES) {
      if (!existsSync(source)) continue;
      for (const [extension, code, line] of blocks(readFileSync(source, "utf8"))) {
        const name = `block${files.length}.${extension}`;
        // Each block is a module of its own (top-level await, no shared names).
        writeFileSync(join(work, name), `${code}\nexport {};\n`);
        files.push(name);
        where[name] = `${source.slice(REPO.length + 1)}:${line}`;
      }
    }
    const fromJsDoc = Object.values(where).filter((w) => w.startsWith("docs/js.md")).length;
    assert.ok(fromJsDoc >= 3, `docs/js.md has ${fromJsDoc} checkable blocks`);
    // The browser build's global has the package's exports.
    writeFileSync(join(work, "globals.d.ts"), 'declare const Slotflight: typeof import("slotflight");\n');
    const dist = (name) => [join(PACKAGE, "dist", name)];
    writeFileSync(
      join(work, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2022",
          module: "ESNext",
          moduleResolution: "Bundler",
          lib: ["ES2022", "DOM", "DOM.Iterable"],
          jsx: "react-jsx",
          strict: true,
          allowJs: true,
          checkJs: true,
          noEmit: true,
          skipLibCheck: true,
          types: [],
          paths: { slotflight: dist("index.d.ts"), "slotflight/react": dist("react.d.ts") },
        },
        files: ["globals.d.ts", ...files],
      }),
    );
    const tsc = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");
    try {
      execFileSync(process.execPath, [tsc, "-p", join(work, "tsconfig.json")], { encoding: "utf8" });
    } catch (error) {
      const report = String(error.stdout).replace(/block\d+\.\w+/g, (name) => `${name} (${where[name]})`);
      assert.fail(`a code block does not type-check:\n${report}`);
    }
    console.log(`${files.length} code blocks type-checked (${fromJsDoc} from docs/js.md)`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
