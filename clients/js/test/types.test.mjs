// The type helpers compute the types they document (test/types.check.ts compiles).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";

import { PACKAGE } from "./support.mjs";

test("FromSchema, DeepPartial and FieldPointer give the documented types", () => {
  const tsc = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");
  const args = ["--noEmit", "--strict", "--target", "ES2022", "--module", "ESNext", "--moduleResolution", "Bundler"];
  try {
    execFileSync(process.execPath, [tsc, ...args, "--lib", "ES2022,DOM", join(PACKAGE, "test", "types.check.ts")], { encoding: "utf8" });
  } catch (error) {
    assert.fail(String(error.stdout));
  }
});
