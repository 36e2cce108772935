/**
 * The object a slot stream builds, and the state of each of its fields.
 *
 * {@link SlotState.apply} takes one message as it came off the wire (event name and
 * `data:` text) and applies it: a `slot-delta` appends its `delta` to the string at
 * `path`; any other message applies its `patch` (RFC 6902 `add`, `replace`, `remove`);
 * a message with `state` is a snapshot, taken when it differs from the object built
 * so far. When deltas or patches built that object since the last snapshot, a
 * difference counts in `mismatches` (0 in a healthy stream); in `full` state mode,
 * where messages carry no patches, a snapshot is simply taken. The work is O(size of
 * the message), plus O(state) for a snapshot; one taken also visits the fields that
 * held a value or now hold one, not every field.
 *
 * A message is applied whole or not at all: a bad one (not JSON, a pointer through
 * `__proto__`, a patch that does not apply, a state over the size bound) throws a
 * {@link SlotStreamError} and leaves the object and the fields as they were.
 */
import { SlotStreamError } from "./errors.js";
import {
  type Container,
  arrayIndex,
  assertSafeValue,
  clip,
  hasChild,
  isContainer,
  jsonEqual,
  parsePointer,
  resolve,
} from "./pointer.js";
import type {
  AnyMessage,
  DeepPartial,
  FieldState,
  FieldStatus,
  Fields,
  PatchOperation,
} from "./types.js";

/** The default bound on the state's size: 16 Mi characters of JSON text. */
export const DEFAULT_MAX_STATE_CHARS = 16 * 1024 * 1024;

/** Options of a {@link SlotState}. */
export interface SlotStateOptions {
  /**
   * Bound on the state's size in characters of JSON text (default 16 Mi). The size is
   * estimated from the messages that built it: the last snapshot's message plus the
   * text every message since has added. A message that would pass it is refused.
   */
  maxStateChars?: number;
  /**
   * Give every change new objects along its path, leaving untouched parts shared
   * (what React expects); costs O(depth × width of the containers on the path) per
   * message instead of O(size of the message), and the first field change after each
   * read of `fields` copies the fields map (O(fields)). Off by default.
   */
  immutable?: boolean;
}

/** A field whose state changed, and how (what {@link SlotState.apply} reports). */
export interface FieldChange {
  pointer: string;
  field: FieldState;
  kind: "complete" | "flagged" | "rejected" | "retry";
}

/** What applying one message did. */
export interface Applied {
  message: AnyMessage;
  changes: FieldChange[];
}

const SLOT_TYPES = new Set([
  "slot-start",
  "slot-delta",
  "slot-complete",
  "slot-failed",
  "slot-rejected",
  "slot-flagged",
]);

/** One message's changes to the object, undone as a whole when a step fails. */
class Edit {
  root: unknown;
  /** The paths the message wrote to (for fields along them to take their new values). */
  _paths: string[][] = [];
  /**
   * Where a value was replaced or removed, or an array's items moved: fields under
   * `[tokens]`, or at items `from`..`to` of the array at `tokens`, point at what left.
   */
  _cuts: [string[], number?, number?][] = [];
  private readonly _undo: (() => void)[] = [];
  private readonly _copies = new Set<unknown>();

  constructor(
    private readonly _original: unknown,
    private readonly _immutable: boolean,
  ) {
    this.root = _original;
  }

  _rollback(): void {
    for (let i = this._undo.length - 1; i >= 0; i--) this._undo[i]!();
    this.root = this._original;
  }

  private _writable<C extends Container>(node: C): C {
    if (!this._immutable || this._copies.has(node)) return node;
    const copy = (Array.isArray(node) ? node.slice() : { ...node }) as C;
    this._copies.add(copy);
    return copy;
  }

