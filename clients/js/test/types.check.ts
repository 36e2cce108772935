// Type-level checks of FromSchema, DeepPartial and FieldPointer, and of the options
// and hook result, compiled by types.test.mjs: a wrong type is a compile error here.
import type { DeepPartial, FieldPointer, FromSchema, StreamOptions } from "../src/index.js";
import type { UseSlotStreamOptions, UseSlotStreamResult } from "../src/react.js";

type Equal<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
function expect<T extends true>(): T | undefined {
  return undefined;
}

const triage = {
  type: "object",
  properties: {
    summary: { type: "string" },
    sentiment: { enum: ["positive", "neutral", "negative"] },
    priority: { type: "integer" },
    note: { type: ["string", "null"] },
    owner: { $ref: "#/$defs/Owner" },
    kind: { anyOf: [{ const: "bug" }, { const: "question" }] },
    items: { type: "array", items: { type: "object", properties: { task: { type: "string" } }, required: ["task"] } },
  },
  required: ["summary", "sentiment", "priority", "items"],
  $defs: { Owner: { type: "object", properties: { name: { type: "string" } }, required: ["name"] } },
} as const;

type Triage = FromSchema<typeof triage>;
expect<
  Equal<
    Triage,
    {
      summary: string;
      sentiment: "positive" | "neutral" | "negative";
      priority: number;
      items: { task: string }[];
      note?: string | null;
      owner?: { name: string };
      kind?: "bug" | "question";
    }
  >
>();
expect<Equal<DeepPartial<{ a: { b: string[] } }>, { a?: { b?: string[] } }>>();
expect<Equal<FieldPointer<{ a: { b: string }; "x/y": number }>, "/a" | "/a/b" | "/x~1y">>();
// As escapeToken: every "~" is "~0", every "/" is "~1", in whatever order they come.
expect<Equal<FieldPointer<{ "a/b~c": number; "~/": number; "x~y/z~": number }>, "/a~1b~0c" | "/~0~1" | "/x~0y~1z~0">>();
expect<Equal<FromSchema<{ type: "object" }>, Record<string, unknown>>>();

// headers: a record, or a function giving one (or a promise of one) for each connection;
// credentials: fetch's.
export const options: StreamOptions[] = [
  { headers: { authorization: "Bearer t" } },
  { headers: () => ({ authorization: "Bearer t" }) },
  { headers: async () => ({ authorization: "Bearer t" }) },
  { credentials: "include" },
];
// @ts-expect-error: header values are strings
export const numeric: StreamOptions = { headers: async () => ({ authorization: 1 }) };
// @ts-expect-error: credentials is a RequestCredentials
export const always: StreamOptions = { credentials: "always" };
export const hook: UseSlotStreamOptions<Triage> = { api: "/v1/slot-streams", headers: async () => ({}), credentials: "same-origin" };
expect<Equal<UseSlotStreamResult<Triage>["clear"], () => void>>();
