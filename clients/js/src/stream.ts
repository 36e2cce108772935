/**
 * `streamSlots`: POST a request to a slotflight gateway, read its SSE answer and build
 * the object as messages arrive, reconnecting to the stream's `Location` with
 * `Last-Event-ID` when the connection drops.
 */
import { SlotStreamError } from "./errors.js";
import { cancelling, readSse } from "./sse.js";
import { DEFAULT_MAX_STATE_CHARS, SlotState, type SlotStateOptions } from "./state.js";
import type { AnyMessage, DeepPartial, DoneMessage, ErrorDetail, FieldState, Fields } from "./types.js";

/** Options of {@link streamSlots}. */
export interface StreamOptions extends SlotStateOptions {
  /**
   * Extra request headers (`authorization: "Bearer …"`), sent on every connection; or a
   * function returning them (or a promise of them), called once for each connection (the
   * POST and each reconnection), so a short-lived token is fresh on a reconnection. One
   * that throws, rejects or returns no object ends the stream with `network_error` (its
   * error as `cause`).
   */
  headers?: Record<string, string> | (() => Record<string, string> | Promise<Record<string, string>>);
  /** `fetch`'s `credentials` on every connection (`"include"`: cookies to another origin). */
  credentials?: RequestCredentials;
  /**
   * Aborts the stream: the result rejects with the signal's reason (already aborted: no
   * request is sent). The stream stops listening to it once it ends.
   */
  signal?: AbortSignal;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
  /**
   * Reconnections in a row that brought no new message before giving up (default 3); a
   * reconnection answered 502, 503 or 504 is one of them, and so is one that only
   * repeats messages already applied.
   */
  maxReconnects?: number;
  /**
   * Longest wait before a reconnection, whatever the server's `retry:` hint (1 s without
   * one) (default 30 s).
   */
  maxRetryMs?: number;
  /**
   * Longest wait for the next message, comment pings and repeated messages not counted
   * (default 60 s; 0: no bound). Past it the stream fails with `idle_timeout`.
   */
  idleTimeoutMs?: number;
}

/** How a successful stream ended. */
export interface SlotResult<T> {
  /** The final object, complete and valid. */
  object: T;
  fields: Fields<T>;
  /** The `done` message. */
  last: DoneMessage;
  /** Snapshots that differed from the object the messages had built (0 when all is well). */
  mismatches: number;
}

/** What the `end` event reports. */
export type SlotEnd<T> =
  | { ok: true; object: T; last: DoneMessage }
  | { ok: false; object: DeepPartial<T>; error: unknown; last: AnyMessage | undefined };

/** The events of a {@link SlotStream} and what their listeners receive. */
export interface SlotStreamEvents<T> {
  /** After each message is applied. */
  message: (message: AnyMessage, stream: SlotStream<T>) => void;
  /** A field closed and validated: its value never changes again. */
  "field-complete": (pointer: string, field: FieldState) => void;
  /** A slot check flagged a field's value. */
  "field-flagged": (pointer: string, field: FieldState) => void;
  /** A field failed or was rejected (its reason is in `field.reason`). */
  "field-rejected": (pointer: string, field: FieldState) => void;
  /** A follow-up request asks for a field again. */
  "field-retry": (pointer: string, field: FieldState) => void;
  /** The stream ended: `done`, an `error` message, a failure or an abort. */
  end: (end: SlotEnd<T>) => void;
}

const DEFAULT_RETRY_MS = 1000;
/** The longest delay a timer holds (2^31 - 1 ms): a longer one fires at once. */
const MAX_DELAY = 2 ** 31 - 1;
/** Id-less `error` notices about one connection, not the stream: reconnect. */
const CONNECTION_NOTICES = new Set(["shutting_down", "store_unavailable"]);
/** Bytes of an HTTP error body read for its JSON error. */
const MAX_ERROR_BODY = 64 * 1024;

type Listener = (...args: never[]) => void;

/** One slot stream: its object and fields as they fill in, its events and its result. */
export class SlotStream<T = Record<string, unknown>> {
  /** Resolves with the final object on `done`; rejects on anything else. */
  readonly result: Promise<SlotResult<T>>;
  private readonly _state: SlotState<T>;
  private readonly _controller = new AbortController();
  private readonly _listeners: Record<string, Set<Listener>> = {};
  private _lastMessage: AnyMessage | undefined;
  private _lastId: string | undefined;