  /** The container holding the last token of `tokens`, writable. */
  private _parent(tokens: readonly string[], pointer: string): Container {
    if (!isContainer(this.root)) {
      throw new SlotStreamError("patch_failed", `no object to hold ${clip(pointer)}`);
    }
    let node = this._writable(this.root);
    this.root = node;
    for (let i = 0; i < tokens.length - 1; i++) {
      const token = tokens[i]!;
        const key = Array.isArray(node) ? Number(token) : token;
      const next = hasChild(node, token) ? (node as Record<string | number, unknown>)[key] : undefined;
      if (!isContainer(next)) {
        throw new SlotStreamError("patch_failed", `nothing at ${clip(pointer)}`);
      }
      const copy = this._writable(next);
      if (copy !== next) (node as Record<string | number, unknown>)[key] = copy;
      node = copy;
    }
    return node;
  }

  _append(pointer: string, delta: string): void {
    const tokens = parsePointer(pointer);
    if (tokens.length === 0) throw new SlotStreamError("patch_failed", "a delta for the whole object");
    const node = this._parent(tokens, pointer);
    const token = tokens[tokens.length - 1]!;
    const key = Array.isArray(node) ? arrayIndex(node, token, false) : token;
    const record = node as Record<string | number, unknown>;
    const old = hasChild(node, token) ? record[key] : undefined;
    if (typeof old !== "string") {
      throw new SlotStreamError("patch_failed", `no string at ${clip(pointer)} to append to`);
    }
    record[key] = old + delta;
    this._paths.push(tokens);
    this._undo.push(() => {
      record[key] = old;
    });
  }

  _operate(op: PatchOperation): void {
    const tokens = parsePointer(op.path);
    if (op.op !== "remove") assertSafeValue(op.value);
    this._paths.push(tokens);
    if (tokens.length === 0) {
      if (op.op === "remove") throw new SlotStreamError("patch_failed", "a patch removes the whole object");
      this.root = op.value;
      this._cuts.push([tokens]);
      return;
    }
    const node = this._parent(tokens, op.path);
    const token = tokens[tokens.length - 1]!;
    if (Array.isArray(node)) {
      const index = arrayIndex(node, token, op.op === "add");
      // A replaced item leaves; an insert or a removal moves the items after it.
      this._cuts.push(op.op === "replace" ? [tokens] : [tokens.slice(0, -1), index, node.length]);
      if (op.op === "add") {
        node.splice(index, 0, op.value);
        this._undo.push(() => node.splice(index, 1));
      } else {
        const old = node[index];
        if (op.op === "replace") node[index] = op.value;
        else node.splice(index, 1);
        this._undo.push(() => (op.op === "replace" ? (node[index] = old) : node.splice(index, 0, old)));
      }
      return;
    }
    const existed = hasChild(node, token);
    if (!existed && op.op !== "add") {
      throw new SlotStreamError("patch_failed", `nothing at ${clip(op.path)} to ${op.op}`);
    }
    const old = node[token];
    // A removed key goes back to its place: the keys after it are put back after it.
    const keys = op.op === "remove" && Object.keys(node);
    if (existed) this._cuts.push([tokens]);
    if (op.op === "remove") delete node[token];
    else node[token] = op.value;
    this._undo.push(() => {
      if (!existed) delete node[token];
      else if (keys) {
        node[token] = old;
        for (const key of keys.slice(keys.indexOf(token) + 1)) {
          const value = node[key];
          delete node[key];
          node[key] = value;
        }
      } else node[token] = old;
    });
  }
}

function record(value: unknown): Record<string, unknown> | undefined {
  return isContainer(value) && !Array.isArray(value) ? value : undefined;
}

function checkMessage(type: string, data: Record<string, unknown>): void {
  const bad = (what: string): never => {
    throw new SlotStreamError("invalid_message", `a ${clip(type)} message lacks a valid ${what}`);
  };
  if (data.patch !== undefined) {
    if (!Array.isArray(data.patch)) bad("patch");
    for (const op of data.patch as unknown[]) {
      const entry = record(op);
      if (!entry || typeof entry.path !== "string") bad("patch path");
      if (entry!.op !== "add" && entry!.op !== "replace" && entry!.op !== "remove") {
        throw new SlotStreamError("patch_failed", `unsupported patch operation ${clip(String(entry!.op))}`);
      }
      if (entry!.op !== "remove" && !("value" in entry!)) bad("patch value");
    }
  }
  if (SLOT_TYPES.has(type)) {
    if (typeof data.path !== "string") bad("path");
    parsePointer(data.path);
    if (typeof data.slot !== "string") bad("slot");
    if (typeof data.attempt !== "number") bad("attempt");
    // A field's value when the object holds none at its path: as safe as a patch's.
    assertSafeValue(data.value);
  }
  if (type === "slot-delta" && typeof data.delta !== "string") bad("delta");
  if (type === "retry") {
    if (!Array.isArray(data.slots) || !Array.isArray(data.reasons)) bad("slots or reasons");
    for (const reason of data.reasons as unknown[]) {
      const location = record(reason)?.location;
      if (typeof location === "string" && location.startsWith("/")) parsePointer(location);
    }
  }
}

