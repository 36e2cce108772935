import type { ErrorDetail } from "./types.js";

/**
 * Codes of the failures the client itself detects. A stream that ends with the
 * gateway's `error` message keeps the gateway's code (`upstream_status`, `timeout` …).
 */
export type ClientErrorCode =
  | "http_error"
  | "network_error"
  | "connection_lost"
  | "idle_timeout"
  | "invalid_message"
  | "unsafe_pointer"
  | "patch_failed"
  | "state_too_large"
  | "message_too_large";

/** Why a stream failed: a stable `code`, a message, and what is known about it. */
export class SlotStreamError extends Error {
  override name = "SlotStreamError";
  /** A {@link ClientErrorCode}, or the code of the gateway's `error` message. */
  readonly code: string;
  /** The HTTP status, for `http_error`. */
  readonly status: number | undefined;
  /** The gateway's error detail (from its JSON error body or `error` message). */
  readonly detail: ErrorDetail | undefined;

  constructor(
    code: string,
    message: string,
    extra: { status?: number; detail?: ErrorDetail; cause?: unknown } = {},
  ) {
    super(message, extra.cause === undefined ? undefined : { cause: extra.cause });
    this.code = code;
    this.status = extra.status;
    this.detail = extra.detail;
  }
}