  constructor(url: string | URL, body: unknown, private readonly _options: StreamOptions = {}) {
    this._state = new SlotState<T>(_options);
    const outer = _options.signal;
    const onAbort = () => this._controller.abort(outer!.reason);
    if (outer?.aborted) onAbort();
    else outer?.addEventListener("abort", onAbort);
    // Once the stream settles, the caller's signal (often long-lived) holds nothing of it.
    this.result = this._run(url, body).finally(() => outer?.removeEventListener("abort", onAbort)).then(
      (result) => {
        this._emit("end", { ok: true, object: result.object, last: result.last });
        return result;
      },
      (error: unknown) => {
        this._emit("end", { ok: false, object: this.object, error, last: this._lastMessage });
        throw error;
      },
    );
    // Listeners to `end` may be all a caller uses: no unhandled rejection for them.
    this.result.catch(() => {});
  }

  /** The object so far. */
  get object(): DeepPartial<T> {
    return this._state.object;
  }

  /** Each field's state, keyed by JSON Pointer. */
  get fields(): Fields<T> {
    return this._state.fields;
  }

  /** The last message applied. */
  get last(): AnyMessage | undefined {
    return this._lastMessage;
  }

  /** The id of the last message applied (what a reconnection sends as `Last-Event-ID`). */
  get lastEventId(): string | undefined {
    return this._lastId;
  }

  /** Snapshots that differed from the object the messages had built. */
  get mismatches(): number {
    return this._state.mismatches;
  }

  /** Call `listener` on each `type` event; returns a function that removes it. */
  on<K extends keyof SlotStreamEvents<T>>(type: K, listener: SlotStreamEvents<T>[K]): () => void {
    const listeners = (this._listeners[type] ??= new Set<Listener>());
    listeners.add(listener);
    return () => listeners.delete(listener);
  }

  /** Stop the stream: its connection closes and the result rejects with `reason`. */
  abort(reason?: unknown): void {
    this._controller.abort(reason);
  }