/** The object a stream has built and the state of each field. */
export class SlotState<T = Record<string, unknown>> {
  /** Snapshots that differed from the object the messages had built (0 when all is well). */
  mismatches = 0;
  /** The estimated size of the state, in characters of JSON text. */
  size = 2;
  private root: unknown = {};
  /** Whether deltas or patches changed the object since the last snapshot. */
  private _changed = false;
  private _fieldMap: Record<string, FieldState> = {};
  /** The fields by the tokens of their pointers: which lie along or under a path. */
  private _tree: FieldNode = {};
  /** The pointers of each slot's fields, but for those `retrying` already. */
  private readonly _bySlot = new Map<string, Set<string>>();
  /** The pointers of the fields that hold a value (not `undefined`). */
  private readonly _held = new Set<string>();
  /** What the fields map counts towards `maxStateChars`: the text of the messages that added fields. */
  private _fieldChars = 0;
  /** Immutable mode: `fields` handed out the map, so the next change copies it first. */
  private _shared = false;
  private readonly _maxStateChars: number;
  private readonly _immutable: boolean;

  constructor(options: SlotStateOptions = {}) {
    this._maxStateChars = options.maxStateChars ?? DEFAULT_MAX_STATE_CHARS;
    this._immutable = options.immutable ?? false;
  }

  /** The object so far. Its fields fill in as messages arrive. */
  get object(): DeepPartial<T> {
    return this.root as DeepPartial<T>;
  }

  /** Each field's state, keyed by JSON Pointer (`fields["/summary"]`). */
  get fields(): Fields<T> {
    this._shared = this._immutable;
    return this._fieldMap as Fields<T>;
  }

