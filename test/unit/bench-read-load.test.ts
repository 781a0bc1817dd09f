import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runReaders } from "../../bench/read-load.js";

// The readers against a server of the test's own: /slow-400 refuses after 300 ms, /etag answers
// 200 with an ETag, then 304 to a request naming it.

let server: Server;
let url = "";
const seen: Array<{ path: string; ifNoneMatch: string | undefined }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ path: req.url ?? "", ifNoneMatch: req.headers["if-none-match"] });
    if (req.url?.startsWith("/slow-400")) {
      setTimeout(() => res.writeHead(400).end("{}"), 300);
    } else if (req.headers["if-none-match"] === '"v1"') {
      res.writeHead(304, { etag: '"v1"' }).end();
    } else {
      res.writeHead(200, { etag: '"v1"', "content-type": "application/json" }).end("{}");
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe("bench read load", () => {
  it("times only the answers that succeeded; failed ones are counted by status", async () => {
    const result = await runReaders({
      url,
      keys: ["k1", "k2"],
      targets: [
        { name: "refused", path: "/slow-400", everyMs: 250 },
        { name: "fine", path: "/etag", everyMs: 250, revalidate: true },
      ],
      readers: 2,
      durationS: 1,
      acceptEncoding: "",
      decodeEvery: 1,
      model: "dashboards",
    });
    const refused = result.byEndpoint.refused;
    expect(refused?.statuses["400"]).toBeGreaterThan(0);
    expect(refused?.requests).toBe(refused?.statuses["400"]);
    // No latency of a 400 reads as a result, though each took 300 ms.
    expect(refused?.latencyMs).toEqual({ p50: 0, p90: 0, p99: 0, max: 0, mean: 0 });
    const fine = result.byEndpoint.fine;
    // Each reader's first at least (a slow first answer leaves the next without an ETag).
    expect(fine?.statuses["200"]).toBeGreaterThanOrEqual(2);
    expect(fine?.statuses["304"]).toBeGreaterThan(0);
    expect(fine?.latencyMs.max).toBeGreaterThan(0);
    expect(seen.filter((s) => s.path === "/etag" && s.ifNoneMatch === '"v1"').length).toBe(
      fine?.statuses["304"],
    );
  });

  it("a target asked by some readers is asked by that many only", async () => {
    const result = await runReaders({
      url,
      keys: ["k1"],
      targets: [{ name: "few", path: "/etag", everyMs: 400, readers: 1 }],
      readers: 3,
      durationS: 1,
      acceptEncoding: "",
      decodeEvery: 1,
      model: "dashboards",
    });
    expect(result.byEndpoint.few).toMatchObject({ readers: 1, requests: 3 });
  });
});