  private _emit<K extends keyof SlotStreamEvents<T>>(type: K, ...args: Parameters<SlotStreamEvents<T>[K]>): void {
    // Once aborted, the stream reports nothing but its `end` (the listeners of the event
    // being reported still get it).
    if (type !== "end" && this._controller.signal.aborted) return;
    for (const listener of this._listeners[type] ?? []) {
      try {
        (listener as (...a: unknown[]) => void)(...args);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }

  private async _run(url: string | URL, body: unknown): Promise<SlotResult<T>> {
    const { maxReconnects = 3, maxRetryMs = 30_000 } = this._options;
    const maxChars = this._options.maxStateChars ?? DEFAULT_MAX_STATE_CHARS;
    const signal = this._controller.signal;
    let retryMs = DEFAULT_RETRY_MS;
    let location: URL | undefined;
    let failures = 0;
    // The body as it is now (the caller may change it next); the request starts a
    // microtask later: a stream aborted as soon as it was made (a component mounted twice
    // at once by React's StrictMode) sends none.
    const json = JSON.stringify(body);
    await 0;
    for (let first = true; ; first = false) {
      // Aborted before the start (or between connections): no request is sent.
      if (signal.aborted) throw signal.reason;
      const connection = this._connect(first ? url : location!, first, json);
      const from = this._lastId;
      let outcome: Outcome<T> | false | undefined;
      let response: Response | undefined;
      try {
        response = await connection.response;
        if (first) {
          const named = response.headers.get("location");
          // A relative Location, against the answer's URL, or the request's (resolved
          // against the page's): one that cannot be resolved is read without resume.
          try {
            if (named) location = new URL(named, response.url || new URL(url, (globalThis as { location?: { href?: string } }).location?.href));
          } catch {
            // no resume
          }
        }
        if (!response.ok) {
          const error = await httpError(response, connection.signal);
          // A reconnection answered 502, 503 or 504 (a store briefly away, an instance
          // that stops, a proxy in front of instances being replaced) brought nothing:
          // the next may resume.
          if (first || response.status < 502 || response.status > 504) throw error;
        } else if (!first && response.status === 204) {
          // The server has nothing after `from`: the stream ended there (the gateway answers
          // so only at a finished stream's last message, which ends a stream when applied).
          // Asking again would bring the same.
          throw new SlotStreamError("http_error", `HTTP 204: the stream has no message after ${from ?? "its start"}: it ended`, {
            status: 204,
          });
        } else {
          // Not an event stream (a sign-in page, an app's fallback route): nothing to
          // read, and asking again would bring the same.
          const type = response.headers.get("content-type");
          if (!response.body || !/^text\/event-stream\b/i.test(type!)) {
            throw new SlotStreamError("http_error", `HTTP ${response.status}: ${type}, not text/event-stream`, {
              status: response.status,
            });
          }
          connection.touch();
          await readSse(
            response.body,
            connection.signal,
            {
              onRetry: (ms) => {
                retryMs = ms;
              },
              onMessage: (message) => {
                // Aborted (a listener may abort): the rest of the read is not applied.
                if (signal.aborted) return true;
                outcome = this._receive(message.event, message.data, message.id);
                // A message already applied does not keep the connection alive.
                if (outcome !== false) connection.touch();
                return !!outcome;
              },
            },
            maxChars,
          );
        }
      } catch (error) {
        if (signal.aborted) throw signal.reason;
        if (connection.idle) throw connection.idle;
        if (error instanceof SlotStreamError) throw error;
        // No answer at all; a connection cut after its answer is `connection_lost`.
        if (first && !response) {
          throw new SlotStreamError("network_error", `the request failed: ${typeof error != "object" || error instanceof Error ? String(error) : "object"}`, { cause: error });
        }
      } finally {
        connection.close();
      }
      // Aborted while the last messages were applied, `done` among them or not.
      if (signal.aborted) throw signal.reason;
      if (outcome && outcome !== "reconnect") {
        if (outcome.ok) return outcome.result;
        throw outcome.error;
      }
      // Progress is a new id: a connection that only repeated messages brought nothing.
      failures = this._lastId !== from ? 1 : failures + 1;
      if (location === undefined || failures > maxReconnects) {
        throw new SlotStreamError("connection_lost", "the connection closed before the stream ended");
      }
      // The server's hint, or 1 s without one: at most maxRetryMs either way.
      await sleep(Math.min(retryMs, maxRetryMs, MAX_DELAY), signal);
    }
  }

  /**
   * Apply one message; a terminal outcome ends the stream, `false` says it was applied
   * already. Ids are the gateway's sequence numbers: one not above the last applied was
   * applied (a server that repeats itself after a resume), and one of another form is
   * refused, since its repeat could not be told apart.
   */
  private _receive(event: string | undefined, data: string, id: string | undefined): Outcome<T> | false | undefined {
    if (id !== undefined) {
      if (!/^[0-9]{1,18}$/.test(id)) throw new SlotStreamError("invalid_message", "a message id is not 1-18 digits");
      if (this._lastId !== undefined && BigInt(id) <= BigInt(this._lastId)) return false;
    } else if (event === "error" && CONNECTION_NOTICES.has(noticeCode(data) as string)) return "reconnect";
    const { message, changes } = this._state.apply(event, data);
    this._lastId = id ?? this._lastId;
    this._lastMessage = message;
    this._emit("message", message, this);
    for (const change of changes) this._emit(`field-${change.kind}`, change.pointer, change.field);
    if (message.type === "done") {
      return {
        ok: true,
        result: {
          object: this._state.object as T,
          fields: this._state.fields,
          last: message as DoneMessage,
          mismatches: this._state.mismatches,
        },
      };
    }
    if (message.type === "error") {
      const detail = (message as { error?: ErrorDetail }).error;
      const code = typeof detail?.code === "string" ? detail.code : "stream_error";
      const text = typeof detail?.message === "string" ? detail.message : "the stream failed";
      return { ok: false, error: new SlotStreamError(code, text, detail ? { detail } : {}) };
    }
    return undefined;
  }

  /** Open a connection: the POST of `body` (`first`), or a reconnection to `url`. */
  private _connect(url: string | URL, first: boolean, body: string): Connection {
    const controller = new AbortController();
    const onAbort = () => controller.abort(this._controller.signal.reason);
    this._controller.signal.addEventListener("abort", onAbort, { once: true });
    const { credentials, headers: given } = this._options;
    const fetcher = this._options.fetch ?? fetch;
    const idleMs = this._options.idleTimeoutMs ?? 60_000;
    const lastId = this._lastId;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const send = (extra: Record<string, string> | undefined): Promise<Response> => {
      // Aborted (or idle) while a headers function was pending: no request is sent.
      if (controller.signal.aborted) throw controller.signal.reason;
      const headers: Record<string, string> = { accept: "text/event-stream", ...extra };
      if (first) headers["content-type"] = "application/json";
      else if (lastId !== undefined) headers["last-event-id"] = lastId;
      const init: RequestInit = { method: first ? "POST" : "GET", headers, body: first ? body : undefined, signal: controller.signal };
      if (credentials !== undefined) init.credentials = credentials;
      return fetcher(url, init);
    };
    // A `fetch` that throws is one that failed; one that ignores its signal still yields
    // to an abort or the idle timeout, and an answer that comes after has its body closed.
    // A headers function is waited for the same way (the idle timeout counts from here).
    const fetched =
      typeof given === "function"
        ? callHeaders(given).then(send)
        : new Promise<Response>((resolve) => resolve(send(given)));
    fetched.then(
      (response) => {
        if (controller.signal.aborted) response.body?.cancel().catch(() => {});
      },
      () => {},
    );
    const connection: Connection = {
      signal: controller.signal,
      response: Promise.race([
        fetched,
        new Promise<never>((_, reject) => controller.signal.addEventListener("abort", () => reject(controller.signal.reason))),
      ]),
      touch() {
        if (idleMs <= 0) return;
        clearTimeout(timer);
        timer = setTimeout(() => {
          connection.idle = new SlotStreamError("idle_timeout", `no message for ${idleMs} ms (idleTimeoutMs)`);
          controller.abort(connection.idle);
        }, Math.min(idleMs, MAX_DELAY));
      },
      close: () => {
        clearTimeout(timer);
        this._controller.signal.removeEventListener("abort", onAbort);
        controller.abort();
      },
    };
    connection.touch();
    return connection;
  }
}

interface Connection {
  response: Promise<Response>;
  /** Aborted when the connection closes, is aborted or is idle too long. */
  signal: AbortSignal;
  /** Set when the idle timeout closed it. */
  idle?: SlotStreamError;
  touch(): void;
  close(): void;
}

type Outcome<T> = "reconnect" | { ok: true; result: SlotResult<T> } | { ok: false; error: SlotStreamError };

/** The `error.code` of an `error` message's JSON, if it has one. */
function noticeCode(data: string): unknown {
  try {
    return (JSON.parse(data) as { error?: { code?: unknown } })?.error?.code;
  } catch {
    return undefined;
  }
}

async function httpError(response: Response, signal: AbortSignal): Promise<SlotStreamError> {
  let text = "";
  if (response.body) {
    const reader = cancelling(response.body, signal);
    const decoder = new TextDecoder();
    try {
      while (text.length < MAX_ERROR_BODY) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    } catch {
      // the body broke off: report what arrived
    } finally {
      reader.cancel().catch(() => {});
    }
  }
  let detail: ErrorDetail | undefined;
  try {
    const error = (JSON.parse(text) as { error?: ErrorDetail })?.error;
    if (error && typeof error.code === "string") detail = error;
  } catch {
    // not a JSON error body
  }
  const said = detail && typeof detail.message === "string" ? `: ${detail.message}` : "";
  return new SlotStreamError("http_error", `HTTP ${response.status}${said}`, {
    status: response.status,
    ...(detail ? { detail } : {}),
  });
}

/** What a headers function gives; `network_error` when it throws, rejects or gives no object. */
async function callHeaders(get: () => Record<string, string> | Promise<Record<string, string>>): Promise<Record<string, string>> {
  let headers: unknown;
  let cause: unknown;
  try {
    headers = await get();
  } catch (error) {
    cause = error;
  }
  if (typeof headers === "object" && headers) return headers as Record<string, string>;
  throw new SlotStreamError("network_error", "the headers function failed or gave no headers object", { cause });
}

/** Wait `ms`, or until `signal` (not aborted yet) aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      signal.removeEventListener("abort", stop);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const stop = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    signal.addEventListener("abort", stop, { once: true });
  });
}

/**
 * Start a slot stream: POST `body` as JSON to `url` (a gateway's `/v1/slot-streams`)
 * and follow its answer. `T` is the object's type (write it, or derive it from the
 * JSON Schema with `FromSchema<typeof schema>`).
 */
export function streamSlots<T = Record<string, unknown>>(url: string | URL, body: unknown, options: StreamOptions = {}): SlotStream<T> {
  return new SlotStream<T>(url, body, options);
}
