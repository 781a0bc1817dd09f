import { expectTypeOf, it } from "vitest";
import type { HeadroomResponse } from "../../src/api/schemas/headroom.js";
import type { Headroom, WindowView } from "../../src/page/client/headroom-types.js";

// The page's own copy of the headroom answer's shape (src/page/client/headroom-types.ts, compiled apart for
// the browser) checked against the API's zod schema, the one source of its OpenAPI document and
// types: the answer the API gives must be what the page reads. A field renamed or retyped in the
// schema fails `npm run typecheck` here, not in a browser.

type ApiWindow = NonNullable<HeadroomResponse["series"]>[number]["windows"][number];

it("the page's headroom types accept the API's answer", () => {
  expectTypeOf<HeadroomResponse>().toExtend<Headroom>();
  expectTypeOf<ApiWindow>().toExtend<WindowView>();
});
