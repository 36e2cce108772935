/**
 * JSON Pointers (RFC 6901) read from hostile messages. A pointer may only walk own
 * properties and array indices; a `__proto__` token, or a `__proto__` key anywhere in a
 * value, is refused, so no message reaches `Object.prototype` or an object's prototype
 * however the state is used later (`Object.assign`, spreads, merges).
 */
import { SlotStreamError } from "./errors.js";

const FORBIDDEN = "__proto__";
const INDEX = /^(?:0|[1-9][0-9]*)$/;

/** A JSON object or array in the state. */
export type Container = Record<string, unknown> | unknown[];

/** The reference tokens of `pointer` ("/a/b~1c" is ["a", "b/c"]). O(length). */
export function parsePointer(pointer: unknown): string[] {
  if (typeof pointer !== "string") {
    throw new SlotStreamError("invalid_message", "a path is not a string");
  }
  if (pointer === "") return [];
  if (pointer[0] !== "/") {
    throw new SlotStreamError("invalid_message", `the path ${clip(pointer)} is not a JSON Pointer`);
  }
  const tokens = pointer.slice(1).split("/");
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.includes("~")) {
      if (/~[^01]|~$/.test(token)) {
        throw new SlotStreamError("invalid_message", `the path ${clip(pointer)} has a bad ~ escape`);
      }
      tokens[i] = token.replace(/~1/g, "/").replace(/~0/g, "~");
    }
    if (tokens[i] === FORBIDDEN) {
      throw new SlotStreamError("unsafe_pointer", `the path ${clip(pointer)} goes through __proto__`);
    }
  }
  return tokens;
}

/** `token` escaped for a JSON Pointer. */
export function escapeToken(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}

export function isContainer(value: unknown): value is Container {
  return typeof value === "object" && value !== null;
}

/** Whether `container` has `token` as an own property or index. */
export function hasChild(container: Container, token: string): boolean {
  if (Array.isArray(container)) return INDEX.test(token) && Number(token) < container.length;
  return Object.prototype.hasOwnProperty.call(container, token);
}

/** The index `token` names in `array`: an existing one, or up to its length for `add`. */
export function arrayIndex(array: unknown[], token: string, adding: boolean): number {
  if (adding && token === "-") return array.length;
  const limit = adding ? array.length : array.length - 1;
  if (!INDEX.test(token) || Number(token) > limit) {
    throw new SlotStreamError("patch_failed", `no index ${clip(token)} in an array of ${array.length}`);
  }
  return Number(token);
}

/** The value at `pointer` in `root` through own properties only; `undefined` if none. */
export function resolve(root: unknown, tokens: readonly string[]): unknown {
  let node = root;
  for (const token of tokens) {
    if (!isContainer(node) || !hasChild(node, token)) return undefined;
    node = Array.isArray(node) ? node[Number(token)] : node[token];
  }
  return node;
}

/**
 * Refuse a value holding a `__proto__` key at any depth. O(nodes), iterative (a deeply
 * nested value cannot overflow the stack).
 */
export function assertSafeValue(value: unknown): void {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const node = stack.pop();
    if (!isContainer(node)) continue;
    if (Array.isArray(node)) {
      for (const item of node) if (isContainer(item)) stack.push(item);
      continue;
    }
    if (Object.prototype.hasOwnProperty.call(node, FORBIDDEN)) {
      throw new SlotStreamError("unsafe_pointer", "a value holds a __proto__ key");
    }
    for (const key in node) {
      const item = node[key];
      if (isContainer(item)) stack.push(item);
    }
  }
}

/** Structural equality of two JSON values. O(nodes), iterative. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  const stack: [unknown, unknown][] = [[a, b]];
  while (stack.length > 0) {
    const [x, y] = stack.pop()!;
    if (x === y) continue;
    if (!isContainer(x) || !isContainer(y) || Array.isArray(x) !== Array.isArray(y)) return false;
    const keys = Object.keys(x);
    if (keys.length !== Object.keys(y).length) return false;
    for (const key of keys) {
      if (!Object.prototype.hasOwnProperty.call(y, key)) return false;
      stack.push([(x as Record<string, unknown>)[key], (y as Record<string, unknown>)[key]]);
    }
  }
  return true;
}

/** `text` cut to a length fit for an error message. */
export function clip(text: string): string {
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 60)}…` : text);
}