  /**
   * Apply one message: `event` is its SSE event name, `text` its `data:` JSON. Throws a
   * {@link SlotStreamError} and changes nothing when the message is bad.
   */
  apply(event: string | undefined, text: string): Applied {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new SlotStreamError("invalid_message", `a message is not JSON: ${clip(text)}`);
    }
    const data = record(parsed);
    if (!data) throw new SlotStreamError("invalid_message", "a message is not a JSON object");
    const type = typeof data.type === "string" ? data.type : (event ?? "message");
    // Listeners, and the stream deciding its end, see the type the state applied.
    data.type = type;
    checkMessage(type, data);
    const snapshot = data.state !== undefined;
    let size = this.size;
    if (snapshot) size = text.length;
    else if (type === "slot-delta") size += (data.delta as string).length;
    else if (data.patch !== undefined) size += text.length;
    // Fields are kept across snapshots: a message that may add some counts apart.
    const fieldChars =
      type === "retry" || (SLOT_TYPES.has(type) && !this._fieldMap[data.path as string]) ? text.length : 0;
    if (size + this._fieldChars + fieldChars > this._maxStateChars) {
      throw new SlotStreamError(
        "state_too_large",
        `the state would pass ${this._maxStateChars} characters (maxStateChars)`,
      );
    }
    const edit = new Edit(this.root, this._immutable);
    try {
      if (type === "slot-delta") edit._append(data.path as string, data.delta as string);
      else if (data.patch !== undefined) for (const op of data.patch as PatchOperation[]) edit._operate(op);
      if (snapshot) assertSafeValue(data.state);
    } catch (error) {
      edit._rollback();
      throw error;
    }
    const changed = this._changed || type === "slot-delta" || data.patch !== undefined;
    let resynced = false;
    if (snapshot && !jsonEqual(edit.root, data.state)) {
      if (changed) this.mismatches += 1;
      edit.root = data.state;
      resynced = true;
    }
    this._changed = changed && !snapshot;
    this.root = edit.root;
    this.size = size;
    this._fieldChars += fieldChars;
    const message = data as AnyMessage;
    return { message, changes: this._updateFields(type, data, resynced, edit) };
  }

  private _updateFields(type: string, data: Record<string, unknown>, resynced: boolean, edit: Edit): FieldChange[] {
    const changes: FieldChange[] = [];
    let fields = this._fieldMap;
    const bySlot = this._bySlot;
    const held = this._held;
    const writable = (): void => {
      // Copied once after each time it was handed out, not once per message.
      if (this._shared) fields = this._fieldMap = { ...fields };
      this._shared = false;
    };
    const set = (pointer: string, update: Partial<FieldState>, kind?: FieldChange["kind"]): void => {
      writable();
      const old = fields[pointer];
      const was = old && old.status !== "retrying" ? old.slot : undefined;
      const field: FieldState = this._immutable || !old ? { ...defaults(data), ...old, ...update } : Object.assign(old, update);
      fields[pointer] = field;
      if (field.value === undefined) held.delete(pointer);
      else held.add(pointer);
      if (!old) {
        let node = this._tree;
        for (const token of parsePointer(pointer)) node = (node.c ??= new Map()).get(token) ?? node.c.set(token, {}).get(token)!;
        node.f = pointer;
      }
      const now = field.status !== "retrying" ? field.slot : undefined;
      if (was !== now) {
        if (was !== undefined) bySlot.get(was)!.delete(pointer);
        if (now !== undefined) (bySlot.get(now) ?? bySlot.set(now, new Set()).get(now)!).add(pointer);
      }
      if (kind) changes.push({ pointer, field, kind });
    };
    // Fields under a value that left the object go with it (each field once: O(fields
    // removed)); a later slot-start brings them back.
    const drop = (node: FieldNode): void => {
      const stack = [node];
      for (let next = stack.pop(); next; next = stack.pop()) {
        const pointer = next.f;
        const field = pointer === undefined ? undefined : fields[pointer];
        if (field) {
          writable();
          if (field.status !== "retrying") bySlot.get(field.slot)!.delete(pointer!);
          held.delete(pointer!);
          delete fields[pointer!];
        }
        for (const child of next.c?.values() ?? []) stack.push(child);
      }
    };
    for (const [tokens, from, to] of edit._cuts) {
      let node: FieldNode | undefined = this._tree;
      for (const token of tokens) node = node?.c?.get(token);
      if (!node?.c) continue;
      if (from === undefined) {
        for (const child of node.c.values()) drop(child);
        node.c = undefined;
      } else {
        for (let i = from; i <= to! && node.c.size > 0; i++) {
          const child = node.c.get(String(i));
          if (child) drop(child);
          node.c.delete(String(i));
        }
      }
    }
    // The fields along each written path (a list holding a new item, in immutable mode
    // a new list) take their current values: O(depth) per path.
    for (const tokens of edit._paths) {
      let node: FieldNode | undefined = this._tree;
      let value = this.root;
      for (let i = 0; node; node = node.c?.get(tokens[i++]!)) {
        const field = node.f === undefined ? undefined : fields[node.f];
        if (field && field.value !== value) set(node.f!, { value });
        if (i === tokens.length) break;
        value = resolve(value, [tokens[i]!]);
      }
    }
    const path = data.path as string;
    const value = () => resolve(this.root, parsePointer(path));
    if (type === "slot-start") {
      set(path, { status: "streaming", value: value(), attempts: data.attempt as number, slot: data.slot as string, reason: undefined, code: undefined, confidence: undefined });
    } else if (type === "slot-delta") {
      set(path, { status: "streaming", value: value() });
    } else if (type === "slot-complete" || type === "slot-flagged") {
      const flagged = type === "slot-flagged" || data.status === "flagged";
      const found = value();
      set(
        path,
        {
          status: flagged ? "flagged" : "complete",
          value: found === undefined ? data.value : found,
          confidence: confidenceOf(data.confidence),
          ...(flagged ? reasonOf(data) : { reason: undefined, code: undefined }),
        },
        flagged ? "flagged" : "complete",
      );
    } else if (type === "slot-failed" || type === "slot-rejected") {
      set(path, { status: "rejected", value: value(), confidence: undefined, ...reasonOf(data) }, "rejected");
    } else if (type === "retry") {
      const reasons = new Map<string, Record<string, unknown>>();
      for (const reason of data.reasons as unknown[]) {
        const detail = record(reason);
        if (detail && typeof detail.location === "string" && detail.location.startsWith("/")) {
          reasons.set(detail.location, detail);
        }
      }
      // O(slots asked + their fields not yet retrying), not O(fields).
      for (const slot of data.slots as unknown[]) {
        for (const pointer of bySlot.get(slot as string) ?? []) if (!reasons.has(pointer)) reasons.set(pointer, {});
      }
      for (const [pointer, detail] of reasons) {
        const update: Partial<FieldState> = { status: "retrying", value: resolve(this.root, parsePointer(pointer)) };
        if (typeof detail.code === "string" && detail.code) {
          Object.assign(update, { reason: typeof detail.message === "string" ? detail.message : undefined, code: detail.code });
        }
        if (!fields[pointer]) update.slot = typeof detail.slot === "string" ? detail.slot : "";
        set(pointer, update, "retry");
      }
    } else if (type === "done") {
      // The object is complete and valid: a field asked again that holds a value has it.
      for (const pointer of Object.keys(fields)) {
        const field = fields[pointer]!;
        if (field.status === "retrying" && field.value !== undefined) set(pointer, { status: "complete" }, "complete");
      }
    }
    if (resynced) {
      // Every field takes its value in the new state. Only two kinds can change: those
      // that held a value (after the last resync, those the state held, plus those set
      // since) and those the new state holds one for, found by walking the state and the
      // fields' tree together (O(size of the state)); fields that pointed at nothing and
      // still do are not visited.
      const stale = new Map<string, unknown>();
      for (const pointer of held) stale.set(pointer, resolve(this.root, parsePointer(pointer)));
      const stack: [FieldNode, unknown][] = [[this._tree, this.root]];
      for (let top = stack.pop(); top; top = stack.pop()) {
        const [node, value] = top;
        if (value === undefined) continue;
        if (node.f !== undefined) stale.set(node.f, value);
        if (!node.c || !isContainer(value)) continue;
        // Whichever is fewer: the fields' tokens here, or the state's keys here.
        const keys = Object.keys(value);
        for (const token of node.c.size < keys.length ? node.c.keys() : keys) {
          const child = node.c.get(token);
          if (child) stack.push([child, resolve(value, [token])]);
        }
      }
      for (const [pointer, current] of stale) if (fields[pointer]!.value !== current) set(pointer, { value: current });
    }
    return changes;
  }
}

/** A node of the fields' tree: the field at its pointer, and those under it by token. */
interface FieldNode {
  f?: string;
  c?: Map<string, FieldNode> | undefined;
}

function defaults(data: Record<string, unknown>): FieldState {
  return {
    status: "streaming" as FieldStatus,
    value: undefined,
    attempts: typeof data.attempt === "number" ? data.attempt : 1,
    slot: typeof data.slot === "string" ? data.slot : "",
  };
}

/** A confidence figure as sent (a number in [0, 1]); anything else is no figure. */
function confidenceOf(value: unknown): number | undefined {
  return typeof value === "number" && value >= 0 && value <= 1 ? value : undefined;
}

function reasonOf(data: Record<string, unknown>): Pick<FieldState, "reason" | "code"> {
  const error = record(data.error);
  const reason = typeof data.reason === "string" ? data.reason : error?.message;
  const code = typeof data.code === "string" ? data.code : error?.code;
  return {
    reason: typeof reason === "string" ? reason : undefined,
    code: typeof code === "string" ? code : undefined,
  };
}
