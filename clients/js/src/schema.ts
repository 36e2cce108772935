/**
 * `FromSchema<S>`: the TypeScript type of the instances of a JSON Schema written
 * `as const`. It covers what slot streams use: `type` (one or a list), `properties`
 * with `required`, `items`, `enum`, `const`, `anyOf`/`oneOf`, and local `$ref`s to
 * `$defs` or `definitions` (one level of names, resolved against the root schema).
 * What it cannot read becomes `unknown`.
 *
 *     const schema = { type: "object", properties: { title: { type: "string" } },
 *                      required: ["title"] } as const;
 *     type Item = FromSchema<typeof schema>;   // { title: string }
 */

type Depth = [never, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12];

type Simplify<T> = { [K in keyof T]: T[K] } & {};

type Primitive<N> = N extends "string"
  ? string
  : N extends "number" | "integer"
    ? number
    : N extends "boolean"
      ? boolean
      : N extends "null"
        ? null
        : never;

type Defs<R> = R extends { $defs: infer D } ? D : R extends { definitions: infer D } ? D : {};

type RefTarget<P, R> = P extends `#/$defs/${infer N}` | `#/definitions/${infer N}`
  ? N extends keyof Defs<R>
    ? Defs<R>[N]
    : unknown
  : unknown;

type ObjectOf<S, R, D extends number> = S extends { properties: infer P }
  ? Simplify<
      {
        -readonly [K in keyof P as K extends RequiredKeys<S> ? K : never]: Infer<P[K], R, D>;
      } & {
        -readonly [K in keyof P as K extends RequiredKeys<S> ? never : K]?: Infer<P[K], R, D>;
      }
    >
  : Record<string, unknown>;

type RequiredKeys<S> = S extends { required: readonly (infer K)[] } ? K : never;

type ByType<S, N, R, D extends number> = N extends "object"
  ? ObjectOf<S, R, D>
  : N extends "array"
    ? S extends { items: infer I }
      ? Infer<I, R, D>[]
      : unknown[]
    : Primitive<N>;

type Infer<S, R, D extends number> = [D] extends [never]
  ? unknown
  : S extends { $ref: infer P }
    ? Infer<RefTarget<P, R>, R, Depth[D]>
    : S extends { const: infer C }
      ? C
      : S extends { enum: readonly (infer E)[] }
        ? E
        : S extends { anyOf: readonly (infer A)[] }
          ? Infer<A, R, Depth[D]>
          : S extends { oneOf: readonly (infer A)[] }
            ? Infer<A, R, Depth[D]>
            : S extends { type: readonly (infer N)[] }
              ? ByType<S, N, R, Depth[D]>
              : S extends { type: infer N }
                ? ByType<S, N, R, Depth[D]>
                : S extends { properties: object }
                  ? ObjectOf<S, R, Depth[D]>
                  : unknown;

/** The type of the instances of the JSON Schema `S` (declared `as const`). */
export type FromSchema<S> = Infer<S, S, 12>;
