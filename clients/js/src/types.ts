/**
 * The messages of a slot stream (see the gateway's `docs/web.md`) and the shapes the
 * client builds from them.
 */

/** One RFC 6902 operation as the gateway sends it. */
export interface PatchOperation {
  op: "add" | "replace" | "remove";
  path: string;
  value?: unknown;
}

/** A failure as the gateway describes it. */
export interface ErrorDetail {
  code: string;
  message: string;
  location?: string;
  slot?: string;
  input?: string;
  status?: number;
}

interface Message {
  /** The event type, also the SSE `event:` name. */
  type: string;
  /** RFC 6902 operations from the previous state (patch mode). */
  patch?: PatchOperation[];
  /** The whole object after this message (a snapshot). */
  state?: unknown;
}

interface SlotMessageBase extends Message {
  slot: string;
  path: string;
  slot_id: number;
  index: number | null;
  attempt: number;
}

/** A slot's frame opened. */
export interface SlotStartMessage extends SlotMessageBase {
  type: "slot-start";
}

/** Text to append to the string at `path`. */
export interface SlotDeltaMessage extends SlotMessageBase {
  type: "slot-delta";
  delta: string;
  /** The whole string so far (full state mode only). */
  value?: string;
}

/** A slot closed and validated: its value never changes again. */
export interface SlotCompleteMessage extends SlotMessageBase {
  type: "slot-complete";
  value?: unknown;
  /** `"flagged"` when a slot check flagged the value. */
  status?: string;
  code?: string;
  reason?: string;
  /** In [0, 1]: the probability the model gave the tokens that wrote the value, when
   * the stream asked for it (`options.confidence`) and the model server returned
   * token logprobs; absent otherwise. */
  confidence?: number;
}

/** A slot failed; its value left the state. */
export interface SlotFailedMessage extends SlotMessageBase {
  type: "slot-failed";
  error: ErrorDetail;
}

/** A slot check rejected a value (`code` and `reason` say why). */
export interface SlotRejectedMessage extends SlotMessageBase {
  type: "slot-rejected";
  code?: string;
  reason?: string;
  error?: ErrorDetail;
}

/** A follow-up request asks again for `slots`. */
export interface RetryMessage extends Message {
  type: "retry";
  attempt: number;
  slots: string[];
  reasons: ErrorDetail[];
}

/** Something in the model's output was tolerated (coalesced: `count`, `counts`). */
export interface DiagnosticMessage extends Message {
  type: "diagnostic";
  code: string;
  message: string;
  offset: number;
  attempt: number;
  count?: number;
  counts?: Record<string, number>;
}

/** One request was stopped; the stream goes on and may still reach `done`. */
export interface PassFailedMessage extends Message {
  type: "pass-failed";
  attempt: number;
  error: ErrorDetail;
}

/** The object is complete and valid (its last message). */
export interface DoneMessage extends Message {
  type: "done";
  attempt: number;
  value?: unknown;
}

/** The stream failed (its last message). */
export interface ErrorMessage extends Message {
  type: "error";
  error: ErrorDetail;
  attempt?: number;
  errors?: ErrorDetail[];
}

/** Every message type the client knows. Others are passed on as {@link Message}s. */
export type SlotMessage =
  | SlotStartMessage
  | SlotDeltaMessage
  | SlotCompleteMessage
  | SlotFailedMessage
  | SlotRejectedMessage
  | RetryMessage
  | DiagnosticMessage
  | PassFailedMessage
  | DoneMessage
  | ErrorMessage;

/** Any message, known type or not. */
export type AnyMessage = SlotMessage | (Message & Record<string, unknown>);

/** Where a field stands. */
export type FieldStatus = "streaming" | "complete" | "retrying" | "rejected" | "flagged";

/** One field of the object (a slot's value), keyed by its JSON Pointer. */
export interface FieldState {
  status: FieldStatus;
  /** The value so far (a string grows as it streams); `undefined` once rejected. */
  value: unknown;
  /** How many attempts asked for it so far (1 for the first request). */
  attempts: number;
  /** Why it was rejected, flagged or is asked again. */
  reason?: string;
  /** The code of that reason (`less_than_equal`, `missing` …). */
  code?: string;
  /** The slot's name in the plan (`summary`, `tags[0]` …). */
  slot: string;
  /** In [0, 1], once complete: how probable the model found the tokens of the value
   * (their product) (`options.confidence` and a server that returns logprobs); `undefined`
   * otherwise, never guessed. A low figure marks a value worth a second look. */
  confidence?: number;
}

/** An object whose every property, at every depth, may still be missing. */
export type DeepPartial<T> = T extends readonly (infer U)[]
  ? DeepPartial<U>[]
  : T extends object
    ? { [K in keyof T]?: DeepPartial<T[K]> }
    : T;

/** `K` escaped as `escapeToken` does: every `~` as `~0`, then every `/` as `~1`. */
type Escape<K extends string> = EscapeSlash<EscapeTilde<K>>;
type EscapeTilde<K extends string> = K extends `${infer A}~${infer B}` ? `${A}~0${EscapeTilde<B>}` : K;
type EscapeSlash<K extends string> = K extends `${infer A}/${infer B}` ? `${A}~1${EscapeSlash<B>}` : K;

type Depth = [never, 0, 1, 2, 3, 4, 5, 6, 7];

/**
 * The JSON Pointers into `T` (`"/summary"`, `"/tags/${number}"` …), eight levels deep;
 * `string` when `T` is not known.
 */
export type FieldPointer<T, D extends number = 8> = [D] extends [never]
  ? never
  : unknown extends T
    ? string
    : T extends readonly (infer U)[]
      ? `/${number}` | `/${number}${FieldPointer<U, Depth[D]>}`
      : T extends object
        ? {
            [K in keyof T & string]: `/${Escape<K>}` | `/${Escape<K>}${FieldPointer<T[K], Depth[D]>}`;
          }[keyof T & string]
        : never;

/** Per-field states keyed by JSON Pointer. */
export type Fields<T> = { readonly [P in FieldPointer<T>]?: FieldState } & {
  readonly [pointer: string]: FieldState | undefined;
};
