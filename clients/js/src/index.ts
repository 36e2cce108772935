/**
 * slotflight: stream structured output from a slotflight gateway.
 *
 *     import { streamSlots } from "slotflight";
 *     const stream = streamSlots<Triage>("/v1/slot-streams", body);
 *     stream.on("field-complete", (pointer, field) => console.log(pointer, field.value));
 *     const { object } = await stream.result;
 */
export { SlotStreamError, type ClientErrorCode } from "./errors.js";
export { escapeToken, parsePointer } from "./pointer.js";
export type { FromSchema } from "./schema.js";
export { sseParser, type SseMessage, type SseSink } from "./sse.js";
export {
  DEFAULT_MAX_STATE_CHARS,
  SlotState,
  type Applied,
  type FieldChange,
  type SlotStateOptions,
} from "./state.js";
export {
  SlotStream,
  streamSlots,
  type SlotEnd,
  type SlotResult,
  type SlotStreamEvents,
  type StreamOptions,
} from "./stream.js";
export type * from "./types.js";
