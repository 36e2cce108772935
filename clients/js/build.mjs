// Build the package: ESM entries and their type declarations in dist/, the same as
// CommonJS for `require` (index.cjs, react.cjs, and *.d.cts declarations), and the
// minified browser build (the global `Slotflight`) in dist/slotflight.browser.js.
//
//   node build.mjs            build dist/ and report the browser build's size
//   node build.mjs --static   also copy the browser build to the gateway's static folder
//
// The build is deterministic: test/build.test.mjs rebuilds the browser file and checks
// it is byte for byte the one committed at slotflight/web/static/slotflight.js.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import * as esbuild from "esbuild";

const ROOT = dirname(fileURLToPath(import.meta.url));
const DIST = join(ROOT, "dist");
export const STATIC_FILE = join(ROOT, "..", "..", "slotflight", "web", "static", "slotflight.js");
/** The browser build's budget, minified and gzipped. */
export const BUDGET_BYTES = 6 * 1024;

const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));

/** The minified browser build, as text. */
export async function browserBuild() {
  const built = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: ["src/browser.ts"],
    bundle: true,
    format: "iife",
    globalName: "Slotflight",
    platform: "browser",
    target: "es2020",
    minify: true,
    mangleProps: /^_[a-z]/,
    legalComments: "none",
    charset: "utf8",
    banner: { js: `/* slotflight ${pkg.version} (clients/js, MIT): built by build.mjs, do not edit */` },
    write: false,
  });
  return built.outputFiles[0].text;
}

/** Sizes of a build: raw and gzipped bytes. */
export function sizes(text) {
  const bytes = Buffer.from(text, "utf8");
  return { bytes: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}

async function main() {
  rmSync(DIST, { recursive: true, force: true });
  await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: ["src/index.ts", "src/react.ts"],
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "neutral",
    target: "es2020",
    external: ["react"],
    outdir: DIST,
    chunkNames: "shared",
    charset: "utf8",
  });
  // CommonJS: react.cjs requires index.cjs, so both entries share one SlotStreamError.
  await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: ["src/index.ts", "src/react.ts"],
    bundle: true,
    format: "cjs",
    platform: "neutral",
    target: "es2020",
    outdir: DIST,
    outExtension: { ".js": ".cjs" },
    charset: "utf8",
    plugins: [
      {
        name: "external-index",
        setup(build) {
          build.onResolve({ filter: /^react$|^\.\/index\.js$/ }, (args) =>
            args.path === "react" || args.importer.endsWith("react.ts") ? { path: args.path.replace(/\.js$/, ".cjs"), external: true } : undefined,
          );
        },
      },
    ],
  });
  execFileSync(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", join(ROOT, "tsconfig.json")], {
    stdio: "inherit",
  });
  // The declarations again as CommonJS ones (what `require` resolves under node16).
  for (const name of readdirSync(DIST).filter((file) => file.endsWith(".d.ts"))) {
    const text = readFileSync(join(DIST, name), "utf8").replace(/((?:from |import\()"\.\/[^"]+)\.js"/g, '$1.cjs"');
    writeFileSync(join(DIST, name.replace(/\.d\.ts$/, ".d.cts")), text);
  }
  const browser = await browserBuild();
  mkdirSync(DIST, { recursive: true });
  writeFileSync(join(DIST, "slotflight.browser.js"), browser);
  const size = sizes(browser);
  writeFileSync(join(DIST, "size.json"), `${JSON.stringify(size)}\n`);
  console.log(`browser build: ${size.bytes} bytes minified, ${size.gzip} bytes gzipped (budget ${BUDGET_BYTES})`);
  if (process.argv.includes("--static")) {
    copyFileSync(join(DIST, "slotflight.browser.js"), STATIC_FILE);
    console.log(`copied to ${STATIC_FILE}`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
