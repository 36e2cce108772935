/**
 * `useSlotStream`: a React hook around {@link streamSlots}.
 *
 *     const { object, fields, isLoading, error, submit, stop, clear } =
 *       useSlotStream<Triage>({ api: "/v1/slot-streams", body });
 *
 * `object` and `fields` are new objects after each change (untouched parts are
 * shared), so components and memos see every update; the messages of one network read
 * make one update (and React batches updates into renders).
 */
import { useCallback, useEffect, useInsertionEffect, useLayoutEffect, useRef, useState } from "react";

import {
  type DeepPartial,
  type Fields,
  type SlotResult,
  type SlotStream,
  type StreamOptions,
  streamSlots,
} from "./index.js";

/**
 * Options of {@link useSlotStream}. A `headers` function is, for each connection, the one
 * of the last committed render (as `onFinish` and `onError`), so one that reads a token
 * from state sends the current one on a reconnection.
 */
export interface UseSlotStreamOptions<T> extends Omit<StreamOptions, "signal" | "immutable"> {
  /** The gateway's stream route (`/v1/slot-streams`). */
  api: string | URL;
  /** The request body; `submit(body)` may pass another. */
  body?: unknown;
  /** Called with the result once the stream reaches `done`. */
  onFinish?: (result: SlotResult<T>) => void;
  /** Called when the stream fails (not when `stop()`, another `submit` or unmounting stops it). */
  onError?: (error: unknown) => void;
}

/** What {@link useSlotStream} returns. */
export interface UseSlotStreamResult<T> {
  /** The object so far (deep partial until `done`). */
  object: DeepPartial<T>;
  /** Each field's state, keyed by JSON Pointer. */
  fields: Fields<T>;
  /** Whether a stream is running. */
  isLoading: boolean;
  /** Why the last stream failed, if it did. */
  error: unknown;
  /**
   * Start a stream (stopping the running one) with `body`, or the options' body (also
   * when given an event, as with `onClick={submit}`).
   */
  submit: (body?: unknown) => void;
  /** Stop the running stream; what arrived stays. */
  stop: () => void;
  /**
   * Stop the running stream (as `stop()`, no `onError`) and empty the view: `object` and
   * `fields` as before the first `submit`, no `error`, not loading.
   */
  clear: () => void;
}

interface View<T> {
  object: DeepPartial<T>;
  fields: Fields<T>;
  isLoading: boolean;
  error: unknown;
}

/** Stream a slotflight object into a component. */
export function useSlotStream<T = Record<string, unknown>>(options: UseSlotStreamOptions<T>): UseSlotStreamResult<T> {
  const [view, setView] = useState<View<T>>(empty);
  // The options of the last committed render (those of the first render until then),
  // for submit and the callbacks. Not written during render: React may throw a render
  // away (a transition that suspended or was interrupted) and keep the committed one. An
  // insertion effect runs in the commit before every layout and passive effect, children's
  // included, so an effect of that commit that submits sees its options.
  const latest = useRef(options);
  useInsertionEffect(() => {
    latest.current = options;
  });
  const current = useRef<SlotStream<T> | undefined>(undefined);
  // false once unmounted (undefined before the first commit: a child's effect may submit).
  const mounted = useRef<boolean | undefined>(undefined);

  const stop = useCallback(() => {
    const stream = current.current;
    current.current = undefined;
    if (stream) {
      stream.abort();
      setView((old) => ({ ...old, isLoading: false }));
    }
  }, []);

  const clear = useCallback(() => {
    const stream = current.current;
    current.current = undefined;
    stream?.abort();
    setView(empty);
  }, []);

  // Whether `stream` is the one the view shows: not stopped, replaced, or unmounted.
  const live = (stream: SlotStream<T>): boolean => current.current === stream && mounted.current !== false;

  const submit = useCallback(
    (body?: unknown) => {
      // After unmounting nothing would stop the stream: start none.
      if (mounted.current === false) return;
      current.current?.abort();
      const { api, body: defaultBody, ...rest } = latest.current;
      // `onClick={submit}` passes the click event: the options' body is meant then.
      const given = body === undefined || isEvent(body) ? defaultBody : body;
      // A headers function: that of the last committed render, for each connection.
      const headers =
        typeof rest.headers === "function"
          ? () => {
              const now = latest.current.headers ?? {};
              return typeof now === "function" ? now() : now;
            }
          : rest.headers;
      const stream = streamSlots<T>(api, given, { ...rest, headers, immutable: true });
      current.current = stream;
      const show = (isLoading: boolean, error?: unknown) =>
        setView({ object: stream.object, fields: stream.fields, isLoading, error });
      show(true);
      // The messages of one network read are applied together: the view takes them
      // once, so the fields map is copied once per read, not once per message.
      let queued = false;
      stream.on("message", () => {
        if (queued) return;
        queued = true;
        queueMicrotask(() => {
          queued = false;
          if (live(stream)) show(true);
        });
      });
      stream.result.then(
        (result) => {
          if (!live(stream)) return;
          current.current = undefined;
          show(false);
          latest.current.onFinish?.(result);
        },
        (error: unknown) => {
          if (!live(stream)) return; // stopped, replaced or unmounted
          current.current = undefined;
          show(false, error);
          latest.current.onError?.(error);
        },
      );
    },
    [],
  );

  // Unmounting stops the stream; it did not fail, so no onError. A layout effect: it is
  // set again (StrictMode's second mount) before any passive effect may submit.
  // StrictMode (development) unmounts and mounts again in one go: the stream is stopped
  // a microtask later, unless the component was mounted again, so that a stream started
  // by the first mount's effects goes on.
  useIsomorphicLayoutEffect(() => {
    mounted.current = true;
    // Shown again after its effects were cleaned up and its stream stopped (an
    // <Activity> hidden, then visible): what arrived stays, nothing is loading.
    if (!current.current) setView((old) => (old.isLoading ? { ...old, isLoading: false } : old));
    return () => {
      mounted.current = false;
      queueMicrotask(() => {
        if (mounted.current) return;
        const stream = current.current;
        current.current = undefined;
        stream?.abort();
      });
    };
  }, []);

  return { ...view, submit, stop, clear };
}

/** The view before the first stream, and after `clear()`. */
function empty<T>(): View<T> {
  return { object: {} as DeepPartial<T>, fields: {} as Fields<T>, isLoading: false, error: undefined };
}

/** useLayoutEffect in a browser; useEffect where there is no DOM (server rendering, which runs neither). */
const useIsomorphicLayoutEffect = typeof document === "undefined" ? useEffect : useLayoutEffect;

function isEvent(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    ("nativeEvent" in value || (typeof Event !== "undefined" && value instanceof Event))
  );
}
